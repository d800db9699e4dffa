/**
 * A binary min-heap of simulator events ordered by (atMs, seq): equal times pop in insertion
 * order, so a run depends only on its seed. Bounded: push throws past `sizeMax`.
 */
export class EventQueue<T> {
  readonly #at: number[] = []
  readonly #seq: number[] = []
  readonly #items: T[] = []
  #nextSeq = 0
  readonly #sizeMax: number

  constructor(sizeMax: number) {
    this.#sizeMax = sizeMax
  }

  get size(): number {
    return this.#items.length
  }

  push(atMs: number, item: T): void {
    if (this.#items.length >= this.#sizeMax) throw new Error(`EventQueue: more than ${this.#sizeMax} events`)
    let i = this.#items.length
    this.#at.push(atMs)
    this.#seq.push(this.#nextSeq++)
    this.#items.push(item)
    while (i > 0) {
      const p = (i - 1) >> 1
      if (!this.#less(i, p)) break
      this.#swap(i, p)
      i = p
    }
  }

  /** The time of the earliest event, or Infinity when empty. */
  peekAt(): number {
    return this.#items.length > 0 ? this.#at[0]! : Number.POSITIVE_INFINITY
  }

  pop(): T | undefined {
    const n = this.#items.length
    if (n === 0) return undefined
    const top = this.#items[0]!
    this.#swap(0, n - 1)
    this.#at.pop()
    this.#seq.pop()
    this.#items.pop()
    let i = 0
    const m = n - 1
    for (;;) {
      const l = 2 * i + 1
      const r = l + 1
      let s = i
      if (l < m && this.#less(l, s)) s = l
      if (r < m && this.#less(r, s)) s = r
      if (s === i) break
      this.#swap(i, s)
      i = s
    }
    return top
  }

  #less(a: number, b: number): boolean {
    const x = this.#at[a]!
    const y = this.#at[b]!
    return x < y || (x === y && this.#seq[a]! < this.#seq[b]!)
  }

  #swap(a: number, b: number): void {
    const at = this.#at[a]!
    this.#at[a] = this.#at[b]!
    this.#at[b] = at
    const seq = this.#seq[a]!
    this.#seq[a] = this.#seq[b]!
    this.#seq[b] = seq
    const item = this.#items[a]!
    this.#items[a] = this.#items[b]!
    this.#items[b] = item
  }
}
