import type { MqClient } from '@mq/router-client'

interface Entry {
  readonly client: Promise<MqClient>
  /** Calls of `use` under way with this client. */
  users: number
  /** Left the cache: closed when its last user is done. */
  evicted: boolean
}

/**
 * The SDK clients the console API calls the cluster through, one per token ('' = none), at
 * most `max` cached (the least recently used leaves first). Only tokens the server already
 * authenticated reach here, so the set of keys is small. A client whose connect fails is not
 * kept: the next request tries again. Clients are counted while in use: one that leaves the
 * cache is closed once its last call is done, not under it (so at most `max` plus the calls
 * under way are open).
 */
export class ConsoleClients {
  readonly #open: (token: string) => Promise<MqClient>
  readonly #max: number
  readonly #entries = new Map<string, Entry>()

  constructor(open: (token: string) => Promise<MqClient>, max = 8) {
    this.#open = open
    this.#max = max
  }

  /**
   * Runs `call` with the client of `token` (connected first when there is none) and resolves
   * or rejects as it does; the client stays open until `call` settles.
   */
  async use<T>(token: string, call: (client: MqClient) => Promise<T>): Promise<T> {
    const entry = this.#acquire(token)
    try {
      return await call(await entry.client)
    } finally {
      entry.users--
      if (entry.evicted && entry.users === 0) closeQuietly(entry)
    }
  }

  #acquire(token: string): Entry {
    let entry = this.#entries.get(token)
    if (entry) {
      this.#entries.delete(token) // re-inserted below: the map's order is recency
    } else {
      const created: Entry = { client: this.#open(token), users: 0, evicted: false }
      created.client.catch(() => {
        if (this.#entries.get(token) === created) this.#entries.delete(token)
      })
      entry = created
    }
    entry.users++
    this.#entries.set(token, entry)
    while (this.#entries.size > this.#max) {
      const [oldest, evicted] = this.#entries.entries().next().value as [string, Entry]
      this.#entries.delete(oldest)
      evicted.evicted = true
      if (evicted.users === 0) closeQuietly(evicted)
    }
    return entry
  }

  /** Clients cached (not counting evicted ones still in use). */
  get size(): number {
    return this.#entries.size
  }

  /** Closes the cached clients (at shutdown: calls under way with them fail). */
  async close(): Promise<void> {
    const all = [...this.#entries.values()]
    this.#entries.clear()
    await Promise.allSettled(all.map(async (e) => (await e.client).close()))
  }
}

function closeQuietly(entry: Entry): void {
  entry.client.then((c) => c.close()).catch(() => {})
}
