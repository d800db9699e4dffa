import { readFileSync } from 'node:fs'
import { createSecureContext } from 'node:tls'
import type { experimental } from '@grpc/grpc-js'
import { ConfigError } from './config'

type CaListener = experimental.CaCertificateUpdateListener
type IdentityListener = experimental.IdentityCertificateUpdateListener

/** Where a node's PEM files are, and the flags that named them (for errors). */
export interface PemPaths {
  readonly cert: string
  readonly key: string
  readonly ca: string
}

interface Pems {
  readonly cert: Buffer
  readonly key: Buffer
  readonly ca: Buffer
}

/**
 * A node's certificate, key and CA as grpc-js certificate providers: read at start and again
 * on `reload()` (SIGHUP), so that certificates are rotated without a restart. New
 * connections (to the node's server, and the node's own to its peers) use the files as last
 * loaded; open ones keep theirs. A reload that finds a file missing, not PEM, or a key that
 * does not match its certificate throws ConfigError and changes nothing.
 */
export class PemFiles implements experimental.CertificateProvider {
  readonly #paths: PemPaths
  #pems: Pems
  readonly #caListeners = new Set<CaListener>()
  readonly #identityListeners = new Set<IdentityListener>()

  constructor(paths: PemPaths) {
    this.#paths = paths
    this.#pems = readPems(paths)
  }

  /** The certificate and key as last loaded (PEM). */
  identity(): { readonly cert: Buffer; readonly key: Buffer } {
    return { cert: this.#pems.cert, key: this.#pems.key }
  }

  /** Reads the files again; on success new connections use them (see the class comment). */
  reload(): void {
    this.#pems = readPems(this.#paths)
    for (const listener of this.#caListeners) this.#sendCa(listener)
    for (const listener of this.#identityListeners) this.#sendIdentity(listener)
  }

  addCaCertificateListener(listener: CaListener): void {
    this.#caListeners.add(listener)
    this.#sendCa(listener)
  }

  removeCaCertificateListener(listener: CaListener): void {
    this.#caListeners.delete(listener)
  }

  addIdentityCertificateListener(listener: IdentityListener): void {
    this.#identityListeners.add(listener)
    this.#sendIdentity(listener)
  }

  removeIdentityCertificateListener(listener: IdentityListener): void {
    this.#identityListeners.delete(listener)
  }

  // Updates go out after the current call: grpc-js's server credentials register the server's
  // watcher only after they add their listener, and would miss an update given synchronously.
  #sendCa(listener: CaListener): void {
    const { ca } = this.#pems
    setImmediate(() => {
      if (this.#caListeners.has(listener)) listener({ caCertificate: ca })
    })
  }

  #sendIdentity(listener: IdentityListener): void {
    const { cert, key } = this.#pems
    setImmediate(() => {
      if (this.#identityListeners.has(listener)) listener({ certificate: cert, privateKey: key })
    })
  }
}

function readPems(paths: PemPaths): Pems {
  const pems = {
    cert: readPem(paths.cert, '--tls-cert'),
    key: readPem(paths.key, '--tls-key'),
    ca: readPem(paths.ca, '--tls-ca'),
  }
  try {
    createSecureContext(pems)
  } catch (error) {
    throw new ConfigError(
      `--tls-cert ${paths.cert}, --tls-key ${paths.key}, --tls-ca ${paths.ca}: ${(error as Error).message}`,
      { cause: error },
    )
  }
  return pems
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
