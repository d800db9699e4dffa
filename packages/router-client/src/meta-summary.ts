import type { ClusterStatusResponse } from '@mq/protocol'

/**
 * The meta group in one line for people (the CLI's `mq cluster status`, the web console):
 * `n1, n2, n3 (5 wanted) + learner n4; adding n4 (grow)`. The size wanted shows only while the
 * group is not at it; a change under way names both sides, or the one a grow or shrink has (one
 * given up, adding and removing nobody until it finishes, neither).
 */
export function metaGroupSummary(
  status: Pick<ClusterStatusResponse, 'metaVoters' | 'metaLearners' | 'metaVotersWanted' | 'metaChange'>,
): string {
  const voters = status.metaVoters.join(', ') || '(unknown)'
  const want = status.metaVotersWanted
  const wanted = want > 0 && want !== status.metaVoters.length ? ` (${want} wanted)` : ''
  const learners = status.metaLearners.length > 0 ? ` + learner ${status.metaLearners.join(', ')}` : ''
  const c = status.metaChange
  const change = !c
    ? ''
    : c.add === '' && c.remove === ''
      ? `; giving up a change (${c.reason}): its new voter is gone`
      : c.remove === ''
        ? `; adding ${c.add} (${c.reason})`
        : c.add === ''
          ? `; removing ${c.remove} (${c.reason})`
          : `; replacing ${c.remove} by ${c.add} (${c.reason})`
  return `${voters}${wanted}${learners}${change}`
}

/** What a `setMetaVoters(wanted)` answer means, for people (the CLI, the web console). */
export function metaVotersResult(answer: { readonly voters: readonly string[] }, wanted: number): string {
  const now = answer.voters
  return now.length === wanted
    ? `the meta group has ${wanted} voters: ${now.join(', ')}`
    : `the meta group goes from ${now.length} voters (${now.join(', ')}) to ${wanted}`
}
