import { checkServerIdentity, type PeerCertificate } from 'node:tls'
import { type ChannelCredentials, credentials, experimental, ServerCredentials } from '@grpc/grpc-js'
import { certificateNames, quotedNames } from './auth/peer-identity'
import type { HttpTls } from './http/http-server'
import { PemFiles } from './pem-files'

/** The TLS settings of a node (see ServerConfig); all paths '' = plaintext. */
export interface TlsSettings {
  readonly tlsCert: string
  readonly tlsKey: string
  readonly tlsCa: string
  readonly tlsClientAuth: boolean
  /** --tls-peer-ids: a peer's certificate must name the node it is reached as (peerFor). */
  readonly tlsPeerIds?: boolean
}

/**
 * Peer node ids NodeCredentials keeps credentials for at most: the meta group registers at
 * most 1,000 nodes (META_LIMITS.nodesMax), as many as the peer transport keeps (peersMax).
 */
const PEER_CREDENTIALS_MAX = 1_000

/**
 * A node's gRPC credentials: what its server presents and requires, and what it presents as
 * a client of its peers. With TLS on, a node verifies peers against the cluster CA and
 * presents its own certificate to them (so mutual TLS between peers works); with
 * `tlsClientAuth`, its server refuses callers without a certificate signed by that CA.
 * `reload()` reads the PEM files again (certificate rotation without a restart: PemFiles).
 */
export class NodeCredentials {
  readonly #files: PemFiles | undefined
  readonly #server: ServerCredentials
  readonly #peer: ChannelCredentials
  readonly #peerIds: boolean
  /**
   * Credentials per peer node id that check its certificate names it (with --tls-peer-ids),
   * the one asked for least recently first: at most PEER_CREDENTIALS_MAX (nodes replaced under
   * new ids were kept for the life of the process). One forgotten is made again when asked.
   */
  readonly #peerFor = new Map<string, ChannelCredentials>()

  constructor(settings: TlsSettings) {
    this.#peerIds = settings.tlsPeerIds ?? false
    if (settings.tlsCert === '') {
      this.#files = undefined
      this.#server = ServerCredentials.createInsecure()
      this.#peer = credentials.createInsecure()
      return
    }
    const files = new PemFiles({ cert: settings.tlsCert, key: settings.tlsKey, ca: settings.tlsCa })
    this.#files = files
    // One provider for both roles (grpc-js's factory names them in the other order).
    this.#server = experimental.createCertificateProviderServerCredentials(
      files,
      files,
      settings.tlsClientAuth,
    )
    this.#peer = experimental.createCertificateProviderChannelCredentials(files, files)
  }

  get tls(): boolean {
    return this.#files !== undefined
  }

  server(): ServerCredentials {
    return this.#server
  }

  /** Credentials for calls to peers (Raft streams, heartbeats, route lookups). */
  peer(): ChannelCredentials {
    return this.#peer
  }

  /**
   * Credentials for calls to peer `nodeId` (its Raft stream): with --tls-peer-ids, a server
   * whose certificate's CN is not `nodeId` is refused after the usual host name check (an
   * address given out for the node by mistake, or by a member that is not it). Else peer().
   */
  peerFor(nodeId: string): ChannelCredentials {
    const files = this.#files
    if (!files || !this.#peerIds) return this.#peer
    let c = this.#peerFor.get(nodeId)
    if (c)
      this.#peerFor.delete(nodeId) // set again below: the map's order is recency
    else {
      c = experimental.createCertificateProviderChannelCredentials(files, files, {
        // A checkServerIdentity replaces Node's host name check: it is called first here.
        checkServerIdentity: (host, cert) => checkServerIdentity(host, cert) ?? serverNamesNode(nodeId, cert),
      })
    }
    this.#peerFor.set(nodeId, c)
    if (this.#peerFor.size > PEER_CREDENTIALS_MAX)
      this.#peerFor.delete(this.#peerFor.keys().next().value as string)
    return c
  }

  /**
   * The node's certificate for its HTTP port (`--http-tls`), following reloads; undefined
   * when TLS is off.
   */
  httpTls(): HttpTls | undefined {
    const files = this.#files
    if (!files) return undefined
    return {
      identity: () => files.identity(),
      onReload: (listener) =>
        files.addIdentityCertificateListener((update) => {
          if (update) listener({ cert: update.certificate, key: update.privateKey })
        }),
    }
  }

  /**
   * Reads the certificate, key and CA files again: new connections use them. Throws
   * ConfigError (and keeps the files as they were) when one is missing or invalid. False when
   * TLS is off (nothing to read).
   */
  reload(): boolean {
    if (!this.#files) return false
    this.#files.reload()
    return true
  }
}

/** Undefined when `cert` names node `nodeId` (its CN, see peer-identity.ts), else the error saying why not. */
export function serverNamesNode(nodeId: string, cert: PeerCertificate): Error | undefined {
  const names = certificateNames(cert)
  if (names.has(nodeId)) return undefined
  return new Error(
    `the server reached as node ${JSON.stringify(nodeId)} presents a certificate for ${quotedNames(names) || 'no node'} (--tls-peer-ids)`,
  )
}
