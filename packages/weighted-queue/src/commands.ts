import type { QueueConfig } from './config'
import type { QueueError } from './errors'

/**
 * The partition's commands: plain serialisable values (see codec.ts for their bytes). A
 * data-group leader proposes one per request batch; every replica applies them in log order
 * with the entry's leader timestamp as the only clock.
 */

/** One message of an enqueue. */
export interface EnqueueMessage {
  /** Integer 1..1000; default 1. Each distinct weight is its own sub-queue. */
  readonly weight?: number
  readonly body: Uint8Array
  readonly headers?: Readonly<Record<string, string>>
  /** The producer's partitioning key, kept with the message. */
  readonly key?: string
  /** Not deliverable before this time (ms since the epoch, leader clock). */
  readonly notBeforeMs?: number
  /** A repeat of this key within the dedup window is a no-op that returns the first id. */
  readonly dedupKey?: string
}

export const CommandType = {
  Enqueue: 'enqueue',
  Lease: 'lease',
  Ack: 'ack',
  Nack: 'nack',
  Extend: 'extend',
  Tick: 'tick',
  RedriveDead: 'redriveDead',
  PurgeDead: 'purgeDead',
  PurgeReady: 'purgeReady',
  Configure: 'configure',
} as const
export type CommandType = (typeof CommandType)[keyof typeof CommandType]

export interface EnqueueCommand {
  readonly type: typeof CommandType.Enqueue
  readonly messages: readonly EnqueueMessage[]
  /** With `producerSeq`: a retry of one of the producer's last 5 batches returns its original ids. */
  readonly producerId?: string
  readonly producerSeq?: number
  /**
   * A pipelining producer's lowest sequence still in flight (≤ producerSeq): every lower one
   * has been answered. With it, a sequence above the last one + 1 while an earlier one is
   * still in flight (base < producerSeq) is refused with SEQUENCE_GAP (retriable) instead of
   * accepted, so batches that overtake one another on retries keep their order. Without it
   * (one batch in flight at a time), gaps are accepted.
   */
  readonly producerBase?: number
}
export interface LeaseCommand {
  readonly type: typeof CommandType.Lease
  readonly consumerId: string
  readonly max: number
  readonly visibilityMs: number
  /**
   * The most bytes (messageBytes: body + headers + key) the lease hands out: it stops before
   * the message that would take it past them (the first one always goes), leaving that one
   * and those after it ready where they were. Encoded only when set: a replica of an earlier
   * version cannot read it (format level 16).
   */
  readonly bytesMax?: number
  /**
   * The consumer's id for this lease attempt, which it repeats when it did not get the answer
   * (a deadline, a lost connection, a failover). A lease whose attempt made leases that are
   * still held answers those again (with their lease ids, deadlines unchanged) and leases
   * nothing more; else it leases as usual, and its leases (if any) are remembered under the
   * attempt until their deadline. A non-empty string of at most NAME_BYTES_MAX UTF-8 bytes.
   * Encoded only when set: a replica of an earlier version cannot read it (format level 26).
   */
  readonly attempt?: string
  /**
   * With `attempt`: this lease repeats it (an earlier one under it got no answer). Only a
   * repeat looks for the attempt's leases (a read); a first lease leases at once and records
   * its leases under the attempt, replacing what the attempt held.
   */
  readonly repeat?: boolean
  /**
   * With `repeat`: answer the attempt's leases still held and lease nothing new (an empty
   * answer when none are): a repeat to a queue that hands nothing out now (paused, or out of
   * delivery tokens) still gets the answer it lost. Encoded as repeat flag 2; a replica of an
   * earlier version cannot read it (format level 27).
   */
  readonly repeatOnly?: boolean
}
export interface AckCommand {
  readonly type: typeof CommandType.Ack
  readonly leaseIds: readonly string[]
}
export interface NackCommand {
  readonly type: typeof CommandType.Nack
  readonly leaseIds: readonly string[]
  /**
   * Absent or 0: ready again at once at the head of its weight — or, a failed delivery, after
   * the queue's retry backoff when it has one. Else delayed by this much.
   */
  readonly delayMs?: number
  /**
   * A give-back, not a failure (a consumer returns messages it never handed to its
   * application: closing, a cancelled poll): the delivery is not counted towards maxDeliveries
   * and takes no retry backoff. Encoded only when set: a replica of an earlier version cannot
   * read it (format level 16).
   */
  readonly release?: boolean
  /**
   * A give-back of what a lease under this attempt handed out (a server gives back what it
   * leased for a call cancelled meanwhile): once the attempt has answered its leases more than
   * once, it changes nothing and reports each lease expired — another call under the attempt
   * may have handed them to the consumer (its repeat, or the repeat's own lease answered
   * again by a late call). Encoded only when set (format level 26).
   */
  readonly attempt?: string
  /**
   * With `attempt`: the give-back changes nothing either (each lease reported expired) once
   * the attempt's record is gone, its leases' first deadline passed: a lease still held then
   * was extended, by the consumer a repeat of the attempt answered (the give-back's own call
   * answered nobody). Without it, such a late give-back releases what is still held, as
   * before. Encoded only when set (format level 38).
   */
  readonly lapses?: boolean
}
export interface ExtendCommand {
  readonly type: typeof CommandType.Extend
  readonly leaseIds: readonly string[]
  /** The new deadline is now + visibilityMs. */
  readonly visibilityMs: number
}
/**
 * Only the time-driven work: expire leases, release due delayed messages, drop old dedup
 * entries, delete the ready messages that outlived the message TTL at the head of each weight.
 */
