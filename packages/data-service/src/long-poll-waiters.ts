/**
 * What the long polls of a partition need to know of it to decide whom to wake (the lease
 * handlers answer it from the leader's applied state and the leases on their way).
 */
export interface PartitionLook {
  /**
   * Messages a lease of the partition could find now beyond what the leases on their way ask
   * for: 0 when none, Infinity when unknown (a lease deadline or a delayed message may be due).
   */
  readonly spare: number
  /** Ms until a lease deadline or a delayed message of the partition may fall due (Infinity: none). */
  readonly dueInMs: number
}

/** Bounds on the long polls under way in one data group. */
export interface LongPollLimits {
  /** Long polls under way on one partition, at most. */
  readonly waitersPerPartitionMax: number
  /** Long polls under way on all the partitions of one data group, at most. */
  readonly waitersPerGroupMax: number
}

/** Long polls open across the groups that share it (a node's count, for its metrics). */
export interface LongPollTally {
  open: number
}

/** The limit `LongPollWaiters.enter` found reached, when it refused a poll. */
export type LongPollRefusal = 'partition' | 'group'

/**
 * The shortest wait for a partition's due time: a due time already past (a lower bound the next
 * apply moves on) does not make the partition's timer loop on the event loop.
 */
export const DUE_WAIT_MS_MIN = 5

/** One long poll asleep: woken, it leaves its partition's sleepers and its promise resolves. */
interface Sleeper {
  /** Messages the poll asks for: a wake for `n` spare messages wakes polls until they ask for n. */
  readonly wants: number
  wake(): void
}

class PartitionWaiters {
  /** Changes notified so far (a poll's `mark` reads it; a later one ends its sleep at once). */
  changes = 0
  /** Polls entered and not closed. */
  open = 0
  /** Asleep, oldest first (a Set keeps insertion order; a poll woken and asleep again goes last). */
  readonly sleepers = new Set<Sleeper>()
  dueTimer: ReturnType<typeof setTimeout> | undefined
  /** When `dueTimer` fires (performance.now()); Infinity when none is set. */
  dueAtMs = Number.POSITIVE_INFINITY
  constructor(
    readonly queue: string,
    readonly partition: number,
  ) {}
}

/**
 * One long poll's place among its partition's waiters, from `LongPollWaiters.enter` to `close`.
 * Contract: `mark()` before each look at the partition (before its lease is committed), then
 * `sleep` after it: a change notified in between (which the lease may have missed) ends the
 * sleep at once, so no change is lost to the race between applying and going to sleep.
 */
export interface LongPoll {
  /** The partition, as `queue/index` (the stored queue name). */
  readonly partitionId: string
  /** Takes note of the changes so far: `sleep` ends at once for a later one. */
  mark(): void
  /**
   * Resolves when the poll is woken (a change that may have made messages ready for it, a
   * poll leaving messages behind, the partition's due time), at once when a change came after
   * `mark`, after `ms`, or when `signal` aborts — whichever is first. `dueInMs`: when the
   * partition's next lease deadline or delayed message may fall due (the partition's due timer:
   * one poll wakes then, not every poll).
   */
  sleep(ms: number, dueInMs: number, signal: AbortSignal): Promise<void>
  /**
   * Leaves the partition's waiters, ending its sleep if it sleeps (idempotent). Hand on
   * afterwards (`handOn`).
   */
  close(): void
}

/**
 * The long polls of one data group, by partition: a change wakes only the polls of the
 * partition it changed, and only as many as the messages it made ready could serve (oldest
 * first: a poll asking for `max` takes up to `max`), not every poll of the group. A poll that
 * leaves (answered, timed out, cancelled, failed) while messages are left hands them on
 * (`handOn`), and a partition's due time wakes one poll, which hands on in its turn: no poll
 * sleeps past its recheck while a message is ready for it and nobody is on the way to it.
 *
 * Invariant: a partition's entry exists while a poll of it is open (`open > 0`); notifications
 * of other partitions cost one map look-up. Bounded: at most `waitersPerPartitionMax` polls per
 * partition, `waitersPerGroupMax` in all (`enter` refuses more).
 */
export class LongPollWaiters {
  readonly #partitions = new Map<string, PartitionWaiters>()
  readonly #look: (queue: string, partition: number) => PartitionLook
  readonly #limits: LongPollLimits
  readonly #tally: LongPollTally
  #open = 0

  /**
   * `look` answers for a partition with polls, at a change, a hand-on or its due time; `tally`
   * counts the polls open here along with those of other groups.
   */
  constructor(
    look: (queue: string, partition: number) => PartitionLook,
    limits: LongPollLimits,
    tally: LongPollTally = { open: 0 },
  ) {
    this.#look = look
    this.#limits = limits
    this.#tally = tally
  }

  /** Polls under way in the group. */
  get size(): number {
    return this.#open
  }

  /** Polls under way on `queue`'s partition `partition`. */
  open(queue: string, partition: number): number {
    return this.#partitions.get(idOf(queue, partition))?.open ?? 0
  }

