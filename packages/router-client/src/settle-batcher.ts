import type { LeaseResult } from '@mq/protocol'

/** What to do with a lease: ack it, nack it (with a delay) or extend it (by some ms). */
export type Settlement =
  | { readonly kind: 'ack' }
  | { readonly kind: 'nack'; readonly delayMs: number }
  | { readonly kind: 'extend'; readonly extendMs: number }

type Send = (settlement: Settlement, leaseIds: string[]) => Promise<LeaseResult[]>

interface Group {
  readonly settlement: Settlement
  readonly items: { leaseId: string; resolve: (r: LeaseResult) => void; reject: (e: unknown) => void }[]
}

/**
 * Coalesces the acks, nacks and extends of one partition into batched requests: those that
 * arrive within `lingerMs` of each other (up to `batchMax`) travel in one call, and each
 * caller gets its own lease's result.
 */
export class SettleBatcher {
  readonly #send: Send
  readonly #lingerMs: number
  readonly #batchMax: number
  readonly #groups = new Map<string, Group>()
  #timer: ReturnType<typeof setTimeout> | undefined

  constructor(send: Send, lingerMs = 1, batchMax = 1000) {
    this.#send = send
    this.#lingerMs = lingerMs
    this.#batchMax = batchMax
  }

  /** Queues `leaseId` for `settlement`; resolves with its result. */
  settle(leaseId: string, settlement: Settlement): Promise<LeaseResult> {
    const key = JSON.stringify(settlement)
    let group = this.#groups.get(key)
    if (!group) {
      group = { settlement, items: [] }
      this.#groups.set(key, group)
    }
    const promise = new Promise<LeaseResult>((resolve, reject) =>
      group.items.push({ leaseId, resolve, reject }),
    )
    if (group.items.length >= this.#batchMax) this.#flush(key)
    else this.#timer ??= setTimeout(() => this.flushAll(), this.#lingerMs)
    return promise
  }

  /** Sends everything queued now. */
  flushAll(): void {
    if (this.#timer) clearTimeout(this.#timer)
    this.#timer = undefined
    for (const key of [...this.#groups.keys()]) this.#flush(key)
  }

  #flush(key: string): void {
    const group = this.#groups.get(key)
    if (!group) return
    this.#groups.delete(key)
    const ids = group.items.map((i) => i.leaseId)
    this.#send(group.settlement, ids).then(
      (results) => {
        const byId = new Map(results.map((r) => [r.leaseId, r]))
        for (const item of group.items) {
          const r = byId.get(item.leaseId)
          if (r) item.resolve(r)
          else item.reject(new Error(`the broker returned no result for lease ${item.leaseId}`))
        }
      },
      (error: unknown) => {
        for (const item of group.items) item.reject(error)
      },
    )
  }
}
