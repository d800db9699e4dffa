/**
 * A seeded pseudo-random number generator (xoshiro128**), the only source of randomness
 * the Raft core and the simulator may use. Same seed, same sequence, on every platform.
 */
export class Prng {
  #s0: number
  #s1: number
  #s2: number
  #s3: number

  /** Seeds the four state words from `seed` with splitmix32, so any integer is a good seed. */
  constructor(seed: number) {
    let x = seed >>> 0
    const next = (): number => {
      x = (x + 0x9e3779b9) >>> 0
      let z = x
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0
      return (z ^ (z >>> 16)) >>> 0
    }
    this.#s0 = next()
    this.#s1 = next()
    this.#s2 = next()
    this.#s3 = next()
  }

  /** Returns the next 32-bit unsigned integer. */
  nextU32(): number {
    const result = Math.imul(rotl(Math.imul(this.#s1, 5) >>> 0, 7), 9) >>> 0
    const t = (this.#s1 << 9) >>> 0
    this.#s2 = (this.#s2 ^ this.#s0) >>> 0
    this.#s3 = (this.#s3 ^ this.#s1) >>> 0
    this.#s1 = (this.#s1 ^ this.#s2) >>> 0
    this.#s0 = (this.#s0 ^ this.#s3) >>> 0
    this.#s2 = (this.#s2 ^ t) >>> 0
    this.#s3 = rotl(this.#s3, 11)
    return result
  }

  /** Returns an integer in [0, bound). Requires 0 < bound <= 2^32. */
  below(bound: number): number {
    if (!(bound > 0 && bound <= 0x1_0000_0000 && Number.isInteger(bound))) {
      throw new RangeError(`Prng.below: bound must be an integer in (0, 2^32], got ${bound}`)
    }
    return Math.floor((this.nextU32() / 0x1_0000_0000) * bound)
  }

  /** Returns an integer in [lo, hi]. */
  between(lo: number, hi: number): number {
    return lo + this.below(hi - lo + 1)
  }

  /** Returns a float in [0, 1). */
  float(): number {
    return this.nextU32() / 0x1_0000_0000
  }

  /** Returns true with probability `p`. */
  chance(p: number): boolean {
    return p > 0 && this.float() < p
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0
}
