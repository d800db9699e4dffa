/**
 * The answer to a drain (`Admin.drainNode`) in words, as the CLI and the web console print it:
 * drained, or how many replicas are still to move.
 */
export function drainResult(nodeId: string, replicasRemaining: number): string {
  return replicasRemaining === 0
    ? `node ${nodeId} is drained: it holds no replica`
    : `draining node ${nodeId}: ${replicasRemaining} replica${replicasRemaining === 1 ? '' : 's'} still to move`
}

/** The answer to an undrain (`Admin.undrainNode`) in words, as the CLI and the web console print it. */
export function undrainResult(nodeId: string, wasDraining: boolean): string {
  return wasDraining ? `node ${nodeId} is no longer draining` : `node ${nodeId} was not draining`
}
