/**
 * The App messages in flight to one follower (a bounded ring, as etcd's tracker/inflights):
 * for each message, the last index it carried and its bytes. Full when either the count or
 * the bytes reach their bound. Invariant: the indexes are increasing.
 */
export class Inflights {
  readonly #lastIndexes: number[]
  readonly #bytes: number[]
  #start = 0
  #count = 0
  #bytesTotal = 0
  readonly #countMax: number
  readonly #bytesMax: number

  constructor(countMax: number, bytesMax: number) {
    this.#countMax = countMax
    this.#bytesMax = bytesMax
    this.#lastIndexes = new Array<number>(countMax).fill(0)
    this.#bytes = new Array<number>(countMax).fill(0)
  }

  /** Records a sent message. Requires !full() and lastIndex above every recorded index. */
  add(lastIndex: number, bytes: number): void {
    if (this.#count >= this.#countMax) throw new Error('Inflights.add: window is full')
    const slot = (this.#start + this.#count) % this.#countMax
    this.#lastIndexes[slot] = lastIndex
    this.#bytes[slot] = bytes
    this.#count++
    this.#bytesTotal += bytes
  }

  /** Frees every message whose last index is <= `index` (they are acknowledged). */
  freeLE(index: number): void {
    while (this.#count > 0 && this.#lastIndexes[this.#start]! <= index) this.#freeFirst()
  }

  /** Frees the oldest message, so one probe can go out when acknowledgements were lost. */
  freeFirstOne(): void {
    if (this.#count > 0) this.#freeFirst()
  }

  #freeFirst(): void {
    this.#bytesTotal -= this.#bytes[this.#start]!
    this.#start = (this.#start + 1) % this.#countMax
    this.#count--
  }

  full(): boolean {
    return this.#count >= this.#countMax || this.#bytesTotal >= this.#bytesMax
  }

  count(): number {
    return this.#count
  }

  reset(): void {
    this.#start = 0
    this.#count = 0
    this.#bytesTotal = 0
  }
}
