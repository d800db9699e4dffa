/**
 * Whether a group of `replicas` keeps no majority once the `lost` nodes are left out: it has no
 * leader (check-quorum) and commits nothing, neither a membership change nor a move's entries,
 * until one of them comes back.
 */
export function lostMajority(replicas: readonly string[], lost: ReadonlySet<string>): boolean {
  return replicas.filter((r) => !lost.has(r)).length < Math.floor(replicas.length / 2) + 1
}