export interface TickCommand {
  readonly type: typeof CommandType.Tick
  /**
   * The message TTL also reaches the lines of ordered keys in this apply: a key's turn that
   * passes to a waiting message that has outlived it (and is due) deletes that one and goes on
   * down the line, at most `expiryBatchMax` messages per apply with those the tick deletes
   * from the heads of the weights. Without it, the turn goes to the next in line, outlived or
   * not, one per key per apply (as every tick written before it existed). Encoded only when
   * set: a replica of an earlier version cannot read it (a format level).
   */
  readonly ttlWaiting?: boolean
}
/**
 * Moves up to `max` dead-lettered messages (oldest first) back to the tail of their weight; 0
 * moves none (from format level 24: the entry reports the list's end, `deadEnd`, as of the log).
 */
export interface RedriveDeadCommand {
  readonly type: typeof CommandType.RedriveDead
  readonly max: number
  /**
   * The redriven messages' message TTL counts from this redrive, not from their enqueue (their
   * `enqueuedAtMs` stays as it was): a redrive of dead letters older than the TTL delivers
   * them instead of deleting them. Without it, the TTL counts from the enqueue (as every
   * redrive written before it existed). Encoded only when set: a replica of an earlier version
   * cannot read it, nor the message records it writes (a format level).
   */
  readonly restartTtl?: boolean
  /**
   * Only those whose place in the dead-letter list (`DeadMessage.cursor`) is at most `through`:
   * the messages dead when a redrive began (`Partition.deadEnd`), not one that died again
   * since — a redrive in several entries and calls moves each of them once. Encoded only when
   * set: a replica of an earlier version cannot read it (a format level).
   */
  readonly through?: number
}
/**
 * Deletes up to `max` dead-lettered messages, oldest first; with `through` (and `after`), only
 * those whose place in the dead-letter list (`DeadMessage.cursor`) is at most `through` (and
 * above `after`) — exactly the ones a listing of that span showed that are still dead (a
 * dead-letter forwarder deletes what it copied, never a message that died after its listing,
 * nor one before the span that it could not copy). Encoded only when set: a replica of an
 * earlier version cannot read them (format level 10).
 */
export interface PurgeDeadCommand {
  readonly type: typeof CommandType.PurgeDead
  readonly max: number
  readonly through?: number
  readonly after?: number
}
/** Deletes up to `max` ready messages (each weight's oldest first, lowest weight first). */
export interface PurgeReadyCommand {
  readonly type: typeof CommandType.PurgeReady
  readonly max: number
}
/**
 * Changes the partition's config from this log position on; nothing when its configVersion is
 * below the partition's (an older copy of the settings).
 */
export interface ConfigureCommand {
  readonly type: typeof CommandType.Configure
  readonly config: Partial<QueueConfig>
}

export type Command =
  | EnqueueCommand
  | LeaseCommand
  | AckCommand
  | NackCommand
  | ExtendCommand
  | TickCommand
  | RedriveDeadCommand
  | PurgeDeadCommand
  | PurgeReadyCommand
  | ConfigureCommand

