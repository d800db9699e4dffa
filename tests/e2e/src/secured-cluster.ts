import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { runBuilt } from './run-built'

/** A client token of the token file (`--auth-file`). */
export interface TokenEntry {
  readonly name: string
  readonly token: string
  readonly roles: readonly string[]
}

/** The flags of a secured node and what its clients need. */
export interface SecuredNode {
  /** `--auth-file`, `--peer-token` and, with TLS, `--tls-cert`, `--tls-key`, `--tls-ca`. */
  readonly serverArgs: string[]
  /** The dev CA that signs the nodes' certificates (with TLS). */
  readonly ca?: Buffer
  /** Where the certificates are (with TLS): `ca.crt`, `node.crt`, `node.key`. */
  readonly certs?: string
  readonly authFile: string
}

/**
 * Writes a token file of `tokens` under `dir` and, with `tls`, dev certificates (mq-server
 * dev-certs), and returns the flags that secure a node with them, the cluster's peer secret
 * `peerToken` included.
 */
export async function securedNode(
  dir: string,
  tokens: readonly TokenEntry[],
  options: { readonly tls: boolean; readonly peerToken: string },
): Promise<SecuredNode> {
  const authFile = join(dir, 'tokens.json')
  writeFileSync(authFile, JSON.stringify({ tokens }))
  const serverArgs = ['--auth-file', authFile, '--peer-token', options.peerToken]
  if (!options.tls) return { serverArgs, authFile }
  const certs = join(dir, 'certs')
  const made = await runBuilt('server', ['dev-certs', certs])
  if (made.code !== 0) throw new Error(`mq-server dev-certs failed: ${made.err}`)
  serverArgs.push(
    '--tls-cert',
    join(certs, 'node.crt'),
    '--tls-key',
    join(certs, 'node.key'),
    '--tls-ca',
    join(certs, 'ca.crt'),
  )
  return { serverArgs, ca: readFileSync(join(certs, 'ca.crt')), certs, authFile }
}
