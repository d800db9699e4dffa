import type { MqClient } from '@mq/router-client'

/**
 * The SDK clients the console API calls the cluster through, one per token ('' = none), at
 * most `max` (the least recently used is closed first). Only tokens the server already
 * authenticated reach here, so the set of keys is small. A client whose connect fails is not
 * kept: the next request tries again.
 */
export class ConsoleClients {
  readonly #open: (token: string) => Promise<MqClient>
  readonly #max: number
  readonly #clients = new Map<string, Promise<MqClient>>()

  constructor(open: (token: string) => Promise<MqClient>, max = 8) {
    this.#open = open
    this.#max = max
  }

  get(token: string): Promise<MqClient> {
    let client = this.#clients.get(token)
    if (client) {
      this.#clients.delete(token)
    } else {
      client = this.#open(token)
      client.catch(() => {
        if (this.#clients.get(token) === client) this.#clients.delete(token)
      })
    }
    this.#clients.set(token, client)
    while (this.#clients.size > this.#max) {
      const [oldest, evicted] = this.#clients.entries().next().value as [string, Promise<MqClient>]
      this.#clients.delete(oldest)
      evicted.then((c) => c.close()).catch(() => {})
    }
    return client
  }

  get size(): number {
    return this.#clients.size
  }

  async close(): Promise<void> {
    const all = [...this.#clients.values()]
    this.#clients.clear()
    await Promise.allSettled(all.map(async (c) => (await c).close()))
  }
}
