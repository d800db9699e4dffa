import { SchedulingMode } from './config'
import { invariant } from './errors'
import { WEIGHT_MAX, WEIGHT_MIN } from './weight'

/**
 * When the virtual time reaches this, every pass is shifted down by its integer part, so that
 * the cross-products `pass numerator × weight` stay below 2^24 · 1000 · 1000 < 2^53 (exact).
 */
export const VIRTUAL_TIME_RENORMALIZE_AT = 2 ** 24

/** The scheduler's replicated state: every remembered pass and the virtual time. */
export interface SchedulerState {
  /** [weight, pass numerator]: the weight's pass is `numerator / weight`. */
  readonly passes: readonly (readonly [weight: number, passNum: number])[]
  readonly virtualNum: number
  readonly virtualDen: number
}

/** The scheduler's decision state at a point (WeightedScheduler.mark). */
export interface SchedulerMark {
  readonly passNum: Float64Array
  readonly heap: readonly number[]
  readonly heapPos: Int16Array
  readonly vNum: number
  readonly vDen: number
}

function ceilDiv(a: number, b: number): number {
  const r = a % b
  return (a - r) / b + (r > 0 ? 1 : 0)
}

/**
 * Weighted fair scheduling across the backlogged weights by stride scheduling with exact
 * rational passes (see README, "The scheduler"), or strict priority.
 *
 * Each weight w has a pass p_w = passNum[w] / w. A decision picks the backlogged weight with
 * the least pass (ties: the higher weight), sets the virtual time V to that pass and advances
 * the pass by 1/w. A weight that becomes backlogged starts at max(its old pass, ⌈V·w⌉/w), so
 * idle time earns no credit. Invariant (fair mode): every backlogged w has V ≤ p_w ≤ V + 1/w.
 *
 * Cost: O(log k) per decision, activation and deactivation, for k backlogged weights.
 * Memory: fixed, one slot per possible weight. Pure and deterministic.
 */
export class WeightedScheduler {
  private readonly passNum = new Float64Array(WEIGHT_MAX + 1)
  /** Binary heap of the backlogged weights, best first. */
  private readonly heap: number[] = []
  private readonly heapPos = new Int16Array(WEIGHT_MAX + 1).fill(-1)
  private vNum = 0
  private vDen = 1
  private readonly dirtyWeights = new Set<number>()
  private dirtyVirtual = false

  constructor(private modeValue: SchedulingMode = SchedulingMode.Fair) {}

  get mode(): SchedulingMode {
    return this.modeValue
  }

  /** The number of backlogged weights. */
  get backlogged(): number {
    return this.heap.length
  }

  /**
   * Loads replicated state exactly as stored: the passes, V, and the weights that were
   * backlogged (`backlogged`, each at most once), which re-enter the heap with their stored
   * passes. Unlike `activate`, nothing is raised to V and nothing is marked dirty: raising a
   * pass is a decision, made only inside an apply, where every replica makes it (in strict mode
   * a starved weight legitimately keeps a pass below V; raising it here, on a restart, made the
   * restarted replica decide differently from the others once the queue was fair again).
   * Only valid before any weight is activated.
   */
  restore(state: SchedulerState, backlogged: readonly number[] = []): void {
    invariant(this.heap.length === 0, 'restore before activation')
    for (const [w, m] of state.passes) this.passNum[w] = m
    this.vNum = state.virtualNum
    this.vDen = state.virtualDen
    for (const w of backlogged) {
      invariant(!this.isBacklogged(w), `restore of weight ${w} backlogged once`)
      this.heapPos[w] = this.heap.length
      this.heap.push(w)
      this.siftUp(this.heap.length - 1)
    }
  }

  /** The replicated state. Passes of weights never scheduled (0) are left out. */
  state(): SchedulerState {
    const passes: [number, number][] = []
    for (let w = WEIGHT_MIN; w <= WEIGHT_MAX; w++) {
      const m = this.passNum[w] as number
      if (m !== 0) passes.push([w, m])
    }
    return { passes, virtualNum: this.vNum, virtualDen: this.vDen }
  }

  passNumOf(w: number): number {
    return this.passNum[w] as number
  }

  virtualTime(): readonly [num: number, den: number] {
    return [this.vNum, this.vDen]
  }

  isBacklogged(w: number): boolean {
    return (this.heapPos[w] as number) >= 0
  }

  /** The backlogged weights, in no particular order. */
  backloggedWeights(): readonly number[] {
    return this.heap
  }

  /**
   * Weight `w` has become backlogged (its ready count went from 0 to positive). Its pass
   * becomes max(old pass, ⌈V·w⌉/w): no credit for the time it was idle.
   */
  activate(w: number): void {
    invariant(!this.isBacklogged(w), `activate of backlogged weight ${w}`)
    const start = ceilDiv(this.vNum * w, this.vDen)
    if ((this.passNum[w] as number) < start) {
      this.passNum[w] = start
      this.dirtyWeights.add(w)
    }
    this.heapPos[w] = this.heap.length
    this.heap.push(w)
    this.siftUp(this.heap.length - 1)
  }

