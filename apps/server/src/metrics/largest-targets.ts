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
