/**
 * A broadcast of changes to a few waiters (the server's waits for the meta replica to apply). A
 * waiter first reads `count`, then does its work, then waits with that count: a change that
 * came in between (which its work may have missed) ends the wait at once, so no change is lost
 * to the race between applying and starting to wait. Every change wakes every waiter: not for
 * many waiters on frequent changes (the lease long polls wait per partition: LongPollWaiters).
 */
export class ChangeSignal {
  #count = 0
  readonly #waiters = new Set<() => void>()

  /** Changes so far. */
  get count(): number {
    return this.#count
  }

  /** Waiters now (for tests and metrics). */
  get waiting(): number {
    return this.#waiters.size
  }

  /** A change: every waiter wakes. */
  notify(): void {
    this.#count++
    for (const wake of [...this.#waiters]) wake()
  }

  /**
   * Resolves at the first change after the one numbered `since` (at once if it has happened),
   * after `ms`, or when `signal` aborts — whichever is first.
   */
  changed(ms: number, signal: AbortSignal, since: number): Promise<void> {
    if (this.#count > since || signal.aborted) return Promise.resolve()
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer)
        this.#waiters.delete(done)
        signal.removeEventListener('abort', done)
        resolve()
      }
      const timer = setTimeout(done, ms)
      this.#waiters.add(done)
      signal.addEventListener('abort', done, { once: true })
    })
  }
}
