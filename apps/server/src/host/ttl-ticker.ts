import { type DataGroupPort, parsePartitionId } from '@mq/data-service'
import { ledGroups } from './led-groups'

/**
 * Ticks one round proposes at most (each is one Raft entry of a data group, deleting up to the
 * partition's `expiryBatchMax` messages: 1,000 by default). A partition still due after a tick
 * is ticked again in the same round, so a backlog that outlived its TTL at once (consumers
 * down for long) is cleared at up to 64,000 messages a second, not 1,000.
 */
export const TTL_TICKS_PER_ROUND_MAX = 64

export interface TtlTickerHost {
  /** The data groups hosted here (only those this node leads are looked at). */
  groups(): Iterable<DataGroupPort>
}

/**
 * Makes a queue's message TTL hold without traffic: now and then (a round), each data group's
 * leader proposes a `tick` for every partition with a TTL whose oldest ready message has
 * outlived it (`ttlDue`, a read on the leader); the tick, applied on every replica at the
 * entry's time, deletes them (weighted-queue's `expireTtl`). Between rounds, a lease never
 * hands out such a message anyway (it checks at the lease).
 */
export class TtlTicker {
  readonly #host: TtlTickerHost
  #busy = false

  constructor(host: TtlTickerHost) {
    this.#host = host
  }

  /** One round; resolves with the partitions it ticked (`group:queue/index`). Failures end it quietly. */
  async round(): Promise<string[]> {
    if (this.#busy) return []
    this.#busy = true
    const ticked: string[] = []
    try {
      for (const port of ledGroups(this.#host.groups())) {
        for (const id of port.machine.ttlPartitionIds()) {
          if (ticked.length >= TTL_TICKS_PER_ROUND_MAX) return ticked
          const ref = parsePartitionId(id)
          if (!ref) continue
          while (
            ticked.length < TTL_TICKS_PER_ROUND_MAX &&
            (await port.machine.ttlDue(ref.queue, ref.index, port.nowMs()))
          ) {
            const r = await port.propose({
              type: 'apply',
              queue: ref.queue,
              partition: ref.index,
              command: { type: 'tick' },
            })
            if (r.type !== 'applied') break
            ticked.push(`${port.groupId}:${id}`)
          }
        }
      }
      return ticked
    } catch {
      return ticked
    } finally {
      this.#busy = false
    }
  }
}
