import { UnderWay } from './under-way'

/** What the drain reads: a consumer's deliveries, and a way to stop it. */
export interface DrainSource extends AsyncIterable<{ readonly body: Uint8Array; ack(): Promise<unknown> }> {
  close(): Promise<void>
}

export interface DrainLimits {
  /** The drain ends after this long without a first message. */
  readonly firstIdleMs: number
  /** …and after this long without a new message once they flow (the queue is empty). */
  readonly idleMs: number
  /** It ends after this long in all, whatever is still coming. */
  readonly capMs: number
}

/**
 * Why a drain ended. Only `all-seen` and `idle` (the queue stayed empty) let the acknowledged
 * messages not seen count as lost; after `cap` (still coming when the time was up) or `ended`
 * (the consumer stopped by itself: a failure) they are only not yet seen.
 */
export const DrainEnd = {
  allSeen: 'all-seen',
  idle: 'idle',
  cap: 'cap',
  ended: 'ended',
} as const
export type DrainEnd = (typeof DrainEnd)[keyof typeof DrainEnd]

export interface DrainOutcome {
  readonly end: DrainEnd
  /** Distinct sequences received (acknowledged or not by the producer). */
  readonly drained: number
  /** Acknowledged sequences not received. */
  readonly unseen: number
  /** Why the consumer stopped, when it threw. */
  readonly error?: string
}

/** The sequence a failover message carries: the body's first 4 bytes, big-endian. */
export function sequenceOf(body: Uint8Array): number {
  return new DataView(body.buffer, body.byteOffset, 4).getUint32(0)
}

/**
 * Reads `consumer` until every sequence of `acked` has come back (each delivery acked), the
 * queue stays quiet for the idle time, the cap passes, or the consumer stops. Keeps the
 * sequences still to see in a set, so each delivery costs O(1) (a 30,000-message run checked
 * the whole acked set per delivery, O(n²), and hit the cap with false losses). Closes
 * `consumer` before returning.
 */
export async function drainAcked(
  consumer: DrainSource,
  acked: ReadonlySet<number>,
  limits: DrainLimits,
  seqOf: (body: Uint8Array) => number = sequenceOf,
): Promise<DrainOutcome> {
  const pending = new Set(acked)
  const seen = new Set<number>()
  let stoppedBy: DrainEnd | undefined
  const stop = (why: DrainEnd) => () => {
    stoppedBy ??= why
    void consumer.close()
  }
  let idle = setTimeout(stop(DrainEnd.idle), limits.firstIdleMs)
  const cap = setTimeout(stop(DrainEnd.cap), limits.capMs)
  const acks = new UnderWay()
  let error: string | undefined
  try {
    if (pending.size === 0) stoppedBy = DrainEnd.allSeen
    else {
      for await (const m of consumer) {
        clearTimeout(idle)
        idle = setTimeout(stop(DrainEnd.idle), limits.idleMs)
        const seq = seqOf(m.body)
        seen.add(seq)
        pending.delete(seq)
        acks.add(m.ack().catch(() => {}))
        if (pending.size === 0) {
          stoppedBy ??= DrainEnd.allSeen
          break
        }
      }
    }
  } catch (e) {
    error = (e as Error).message
  } finally {
    clearTimeout(idle)
    clearTimeout(cap)
    await acks.settled()
    await consumer.close().catch(() => {})
  }
  return {
    end: stoppedBy ?? DrainEnd.ended,
    drained: seen.size,
    unseen: pending.size,
    ...(error !== undefined ? { error } : {}),
  }
}

/** Whether the acknowledged messages not seen in `o` are lost (else: not determined). */
export function drainConclusive(o: DrainOutcome): boolean {
  return o.end === DrainEnd.allSeen || o.end === DrainEnd.idle
}
