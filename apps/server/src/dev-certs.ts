import { execFileSync } from 'node:child_process'
import { existsSync, rmSync, writeFileSync } from 'node:fs'
import { isIP } from 'node:net'
import { basename, join } from 'node:path'
import { ConfigError } from './config'
import { makeDirs } from './make-dirs'
import { NODE_ID_PATTERN, NODE_ID_RULE } from './members'

export interface DevCertsOptions {
  readonly dir: string
  /** Host names and IP addresses the node certificate is valid for (besides localhost, 127.0.0.1 and ::1). */
  readonly hosts: readonly string[]
  readonly days: number
  /** Replace files already there. */
  readonly force: boolean
  /**
   * Also one certificate per node, `node-ID.crt`/`node-ID.key`, naming the node (CN and a DNS
   * name), for `--tls-peer-ids`.
   */
  readonly nodeIds?: readonly string[]
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
 * every node of a local cluster: localhost, 127.0.0.1, ::1 and `hosts`), one client
 * certificate (for mutual TLS) and, for each of `nodeIds`, a node certificate naming that
 * node (for `--tls-peer-ids`), with P-256 keys, through the `openssl` command line. Refuses
 * to overwrite existing files unless `force`. Returns the paths written. Not for production:
 * the CA key sits beside the certificates.
 */
export function makeDevCerts(options: DevCertsOptions): DevCertPaths {
  const openssl = options.openssl ?? 'openssl'
  const path = (k: keyof typeof DEV_CERT_FILES) => join(options.dir, DEV_CERT_FILES[k])
  const nodeIds = [...new Set(options.nodeIds ?? [])]
  const bad = nodeIds.find((id) => !NODE_ID_PATTERN.test(id))
  // ConfigError: a usage error (exit 2, as a bad --days; it exited 1, as a failed openssl).
  if (bad !== undefined)
    throw new ConfigError(`--node-ids: ${JSON.stringify(bad)} is not a node id (${NODE_ID_RULE})`)
  // Before anything is written: a host with a port (`mq.example:7001`) went to openssl as an
  // IP, which failed with its error stack after the CA and a key were written (and the same
  // command without the port was then refused: "already holds …; pass --force").
  const hosts = options.hosts.map((h) => h.replace(/^\[(.*)\]$/, '$1'))
  const badHost = hosts.find((h) => !isIP(h) && !DNS_NAME.test(h))
  if (badHost !== undefined)
    throw new ConfigError(
      `--hosts: ${JSON.stringify(badHost)} is not a host name or IP address (give names and addresses without a port, separated by commas)`,
    )
  const nodeFiles = new Map(nodeIds.map((id) => [id, nodeCertFiles(options.dir, id)]))
  makeDirs(options.dir)
  if (!options.force) {
    const present = [
      ...Object.keys(DEV_CERT_FILES).map((k) => path(k as keyof typeof DEV_CERT_FILES)),
      ...[...nodeFiles.values()].flatMap((f) => [f.cert, f.key]),
    ].filter((f) => existsSync(f))
    if (present.length > 0) {
      throw new Error(
        `${options.dir} already holds ${present.map((f) => basename(f)).join(', ')}; pass --force to replace them`,
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
  const sans = ['DNS:localhost', 'IP:127.0.0.1', 'IP:::1', ...hosts.map(san)]
  const sign = (files: { cert: string; key: string }, subject: string, ext: string) => {
    const csr = `${files.cert}.csr`
    const extFile = `${files.cert}.ext`
    writeFileSync(extFile, ext)
    try {
      run(['req', ...ec, '-keyout', files.key, '-out', csr, '-subj', subject])
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
        files.cert,
      ])
    } finally {
      rmSync(csr, { force: true })
      rmSync(extFile, { force: true })
    }
  }
  const nodeExt = (names: readonly string[]) =>
    `basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=${[...new Set(names)].join(',')}\n`
  sign({ cert: path('nodeCert'), key: path('nodeKey') }, '/CN=mq node', nodeExt(sans))
  sign(
    { cert: path('clientCert'), key: path('clientKey') },
    '/CN=mq client',
    'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n',
  )
  for (const [id, files] of nodeFiles) sign(files, `/CN=${id}`, nodeExt([`DNS:${id}`, ...sans]))
  rmSync(join(options.dir, 'ca.srl'), { force: true })
  const shared = Object.fromEntries(
    Object.keys(DEV_CERT_FILES).map((k) => [k, path(k as keyof typeof DEV_CERT_FILES)]),
  ) as Record<keyof typeof DEV_CERT_FILES, string>
  return { ...shared, nodes: Object.fromEntries(nodeFiles) }
}

/** The paths dev-certs wrote: the shared files by role, and each node's own (`nodes`, by id). */
export type DevCertPaths = Record<keyof typeof DEV_CERT_FILES, string> & {
  readonly nodes: Readonly<Record<string, { readonly cert: string; readonly key: string }>>
}

/** Where dev-certs writes node `id`'s own certificate and key. */
export function nodeCertFiles(dir: string, id: string): { cert: string; key: string } {
  return { cert: join(dir, `node-${id}.crt`), key: join(dir, `node-${id}.key`) }
}

function san(host: string): string {
  return isIP(host) ? `IP:${host}` : `DNS:${host}`
}

/** A DNS name a certificate may carry: labels of letters, digits, '-' and '_', or a leading `*.`. */
const DNS_NAME = /^(\*\.)?[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/
