/** Reads of the meta group's route epoch start at most this often (ms), shared by all waiting. */
export const EPOCH_READ_EVERY_MS = 50

/**
 * The highest route epoch this node knows the meta group reached, to tell a request whose
 * route epoch no route of this cluster carries. A client can only hold an epoch the meta group
 * committed before it sent the request, so a linearizable read of the epoch begun after the
 * request arrived answers at least that epoch; if it answers less, the request's epoch is
 * made up (a hostile client) or from another cluster (one started again at the same address
 * while a client kept its routes). Before, each such request cost two GetRoutes calls to the
 * meta leader (the second unshared), on every long-poll recheck too: 200 requests, 400 calls.
 *
 * Every epoch the node hears of is `observe`d (route answers; the meta leader's own state); a
 * request above all of them waits for a read begun after it arrived. Such reads are shared by
 * every request waiting and start at most every EPOCH_READ_EVERY_MS (several may be under way
 * when the meta group answers slower than that: at most its call timeout / that interval).
 */
export class EpochCeiling {
  readonly #read: () => Promise<number>
  readonly #nowMs: () => number
  readonly #everyMs: number
  #epoch = 0
  /** The last read started: when, and its answer. */
  #last: { readonly startedMs: number; readonly answer: Promise<number> } | undefined
  /** The next read, not started yet: every request arriving until it starts shares it. */
  #next: Promise<number> | undefined

  constructor(
    read: () => Promise<number>,
    nowMs: () => number = () => performance.now(),
    everyMs = EPOCH_READ_EVERY_MS,
  ) {
    this.#read = read
    this.#nowMs = nowMs
    this.#everyMs = everyMs
  }

  /** The highest epoch heard of so far. */
  get epoch(): number {
    return this.#epoch
  }

  observe(epoch: number): void {
    if (epoch > this.#epoch) this.#epoch = epoch
  }

  /**
   * The meta group's epoch, once it is known to be at least `epoch` or read after this call
   * began (then possibly lower: `epoch` is none of this cluster's). Rejects when the read fails.
   */
  async reach(epoch: number): Promise<number> {
    if (epoch <= this.#epoch) return this.#epoch
    const askedMs = this.#nowMs()
    const last = this.#last
    const answer = last && last.startedMs >= askedMs ? last.answer : this.#nextRead()
    return Math.max(await answer, this.#epoch)
  }

  #nextRead(): Promise<number> {
    if (this.#next) return this.#next
    const last = this.#last
    this.#next = (async () => {
      // Not before this function returned: the read is `#next` until it starts. Not behind the
      // last read's answer either: one a silent meta leader holds would add its whole timeout.
      await undefined
      if (last) {
        const wait = last.startedMs + this.#everyMs - this.#nowMs()
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
      }
      // Started: later requests wait for the read after this one.
      this.#next = undefined
      const answer = this.#read().then((e) => {
        this.observe(e)
        return e
      })
      this.#last = { startedMs: this.#nowMs(), answer }
      return answer
    })()
    return this.#next
  }
}