  /** Polls asleep on `queue`'s partition `partition` (tests and metrics). */
  sleeping(queue: string, partition: number): number {
    return this.#partitions.get(idOf(queue, partition))?.sleepers.size ?? 0
  }

  /**
   * Enters a long poll asking for `wants` messages among `queue`'s partition `partition`'s
   * waiters, marked (`mark`); or names the limit that is reached (the poll is not entered).
   */
  enter(queue: string, partition: number, wants: number): LongPoll | LongPollRefusal {
    const id = idOf(queue, partition)
    let p = this.#partitions.get(id)
    if ((p?.open ?? 0) >= this.#limits.waitersPerPartitionMax) return 'partition'
    if (this.#open >= this.#limits.waitersPerGroupMax) return 'group'
    if (!p) {
      p = new PartitionWaiters(queue, partition)
      this.#partitions.set(id, p)
    }
    p.open++
    this.#open++
    this.#tally.open++
    return this.#poll(id, p, Math.max(1, wants))
  }

  /**
   * An applied entry may have made messages of `queue`'s partition `partition` ready: its
   * polls on the way look again (their sleep ends), and as many asleep as the spare messages
   * could serve wake. Nothing when the partition has no poll.
   */
  changed(queue: string, partition: number): void {
    const p = this.#partitions.get(idOf(queue, partition))
    if (!p) return
    p.changes++
    this.#serve(p)
  }

  /** Every partition may have changed (a snapshot installed): `changed` for each with polls. */
  changedAll(): void {
    for (const p of this.#partitions.values()) {
      p.changes++
      this.#serve(p)
    }
  }

  /**
   * `queue`'s partition `partition` left the group (fenced, dropped or retired): every poll of
   * it looks again (each finds it gone), not as many as its spare messages could serve.
   */
  ended(queue: string, partition: number): void {
    const p = this.#partitions.get(idOf(queue, partition))
    if (!p) return
    p.changes++
    for (const s of [...p.sleepers]) s.wake()
  }

  /**
   * A lease of `queue`'s partition `partition` ended (its poll answered, or gave up): the
   * messages it left wake as many polls asleep as they could serve, and the partition's due
   * timer is set for what may fall due next.
   */
  handOn(queue: string, partition: number): void {
    const p = this.#partitions.get(idOf(queue, partition))
    if (p) this.#serve(p)
  }

  /** Wakes polls asleep on `p` for its spare messages, oldest first; sets its due timer. */
  #serve(p: PartitionWaiters): void {
    if (p.sleepers.size === 0) return
    const { spare, dueInMs } = this.#look(p.queue, p.partition)
    // Unknown (something may be due): one poll looks, its lease makes it known, and it hands on.
    let left = spare === Number.POSITIVE_INFINITY ? 1 : spare
    for (const s of p.sleepers) {
      if (left <= 0) break
      s.wake()
      left -= s.wants
    }
    this.#armDue(p, dueInMs)
  }

  /** Sets `p`'s due timer to fire in `dueInMs` (at least DUE_WAIT_MS_MIN), unless it fires sooner. */
  #armDue(p: PartitionWaiters, dueInMs: number): void {
    if (!(dueInMs < Number.POSITIVE_INFINITY) || p.sleepers.size === 0) return
    const inMs = Math.max(dueInMs, DUE_WAIT_MS_MIN)
    const atMs = performance.now() + inMs
    if (p.dueTimer !== undefined && p.dueAtMs <= atMs) return
    clearTimeout(p.dueTimer)
    p.dueAtMs = atMs
    p.dueTimer = setTimeout(() => {
      p.dueTimer = undefined
      p.dueAtMs = Number.POSITIVE_INFINITY
      this.#serve(p)
    }, inMs)
  }

  #poll(id: string, p: PartitionWaiters, wants: number): LongPoll {
    let since = p.changes
    let closed = false
    let asleep: Sleeper | undefined
    return {
      partitionId: id,
      mark: () => {
        since = p.changes
      },
      sleep: (ms, dueInMs, signal) => {
        if (closed || p.changes > since || signal.aborted) return Promise.resolve()
        return new Promise<void>((resolve) => {
          const sleeper: Sleeper = {
            wants,
            wake: () => {
              clearTimeout(timer)
              asleep = undefined
              p.sleepers.delete(sleeper)
              signal.removeEventListener('abort', sleeper.wake)
              resolve()
            },
          }
          const timer = setTimeout(sleeper.wake, ms)
          p.sleepers.add(sleeper)
          asleep = sleeper
          signal.addEventListener('abort', sleeper.wake, { once: true })
          this.#armDue(p, dueInMs)
        })
      },
      close: () => {
        if (closed) return
        closed = true
        asleep?.wake()
        p.open--
        this.#open--
        this.#tally.open--
        if (p.open > 0) return
        clearTimeout(p.dueTimer)
        this.#partitions.delete(id)
      },
    }
  }
}

function idOf(queue: string, partition: number): string {
  return `${queue}/${partition}`
}
