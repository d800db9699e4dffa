import { type DataGroupPort, parsePartitionId, parseStoredQueueName } from '@mq/data-service'
import {
  DEAD_LETTER_DELIVERIES_HEADER,
  DEAD_LETTER_SOURCE_HEADER,
  FORMAT_LEVEL_DEAD_LETTER_QUEUE,
} from '@mq/protocol'
import type { DeadMessage } from '@mq/weighted-queue'
import { inTurn, type LedPartition, ledGroups, type RoundCursor } from './led-groups'

/** Dead-lettered messages copied per batch (one Produce to the target, one purge entry). */
export const DEAD_LETTER_BATCH = 100

/** Batches one round copies at most: 6,400 messages a round. */
export const DEAD_LETTER_BATCHES_PER_ROUND_MAX = 64

/** A dead message as it is enqueued into the dead-letter queue. */
export interface ForwardedMessage {
  readonly body: Uint8Array
  readonly headers: Readonly<Record<string, string>>
  readonly weight: number
  /** The message's key ('' for a keyless one, which stays keyless). */
  readonly key: string
  /**
   * Where a keyless copy goes: `mq-dlq/queueId/partition` (its source partition), as a
   * partition key (routes, is not stored).
   */
  readonly partitionKey: string | undefined
  /** Unique per death (`mq-dlq/queueId/partition/cursor`): a copy sent twice is enqueued once within the target's dedup window. */
  readonly dedupKey: string
}

/** A copy that did not happen this round (logged by the caller). */
export interface ForwardFailure {
  readonly queue: string
  readonly partition: number
  readonly target: string
  /** Set when this one message cannot go to the target (refused as invalid there): it stays behind. */
  readonly messageId?: number
  readonly error: unknown
}

export interface DeadLetterForwarderHost {
  /** The data groups hosted here (only those this node leads are looked at). */
  groups(): Iterable<DataGroupPort>
  /** The cluster's format level as this node last heard it. */
  formatLevel(): number
  /**
   * The dead-letter queue set on `queue` when `queueId` is its current incarnation; '' when it
   * has none, or the queue is gone or unknown.
   */
  deadLetterQueueOf(queue: string, queueId: number): Promise<string>
  /**
   * Whether the route of `queue` (incarnation `queueId`) places its partition `partition` in data
   * group `groupId`. A group may hold a complete, unfenced copy of a partition routed elsewhere
   * (a move aborted as its last chunk landed), whose dead letters the routed group forwards. A
   * route cached here may predate a move into `groupId`: false only once checked afresh.
   */
  placedIn(queue: string, queueId: number, partition: number, groupId: number): Promise<boolean>
  /**
   * Enqueues `messages` into queue `target`, in their order; resolves, once each has been
   * stored or has failed, with each one's error (undefined: durable there). Rejects when none
   * was stored (the target cannot be reached, say).
   */
  forward(target: string, messages: readonly ForwardedMessage[]): Promise<readonly unknown[]>
}

/** What a round did. */
export interface ForwardRound {
  readonly forwarded: number
  readonly failures: readonly ForwardFailure[]
}

/**
 * Moves dead-lettered messages to their queue's dead-letter queue (QueueConfig
 * `dead_letter_queue`), as SQS's redrive policy does. Now and then (a round) each data group's
 * leader lists the dead messages of every partition whose queue names one, enqueues a copy of
 * them into it (body, key, weight and headers, plus where and after how many deliveries it
 * died) and, once the copies are durable, proposes a purge of exactly that span of the
 * partition's dead-letter list (`purgeDead` with `after`/`through`: a message that died after
 * the listing stays for the next round). At least once: a leader that fails between the copy
 * and the purge leaves the span to its successor, which copies it again (the copies carry a
 * dedup key per death, so the target's dedup window, 5 min by default, drops the second).
 *
 * A target that does not exist (yet), or is unavailable, leaves the messages where they are
 * until a later round; a message the target refuses as invalid (too big for it, say) stays in
 * the source's dead-letter list and is skipped from then on by this leader (reported once);
 * what the target stored of the same batch is not sent again. At most `batchesPerRoundMax`
 * batches a round; a round whose budget ran out is followed by one that begins with the next
 * partition. Only from format level FORMAT_LEVEL_DEAD_LETTER_QUEUE (a replica of an earlier
 * version cannot read the span purge).
 */
