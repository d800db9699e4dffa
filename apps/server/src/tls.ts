import { readFileSync } from 'node:fs'
import { type ChannelCredentials, credentials, ServerCredentials } from '@grpc/grpc-js'
import { ConfigError } from './config'

/** The TLS settings of a node (see ServerConfig); all paths '' = plaintext. */
export interface TlsSettings {
  readonly tlsCert: string
  readonly tlsKey: string
  readonly tlsCa: string
  readonly tlsClientAuth: boolean
}

/** The PEM files, read once at start. */
interface TlsFiles {
  readonly cert: Buffer
  readonly key: Buffer
  readonly ca: Buffer
}

/**
 * A node's gRPC credentials: what its server presents and requires, and what it presents as
 * a client of its peers. With TLS on, a node verifies peers against the cluster CA and
 * presents its own certificate to them (so mutual TLS between peers works); with
 * `tlsClientAuth`, its server refuses callers without a certificate signed by that CA.
 */
export class NodeCredentials {
  readonly #files: TlsFiles | undefined
  readonly #clientAuth: boolean

  constructor(settings: TlsSettings) {
    this.#clientAuth = settings.tlsClientAuth
    this.#files =
      settings.tlsCert === ''
        ? undefined
        : {
            cert: readPem(settings.tlsCert, '--tls-cert'),
            key: readPem(settings.tlsKey, '--tls-key'),
            ca: readPem(settings.tlsCa, '--tls-ca'),
          }
  }

  get tls(): boolean {
    return this.#files !== undefined
  }

  server(): ServerCredentials {
    const f = this.#files
    if (!f) return ServerCredentials.createInsecure()
    return ServerCredentials.createSsl(f.ca, [{ cert_chain: f.cert, private_key: f.key }], this.#clientAuth)
  }

  /** Credentials for calls to peers (Raft streams, heartbeats, route lookups). */
  peer(): ChannelCredentials {
    const f = this.#files
    return f ? credentials.createSsl(f.ca, f.key, f.cert) : credentials.createInsecure()
  }
}

function readPem(path: string, flag: string): Buffer {
  let pem: Buffer
  try {
    pem = readFileSync(path)
  } catch (error) {
    throw new ConfigError(`${flag} ${path}: ${(error as Error).message}`, { cause: error })
  }
  if (!pem.includes('-----BEGIN ')) throw new ConfigError(`${flag} ${path} is not a PEM file`)
  return pem
}
