/**
 * Which sends a flush() waits for: those called before it. Each send belongs to the
 * generation current when it was called; a flush closes the generation and waits until no
 * send of it, nor of an earlier one, is unsettled. Sends called after it (a busy producer's)
 * belong to the next generation and do not hold it up.
 */
export class SendGenerations {
  #current = 0
  /** Unsettled sends per generation (generations with none are dropped). */
  readonly #unsettled = new Map<number, number>()
  /** The flushes waiting, in generation order. */
  readonly #flushes: { readonly generation: number; readonly done: () => void }[] = []

  /** A send was called: returns its generation, to give back to `end`. */
  begin(): number {
    const generation = this.#current
    this.#unsettled.set(generation, (this.#unsettled.get(generation) ?? 0) + 1)
    return generation
  }

  /** The send of `generation` settled (resolved or rejected). */
  end(generation: number): void {
    const left = (this.#unsettled.get(generation) ?? 1) - 1
    if (left > 0) {
      this.#unsettled.set(generation, left)
      return
    }
    this.#unsettled.delete(generation)
    const oldest = this.#oldest()
    for (let head = this.#flushes[0]; head && head.generation < oldest; head = this.#flushes[0]) {
      this.#flushes.shift()
      head.done()
    }
  }

  /** Whether a flush is waiting (its sends should not linger). */
  get flushing(): boolean {
    return this.#flushes.length > 0
  }

  /** Resolves once every send called before now has settled. */
  flushed(): Promise<void> {
    const generation = this.#current++
    if (this.#oldest() > generation) return Promise.resolve()
    return new Promise((done) => this.#flushes.push({ generation, done }))
  }

  /** The oldest generation with an unsettled send (Infinity: none). */
  #oldest(): number {
    let oldest = Number.POSITIVE_INFINITY
    for (const g of this.#unsettled.keys()) oldest = Math.min(oldest, g)
    return oldest
  }
}
