/**
 * The promises a scenario has started (sends, acks) and not seen settle, to wait for at its
 * end. Only those under way are held: a run makes up to millions, and an array of every one to
 * the end (until 2026-12-07) kept them all alive, so each survived the young generation's
 * collections and was copied out of it — a third of the `consume` client's CPU went to the
 * collector (`mq-bench consume -n 200000 -c 2 --prefetch 1024`), CPU the servers on the same
 * cores lacked.
 */
export class UnderWay {
  readonly #pending = new Set<Promise<void>>()

  /** Holds `promise` until it settles, whichever way (a rejection counts as settled, unreported). */
  add(promise: Promise<unknown>): void {
    const held: Promise<void> = promise.then(
      () => void this.#pending.delete(held),
      () => void this.#pending.delete(held),
    )
    this.#pending.add(held)
  }

  /** Promises under way now. */
  get size(): number {
    return this.#pending.size
  }

  /** Resolves once every promise added so far has settled (never rejects). */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.#pending])
  }
}