export class DeadLetterForwarder {
  readonly #host: DeadLetterForwarderHost
  /** `group:partition id` → the place in its dead-letter list up to which messages stay behind. */
  readonly #skipThrough = new Map<string, number>()
  readonly #batchesPerRoundMax: number
  #busy = false
  /** Where the last round's budget ran out (undefined: it did not). */
  #cursor: RoundCursor | undefined

  constructor(host: DeadLetterForwarderHost, batchesPerRoundMax = DEAD_LETTER_BATCHES_PER_ROUND_MAX) {
    this.#host = host
    this.#batchesPerRoundMax = batchesPerRoundMax
  }

  /** One round. Failures of the cluster end a partition's turn quietly (reported), not the round. */
  async round(): Promise<ForwardRound> {
    const failures: ForwardFailure[] = []
    let forwarded = 0
    if (this.#busy || this.#host.formatLevel() < FORMAT_LEVEL_DEAD_LETTER_QUEUE)
      return { forwarded, failures }
    this.#busy = true
    const max = this.#batchesPerRoundMax
    let served: RoundCursor | undefined
    // The first partition whose target failed: the next round begins after it, so that the
    // partitions skipped for that target get their turn first (they would wait for good behind
    // a partition whose copies that target keeps refusing, a full partition of it say).
    let failedAt: RoundCursor | undefined
    try {
      let batches = 0
      const seen = new Set<string>()
      // A target that failed is not tried again this round (each try may wait out a deadline).
      const failedTargets = new Set<string>()
      const partitions: LedPartition[] = []
      for (const port of ledGroups(this.#host.groups()))
        for (const id of port.machine.deadPartitionIds()) partitions.push({ port, id })
      const resumeAfter = this.#cursor
      this.#cursor = undefined
      for (const { port, id } of inTurn(partitions, resumeAfter)) {
        const ref = parsePartitionId(id)
        const stored = ref ? parseStoredQueueName(ref.queue) : undefined
        if (!ref || !stored) continue
        const slot = `${port.groupId}:${id}`
        seen.add(slot)
        if (batches >= max) continue
        const target = await this.#host.deadLetterQueueOf(stored.queue, stored.queueId)
        if (!target || target === stored.queue || failedTargets.has(target)) continue
        // An aborted move's copy: its dead letters are the routed group's to forward.
        if (!(await this.#host.placedIn(stored.queue, stored.queueId, ref.index, port.groupId))) continue
        const from = {
          queue: stored.queue,
          queueId: stored.queueId,
          stored: ref.queue,
          partition: ref.index,
        }
        while (batches < max) {
          const after = this.#skipThrough.get(slot)
          const dead = await port.machine.listDead(ref.queue, ref.index, DEAD_LETTER_BATCH, after)
          if (!dead || dead.length === 0) break
          batches++
          served = { groupId: port.groupId, id }
          const { moved, stopped } = await this.#move(port, slot, from, target, dead, after, failures)
          forwarded += moved
          if (stopped) {
            // The target failed: its partitions wait for the next round.
            failedTargets.add(target)
            failedAt ??= { groupId: port.groupId, id }
            break
          }
        }
      }
      this.#cursor = batches >= max ? served : failedAt
      // Partitions no longer led here (or without dead messages) forget what they skipped.
      for (const slot of this.#skipThrough.keys()) if (!seen.has(slot)) this.#skipThrough.delete(slot)
      return { forwarded, failures }
    } catch {
      // Lost leadership, a closed group: the next round goes on, after this partition.
      this.#cursor = served
      return { forwarded, failures }
    } finally {
      this.#busy = false
    }
  }

  /**
   * Copies `dead` (listed after `after`) to `target` and purges what was copied; returns how
   * many went, and whether the target failed (`stopped`). A message the target refused as
   * invalid, alone or with its batch, is sent once more alone (what the target stored is not
   * sent again): refused alone, it is skipped from then on.
   */
  async #move(
    port: DataGroupPort,
    slot: string,
    from: { queue: string; queueId: number; stored: string; partition: number },
    target: string,
    dead: readonly DeadMessage[],
    after: number | undefined,
    failures: ForwardFailure[],
  ): Promise<{ moved: number; stopped: boolean }> {
    const copy = (m: DeadMessage) => forwardedOf(from, m)
    const purge = async (spanAfter: number | undefined, through: number, count: number): Promise<void> => {
      const r = await port.propose({
        type: 'apply',
        queue: from.stored,
        partition: from.partition,
        command: {
          type: 'purgeDead',
          max: count,
          through,
          ...(spanAfter === undefined ? {} : { after: spanAfter }),
        },
      })
      if (r.type !== 'applied' || r.result.type === 'rejected') throw new Error('the purge did not apply')
    }
    const failed = (error: unknown, messageId?: number) =>
      failures.push({
        queue: from.queue,
        partition: from.partition,
        target,
        ...(messageId === undefined ? {} : { messageId }),
        error,
      })
    let errors: readonly unknown[]
    try {
      errors = await this.#host.forward(target, dead.map(copy))
    } catch (error) {
      errors = dead.map(() => error) // none of them stored
    }
    // In list order: the span purged ends before a message the target refuses, and before
    // one that failed otherwise (it goes again next round, with those after it that failed
    // too; those the target stored are purged: sent again once its dedup window has passed, a
    // full partition of the target say, they would be stored again).
    let spanAfter = after
    let moved = 0
    let stopped = false
    let copied: DeadMessage[] = []
    const purgeCopied = async () => {
      if (copied.length === 0) return
      await purge(spanAfter, (copied.at(-1) as DeadMessage).cursor, copied.length)
      moved += copied.length
      copied = []
    }
    for (const [i, m] of dead.entries()) {
      let error = errors[i]
      if (stopped) {
        // After a failure, the target is not asked again this round.
        if (error === undefined) copied.push(m)
        else {
          await purgeCopied()
          spanAfter = m.cursor
        }
        continue
      }
      if (error !== undefined && refusedAsInvalid(error)) error = await this.#forwardOne(target, copy(m))
      if (error === undefined) {
        copied.push(m)
        continue
      }
      if (!refusedAsInvalid(error)) {
        failed(error)
        stopped = true
        await purgeCopied()
        spanAfter = m.cursor
        continue
      }
      failed(error, m.messageId)
      await purgeCopied()
      spanAfter = m.cursor
      this.#skipThrough.set(slot, m.cursor)
    }
    await purgeCopied()
    return { moved, stopped }
  }

  /** Sends `message` alone; resolves with its error (undefined: stored). */
  async #forwardOne(target: string, message: ForwardedMessage): Promise<unknown> {
    try {
      return (await this.#host.forward(target, [message]))[0]
    } catch (error) {
      return error
    }
  }
}

/** The copy of a dead message for the dead-letter queue. */
export function forwardedOf(
  from: { readonly queue: string; readonly queueId: number; readonly partition: number },
  m: DeadMessage,
): ForwardedMessage {
  return {
    body: m.body,
    headers: {
      ...m.headers,
      [DEAD_LETTER_SOURCE_HEADER]: `${from.queue}/${from.partition}/${m.messageId}`,
      [DEAD_LETTER_DELIVERIES_HEADER]: String(m.deliveryCount),
    },
    weight: m.weight,
    key: m.key ?? '',
    // A keyless message is routed by its source partition (not given it as a key, which
    // consumers would see and a replay would carry back): every copy of it then goes to the
    // same partition of the target (dedup keys are per partition), in the source's order (the
    // node's own producer keeps one batch in flight per partition: OwnClient).
    partitionKey: m.key ? undefined : `mq-dlq/${from.queueId}/${from.partition}`,
    dedupKey: `mq-dlq/${from.queueId}/${from.partition}/${m.cursor}`,
  }
}

/** The target refused the request as invalid (not retriable: a message it cannot take). */
function refusedAsInvalid(error: unknown): boolean {
  return (error as { code?: unknown } | undefined)?.code === 'INVALID_ARGUMENT'
}
