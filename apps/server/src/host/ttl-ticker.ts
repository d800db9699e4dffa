import { type DataGroupPort, parsePartitionId } from '@mq/data-service'
import { FORMAT_LEVEL_TTL_REDRIVE_LINES } from '@mq/protocol'
import { inTurn, type LedPartition, ledGroups, type RoundCursor } from './led-groups'

/**
 * Ticks one round proposes at most, over every led partition (each is one Raft entry of a data
 * group, which expires, makes ready or deletes up to the partition's `expiryBatchMax` messages
 * of each kind: 1,000 by default). A partition still due after a tick
 * is ticked again in the same round, so a backlog that outlived its TTL at once (consumers
 * down for long) is cleared at up to 64,000 messages a second, not 1,000.
 */
export const TTL_TICKS_PER_ROUND_MAX = 64

export interface TtlTickerHost {
  /** The data groups hosted here (only those this node leads are looked at). */
  groups(): Iterable<DataGroupPort>
  /** The cluster's format level (1 when not given): what the ticks may ask of the partitions. */
  formatLevel?(): number
}

/**
 * Makes time move in the partitions without traffic: now and then (a round), each data group's
 * leader proposes a `tick` for every partition whose next lease deadline or delayed message is
 * due (`timedPartitionIds`: leases expire, messages past their max deliveries are dead-lettered,
 * delayed messages become ready), and for every partition with a TTL whose oldest ready message
 * has outlived it (`ttlDue`, a read on the leader); the tick, applied on every replica at the
 * entry's time, does that work (weighted-queue's apply contract; `expireTtl`). Between rounds,
 * any entry of the partition (a lease, say) does the same work first.
 * At most TTL_TICKS_PER_ROUND_MAX ticks a round; a round whose budget ran out is followed by one
 * that begins with the next partition.
 */
export class TtlTicker {
  readonly #host: TtlTickerHost
  #busy = false
  /** Where the last round's budget ran out (undefined: it did not). */
  #cursor: RoundCursor | undefined

  constructor(host: TtlTickerHost) {
    this.#host = host
  }

  /** One round; resolves with the partitions it ticked (`group:queue/index`). Failures end it quietly. */
  async round(): Promise<string[]> {
    if (this.#busy) return []
    this.#busy = true
    const ticked: string[] = []
    let served: RoundCursor | undefined
    try {
      const due: (LedPartition & { readonly nowMs: number })[] = []
      for (const port of ledGroups(this.#host.groups())) {
        // The time a tick proposed now applies at, at the earliest (queue-handlers' leaderNowMs).
        const nowMs = Math.max(port.nowMs(), port.machine.clockMs())
        const ids = new Set([...port.machine.timedPartitionIds(nowMs), ...port.machine.ttlPartitionIds()])
        for (const id of ids) due.push({ port, id, nowMs })
      }
      const after = this.#cursor
      this.#cursor = undefined
      // From level 19 a tick also deletes an ordered key's line of outlived messages (before,
      // one per tick: the turn passed to the next in line, outlived or not).
      const tick =
        (this.#host.formatLevel?.() ?? 1) >= FORMAT_LEVEL_TTL_REDRIVE_LINES
          ? ({ type: 'tick', ttlWaiting: true } as const)
          : ({ type: 'tick' } as const)
      for (const { port, id, nowMs } of inTurn(due, after)) {
        const ref = parsePartitionId(id)
        if (!ref) continue
        served = { groupId: port.groupId, id }
        while (
          ticked.length < TTL_TICKS_PER_ROUND_MAX &&
          (port.machine.nextTimedMs(ref.queue, ref.index) <= nowMs ||
            (await port.machine.ttlDue(ref.queue, ref.index, nowMs)))
        ) {
          const r = await port.propose({
            type: 'apply',
            queue: ref.queue,
            partition: ref.index,
            command: tick,
          })
          if (r.type !== 'applied' || r.result.type === 'rejected') break
          ticked.push(`${port.groupId}:${id}`)
        }
        if (ticked.length >= TTL_TICKS_PER_ROUND_MAX) {
          this.#cursor = served
          return ticked
        }
      }
      return ticked
    } catch {
      this.#cursor = served // lost leadership, a closed group: the next round begins after it
      return ticked
    } finally {
      this.#busy = false
    }
  }
}
