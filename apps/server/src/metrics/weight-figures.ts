/**
 * The `max` weights of `weights` with the largest target share (ties: the heavier), in their
 * order. A partition may hold messages of 1,000 weights; what shows them (the console's
 * history, the scrape's per-weight series) keeps these few.
 */
export function largestTargets<W extends { readonly weight: number; readonly targetShare: number }>(
  weights: readonly W[],
  max: number,
): readonly W[] {
  if (weights.length <= max) return weights
  const kept = new Set(
    [...weights].sort((a, b) => b.targetShare - a.targetShare || b.weight - a.weight).slice(0, max),
  )
  return weights.filter((w) => kept.has(w))
}

/** A weight's counts, oldest age and shares, summed over weights or over partitions. */
export interface WeightFigures {
  ready: number
  delayed: number
  leased: number
  dead: number
  oldestAgeMs: number
  targetShare: number
  achievedShare: number
}

export function noWeightFigures(): WeightFigures {
  return { ready: 0, delayed: 0, leased: 0, dead: 0, oldestAgeMs: 0, targetShare: 0, achievedShare: 0 }
}

/** Adds `w` into `sum`: the counts add up, the oldest age is the largest, the shares add up times `share`. */
export function addWeightFigures(sum: WeightFigures, w: Readonly<WeightFigures>, share = 1): void {
  sum.ready += w.ready
  sum.delayed += w.delayed
  sum.leased += w.leased
  sum.dead += w.dead
  sum.oldestAgeMs = Math.max(sum.oldestAgeMs, w.oldestAgeMs)
  sum.targetShare += w.targetShare * share
  sum.achievedShare += w.achievedShare * share
}
