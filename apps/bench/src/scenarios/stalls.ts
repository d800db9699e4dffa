/** The stalls of a failover run, once it has ended (StallTracker.end). */
export interface StallSummary {
  /** The longest time one partition went without an ack, ending after the fault or still open at the end. */
  readonly stallMsMax: number
  /** Its partition; -1 when no gap ended after the fault (no fault, or no partitions). */
  readonly stallPartition: number
  /** When it ended (a performance.now() reading; the run's end when it was still open). */
  readonly stallEndAtMs: number
  /** The longest stall was still open when the run ended: its partition never acked again. */
  readonly stallOpenAtEnd: boolean
  /** The longest gap that ended before the fault (the baseline). */
  readonly gapMsMaxBeforeFault: number
  /** Partitions with no ack at or after the fault, or none at all: they never recovered. */
  readonly unrecovered: readonly number[]
}

/**
 * The longest time each partition of a queue went without an acknowledgement, split at a
 * fault: a gap that ends before the fault is the baseline, one that ends after it is a stall.
 * A gap still open when the run ends counts as a stall up to the end (a partition that never
 * recovers must not read as a pass), and so does a partition that never acked at all, from the
 * start. A partition's first ack opens its series (connection set-up is not a stall).
 * Times are performance.now() readings in ms, given in order.
 */
export class StallTracker {
  readonly #lastAckAtMs = new Map<number, number>()
  #faultAtMs = Number.POSITIVE_INFINITY
  #gapMsMaxBeforeFault = 0
  #stall = { ms: 0, partition: -1, endAtMs: 0, open: false }

  /**
   * @param partitions the queue's partitions, 0 … partitions−1 (each is expected to ack)
   * @param startMs when the load began
   */
  constructor(
    readonly partitions: number,
    readonly startMs: number,
  ) {}

  /** The fault happened at `atMs`: gaps that end from now on are stalls. */
  fault(atMs: number): void {
    this.#faultAtMs = atMs
  }

  /** An ack of `partition` came back at `atMs`. */
  ack(partition: number, atMs: number): void {
    const previous = this.#lastAckAtMs.get(partition)
    this.#lastAckAtMs.set(partition, atMs)
    if (previous !== undefined) this.#gap(partition, previous, atMs, false)
  }

  /** The run ended at `endMs`: closes the gaps still open and returns the summary. */
  end(endMs: number): StallSummary {
    const unrecovered: number[] = []
    for (let p = 0; p < this.partitions; p++) {
      const last = this.#lastAckAtMs.get(p)
      this.#gap(p, last ?? this.startMs, endMs, true)
      if (last === undefined || (Number.isFinite(this.#faultAtMs) && last < this.#faultAtMs))
        unrecovered.push(p)
    }
    return {
      stallMsMax: this.#stall.ms,
      stallPartition: this.#stall.partition,
      stallEndAtMs: this.#stall.endAtMs,
      stallOpenAtEnd: this.#stall.open,
      gapMsMaxBeforeFault: this.#gapMsMaxBeforeFault,
      unrecovered,
    }
  }

  #gap(partition: number, fromMs: number, toMs: number, open: boolean): void {
    const ms = toMs - fromMs
    if (toMs < this.#faultAtMs) {
      this.#gapMsMaxBeforeFault = Math.max(this.#gapMsMaxBeforeFault, ms)
    } else if (ms > this.#stall.ms) {
      this.#stall = { ms, partition, endAtMs: toMs, open }
    }
  }
}