  /** Weight `w` has no ready message left. Its pass is kept (a later return cannot jump ahead). */
  deactivate(w: number): void {
    const i = this.heapPos[w] as number
    invariant(i >= 0, `deactivate of idle weight ${w}`)
    const last = this.heap.pop() as number
    this.heapPos[w] = -1
    if (i < this.heap.length) {
      this.heap[i] = last
      this.heapPos[last] = i
      this.siftDown(i)
      this.siftUp(i)
    }
  }

  /**
   * Makes one decision: returns the weight to serve next and charges it (its pass advances by
   * 1/w), or undefined when nothing is backlogged. The caller deactivates the weight when
   * this took its last ready message.
   */
  next(): number | undefined {
    const w = this.heap[0]
    if (w === undefined) return undefined
    const m = this.passNum[w] as number
    // V = max(V, p_w); in fair mode p_w is the least pass, so V only moves forward.
    if (m * this.vDen > this.vNum * w) {
      this.vNum = m
      this.vDen = w
      this.dirtyVirtual = true
    }
    this.passNum[w] = m + 1
    this.dirtyWeights.add(w)
    if (this.modeValue === SchedulingMode.Fair) this.siftDown(0)
    if (this.vNum >= VIRTUAL_TIME_RENORMALIZE_AT * this.vDen) this.renormalize()
    return w
  }

  /**
   * A copy of the decision state (passes, V, the backlogged weights) that `rewind` returns to:
   * decisions made after it can be taken back, as if never made.
   */
  mark(): SchedulerMark {
    return {
      passNum: this.passNum.slice(),
      heap: [...this.heap],
      heapPos: this.heapPos.slice(),
      vNum: this.vNum,
      vDen: this.vDen,
    }
  }

  /**
   * Back to `mark`'s state. The weights and V changed since stay marked dirty (their persisted
   * values are rewritten, the same as before where nothing else changed them).
   */
  rewind(mark: SchedulerMark): void {
    for (let w = WEIGHT_MIN; w <= WEIGHT_MAX; w++) {
      if (this.passNum[w] !== mark.passNum[w]) this.dirtyWeights.add(w)
    }
    this.passNum.set(mark.passNum)
    this.heap.length = 0
    this.heap.push(...mark.heap)
    this.heapPos.set(mark.heapPos)
    if (this.vNum !== mark.vNum || this.vDen !== mark.vDen) this.dirtyVirtual = true
    this.vNum = mark.vNum
    this.vDen = mark.vDen
  }

  /**
   * Switches mode. Entering fair mode lifts lagging passes to V, so strict mode's losers do not
   * burst. The weights are re-activated in ascending order, not in the heap's (which depends on
   * the order they were activated or restored in), so the passes come out dirty in one order on
   * every replica.
   */
  setMode(mode: SchedulingMode): void {
    if (mode === this.modeValue) return
    this.modeValue = mode
    const weights = [...this.heap].sort((a, b) => a - b)
    for (const w of weights) this.deactivate(w)
    for (const w of weights) this.activate(w)
  }

  /** Weights whose pass changed since the last call, and whether V changed; resets both. */
  takeDirty(): { readonly weights: number[]; readonly virtual: boolean } {
    const out = { weights: [...this.dirtyWeights], virtual: this.dirtyVirtual }
    this.dirtyWeights.clear()
    this.dirtyVirtual = false
    return out
  }

  /**
   * Subtracts ⌊V⌋ from V and every pass, clamped at 0 (weight records store unsigned passes).
   * A clamped pass is an idle weight's in fair mode (a backlogged one is ≥ V), which activation
   * raises to ⌈V·w⌉/w from either value: no fair decision changes. In strict mode it can be a
   * starved weight's; served later in strict mode, it moves V otherwise than exact arithmetic
   * would (README, "State").
   */
  private renormalize(): void {
    const k = (this.vNum - (this.vNum % this.vDen)) / this.vDen
    this.vNum -= k * this.vDen
    this.dirtyVirtual = true
    for (let w = WEIGHT_MIN; w <= WEIGHT_MAX; w++) {
      const m = this.passNum[w] as number
      if (m === 0) continue
      this.passNum[w] = Math.max(0, m - k * w)
      this.dirtyWeights.add(w)
    }
  }

  /** True when weight a goes before weight b. */
  private before(a: number, b: number): boolean {
    if (this.modeValue === SchedulingMode.Strict) return a > b
    const l = (this.passNum[a] as number) * b
    const r = (this.passNum[b] as number) * a
    return l < r || (l === r && a > b)
  }

  private siftUp(i: number): void {
    const h = this.heap
    const w = h[i] as number
    while (i > 0) {
      const parent = (i - 1) >> 1
      const pw = h[parent] as number
      if (!this.before(w, pw)) break
      h[i] = pw
      this.heapPos[pw] = i
      i = parent
    }
    h[i] = w
    this.heapPos[w] = i
  }

  private siftDown(i: number): void {
    const h = this.heap
    const n = h.length
    const w = h[i] as number
    for (;;) {
      const l = 2 * i + 1
      if (l >= n) break
      const r = l + 1
      let c = l
      if (r < n && this.before(h[r] as number, h[l] as number)) c = r
      const cw = h[c] as number
      if (!this.before(cw, w)) break
      h[i] = cw
      this.heapPos[cw] = i
      i = c
    }
    h[i] = w
    this.heapPos[w] = i
  }
}