/** One leased message. */
export interface Lease {
  /** Opaque; pass it to ack, nack or extend. */
  readonly leaseId: string
  readonly messageId: number
  readonly weight: number
  readonly body: Uint8Array
  readonly headers: Readonly<Record<string, string>>
  readonly key: string | undefined
  /** 1 on the first delivery; counts every delivery, also those before a redrive. */
  readonly deliveryCount: number
  readonly deadlineMs: number
  readonly enqueuedAtMs: number
}

/** The per-id outcome of ack, nack and extend. */
export const LeaseStatus = {
  Ok: 'ok',
  /** The lease existed but is no longer held: its deadline passed, or it was nacked. */
  Expired: 'expired',
  /** No such lease: never issued, malformed, or the message is gone (acked or purged). */
  Unknown: 'unknown',
} as const
export type LeaseStatus = (typeof LeaseStatus)[keyof typeof LeaseStatus]

export type CommandResult =
  | { readonly type: 'enqueue'; readonly ids: readonly number[]; readonly duplicate: boolean }
  | { readonly type: 'lease'; readonly leases: readonly Lease[] }
  | { readonly type: 'ack' | 'nack'; readonly statuses: readonly LeaseStatus[] }
  | {
      readonly type: 'extend'
      readonly statuses: readonly LeaseStatus[]
      /** The new deadline, or undefined where the status is not ok. */
      readonly deadlinesMs: readonly (number | undefined)[]
    }
  | { readonly type: 'tick' | 'configure' }
  | {
      readonly type: 'redriveDead'
      readonly ids: readonly number[]
      /**
       * The place in the dead-letter list of the last message dead when this entry applied,
       * before it moved any (`deadEnd`; -1: none ever died): a redrive's first entry tells its
       * later ones where to stop, as of the log, not of a leader's possibly lagging state.
       */
      readonly deadEnd: number
    }
  | { readonly type: 'purgeDead' | 'purgeReady'; readonly ids: readonly number[] }
  /** The command changed nothing; `error` says why (InvalidArgument, LimitExceeded, ...). */
  | { readonly type: 'rejected'; readonly error: QueueError }

/** A message as a listing shows it (listReady, listDead): nothing about it changes. */
export interface StoredMessage {
  readonly messageId: number
  readonly weight: number
  readonly body: Uint8Array
  readonly headers: Readonly<Record<string, string>>
  readonly key: string | undefined
  readonly deliveryCount: number
  readonly enqueuedAtMs: number
}

/** A message in the dead-letter sub-queue. */
export interface DeadMessage extends StoredMessage {
  /** Pass as `after` to list the next page. */
  readonly cursor: number
}

/** Counts of one weight's sub-queue. */
export interface WeightStats {
  readonly weight: number
  readonly ready: number
  readonly delayed: number
  readonly leased: number
  readonly dead: number
  /**
   * now − enqueue time of the next message this weight will deliver; 0 when none is ready, or
   * when it is not among the STATS_AGES_MAX ready weights read (the lightest and the heaviest
   * half: Partition.stats).
   */
  readonly oldestAgeMs: number
  /** This weight's share of the leases if all backlogged weights stay backlogged. */
  readonly targetShare: number
  /**
   * Its share of the last `windowLeases` leases handed out. A pick whose message a lease deleted
   * for outliving the message TTL is charged in the scheduler's passes but not counted here
   * (the window is replicated state: counting it would need a format level).
   */
  readonly achievedShare: number
}

/**
 * What the partition has done since it was created: replicated counters (part of its state,
 * identical on every replica and in snapshots), from which rates are derived by sampling.
 */
export interface PartitionCounters {
  /** Messages enqueued (a retried batch or a repeated dedup key adds none). */
  readonly enqueued: number
  /** Leases handed out (first deliveries and redeliveries). */
  readonly delivered: number
  readonly acked: number
  readonly nacked: number
  /** Leases that passed their deadline unsettled. */
  readonly expired: number
  /** Messages moved to the dead-letter sub-queue (after a nack or an expiry). */
  readonly deadLettered: number
  /** Ready messages deleted because they outlived the message TTL. */
  readonly discarded: number
}

export interface QueueStats {
  /** Every weight with a message in any state, ascending. */
  readonly weights: readonly WeightStats[]
  readonly messages: number
  /** Of `messages`, those waiting behind an earlier message of their ordered key (orderedKeys). */
  readonly waiting: number
  /** The number of decisions the achieved shares are measured over (≤ shareWindowLeases). */
  readonly windowLeases: number
  readonly counters: PartitionCounters
}
