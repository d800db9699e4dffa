/**
 * The cluster's replication factor for people (the CLI's `mq cluster status`, the web console):
 * `3 replicas per data group`; 0 is none recorded yet (a cluster below format level 34, whose
 * meta leaders each go by their own "replicationFactor", a config-file key: no flag sets it).
 */
export function replicationSummary(factor: number): string {
  if (factor === 0) return 'each meta leader\'s own "replicationFactor" (config file)'
  return `${replicas(factor)} per data group`
}

/** What a `setReplicationFactor` answer means, for people (the CLI, the web console). */
export function replicationResult(answer: { readonly previous: number; readonly factor: number }): string {
  const { previous, factor } = answer
  const was = previous === 0 || previous === factor ? '' : ` (was ${previous})`
  return `replication factor ${factor}${was}: data groups grow or shrink to ${replicas(factor)}, one at a time, as live nodes allow`
}

function replicas(n: number): string {
  return `${n} ${n === 1 ? 'replica' : 'replicas'}`
}
