import { execFileSync } from 'node:child_process'
import { existsSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { makeDirs } from './make-dirs'

export interface DevCertsOptions {
  readonly dir: string
  /** Host names and IP addresses the node certificate is valid for (besides localhost, 127.0.0.1 and ::1). */
  readonly hosts: readonly string[]
  readonly days: number
  /** Replace files already there. */
  readonly force: boolean
  /** The openssl binary. */
  readonly openssl?: string
}

/** The files dev-certs writes, by role. */
export const DEV_CERT_FILES = {
  caCert: 'ca.crt',
  caKey: 'ca.key',
  nodeCert: 'node.crt',
  nodeKey: 'node.key',
  clientCert: 'client.crt',
  clientKey: 'client.key',
} as const

/**
 * Makes a development CA and, signed by it, one node certificate (server and client use, for
 * every node of a local cluster: localhost, 127.0.0.1, ::1 and `hosts`) and one client
 * certificate (for mutual TLS), with P-256 keys, through the `openssl` command line. Refuses
 * to overwrite existing files unless `force`. Returns the paths written. Not for production:
 * the CA key sits beside the certificates.
 */
export function makeDevCerts(options: DevCertsOptions): Record<keyof typeof DEV_CERT_FILES, string> {
  const openssl = options.openssl ?? 'openssl'
  const path = (k: keyof typeof DEV_CERT_FILES) => join(options.dir, DEV_CERT_FILES[k])
  makeDirs(options.dir)
  if (!options.force) {
    const present = Object.keys(DEV_CERT_FILES).filter((k) =>
      existsSync(path(k as keyof typeof DEV_CERT_FILES)),
    )
    if (present.length > 0) {
      throw new Error(
        `${options.dir} already holds ${present.map((k) => DEV_CERT_FILES[k as keyof typeof DEV_CERT_FILES]).join(', ')}; pass --force to replace them`,
      )
    }
  }
  const run = (args: string[]) => {
    try {
      execFileSync(openssl, args, { stdio: ['ignore', 'ignore', 'pipe'] })
    } catch (error) {
      const stderr = (error as { stderr?: Buffer }).stderr?.toString().trim()
      throw new Error(`openssl ${args[0]} failed: ${stderr || (error as Error).message}`, { cause: error })
    }
  }
  const days = String(options.days)
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
  run([
    'req',
    '-x509',
    ...ec,
    '-keyout',
    path('caKey'),
    '-out',
    path('caCert'),
    '-days',
    days,
    '-subj',
    '/CN=mq dev CA',
  ])
  const sans = ['DNS:localhost', 'IP:127.0.0.1', 'IP:::1', ...options.hosts.map(san)]
  const sign = (name: 'node' | 'client', subject: string, ext: string) => {
    const csr = join(options.dir, `${name}.csr`)
    const extFile = join(options.dir, `${name}.ext`)
    writeFileSync(extFile, ext)
    try {
      run(['req', ...ec, '-keyout', path(`${name}Key`), '-out', csr, '-subj', subject])
      run([
        'x509',
        '-req',
        '-in',
        csr,
        '-CA',
        path('caCert'),
        '-CAkey',
        path('caKey'),
        '-CAcreateserial',
        '-days',
        days,
        '-extfile',
        extFile,
        '-out',
        path(`${name}Cert`),
      ])
    } finally {
      rmSync(csr, { force: true })
      rmSync(extFile, { force: true })
    }
  }
  sign(
    'node',
    '/CN=mq node',
    `basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=${[...new Set(sans)].join(',')}\n`,
  )
  sign(
    'client',
    '/CN=mq client',
    'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n',
  )
  rmSync(join(options.dir, 'ca.srl'), { force: true })
  return Object.fromEntries(
    Object.keys(DEV_CERT_FILES).map((k) => [k, path(k as keyof typeof DEV_CERT_FILES)]),
  ) as Record<keyof typeof DEV_CERT_FILES, string>
}

function san(host: string): string {
  return /^[0-9.]+$/.test(host) || host.includes(':') ? `IP:${host}` : `DNS:${host}`
}
