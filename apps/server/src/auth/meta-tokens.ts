import { createHash } from 'node:crypto'
import { parseRole, type Role, type TokenRecord, type TokenRegistry } from '@mq/meta-service'
import type { StoredToken } from '@mq/protocol'
import type { TokenEntry } from './token-file'

/**
 * The lookup table (digest → token) of the client tokens kept in the meta group, as this
 * node knows them: read from its own meta replica when it has one (rebuilt when the
 * registry changes), else as the meta leader sends them with heartbeat answers (only when
 * their fingerprint changed). The fingerprint is a hash of the tokens' content, the same on
 * every meta replica.
 */
export class MetaTokenTable {
  #table: ReadonlyMap<string, TokenEntry> = new Map()
  #fingerprint = ''
  /** The registry last read, and its version then (a new replica's registry counts from 0 again). */
  #registry: TokenRegistry | undefined
  #registryVersion = -1

  /** The fingerprint of the tokens held ('' = none received yet). */
  get fingerprint(): string {
    return this.#fingerprint
  }

  /** The table from a local meta replica's registry. */
  fromRegistry(registry: TokenRegistry): ReadonlyMap<string, TokenEntry> {
    if (registry !== this.#registry || registry.version !== this.#registryVersion) {
      this.#registry = registry
      this.#registryVersion = registry.version
      this.#set(registry.list())
    }
    return this.#table
  }

  /** Takes the tokens of a heartbeat answer (an empty list with an unchanged fingerprint keeps the table). */
  fromHeartbeat(tokens: readonly StoredToken[], fingerprint: string): void {
    if (fingerprint === this.#fingerprint) return
    this.#set(tokens)
  }

  /** The table as last received. */
  current(): ReadonlyMap<string, TokenEntry> {
    return this.#table
  }

  /** What a heartbeat answer carries for a node that holds `fingerprint`. */
  forHeartbeat(
    registry: TokenRegistry,
    fingerprint: string,
  ): { tokens: StoredToken[]; tokensFingerprint: string } {
    this.fromRegistry(registry)
    if (fingerprint === this.#fingerprint) return { tokens: [], tokensFingerprint: this.#fingerprint }
    const tokens = registry
      .list()
      .map((t) => ({ name: t.name, sha256: t.sha256, roles: [...t.roles], expiresAtMs: t.expiresAtMs }))
    return { tokens, tokensFingerprint: this.#fingerprint }
  }

  #set(
    tokens: readonly (Pick<TokenRecord, 'name' | 'sha256' | 'expiresAtMs'> & {
      readonly roles: readonly string[]
    })[],
  ): void {
    const table = new Map<string, TokenEntry>()
    const hash = createHash('sha256')
    for (const t of [...tokens].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
      // The expiry only when there is one: the same fingerprint as before lifetimes for the
      // same tokens (a node and a meta leader of two versions would otherwise never agree, and
      // every heartbeat answer would carry the whole list during a rolling upgrade).
      const expiry = t.expiresAtMs ? `\x01${t.expiresAtMs}` : ''
      hash.update(`${t.name}\0${t.sha256}\0${t.roles.join('\0')}${expiry}\n`)
      const roles = t.roles.map(parseRole).filter((r): r is Role => r !== undefined)
      table.set(t.sha256, { name: t.name, sha256: t.sha256, roles, expiresAtMs: t.expiresAtMs })
    }
    this.#table = table
    this.#fingerprint = hash.digest('hex')
  }
}
