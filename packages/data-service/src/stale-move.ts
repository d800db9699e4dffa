/**
 * The moves a data group last took part in for one partition (DataGroupMachine.movesOf): the one
 * that fenced it here (as a move's source; FORMAT_LEVEL_MOVE_IDS), the one whose import it
 * completed last, the one it is importing now, and the latest move from here that was aborted
 * (its fence lifted: FORMAT_LEVEL_MOVE_ABORT).
 */
export interface PartitionMoves {
  readonly fencedBy?: number
  readonly imported?: number
  readonly importing?: number
  readonly aborted?: number
}

/**
 * Why a request of move `moveId` is stale for a group whose latest moves of the partition are
 * `moves`; undefined when it is not. Move ids only grow, and the meta state moves a partition
 * once at a time, so a group fenced by, importing, or that imported a later move than `moveId`
 * is past it; fenced by another move, it is that move's source (a copy from it, or a drop of
 * it, is that move's alone).
 */
export function staleMove(
  moveId: number | undefined,
  moves: PartitionMoves,
  what: 'copy from' | 'import into' | 'drop in' | 'fence in',
): string | undefined {
  if (moveId === undefined) return undefined
  const { fencedBy, imported, importing, aborted } = moves
  const later = (id: number | undefined) => id !== undefined && id > moveId
  // A copy from, or a drop in, its source of a move aborted there (or of an earlier one).
  if (what !== 'import into' && aborted !== undefined && aborted >= moveId)
    return `move ${moveId} is stale here: ${what} this group, where move ${aborted} was aborted (its fence lifted; a late request, refused)`
  const otherFence = what === 'import into' ? later(fencedBy) : fencedBy !== undefined && fencedBy !== moveId
  if (!otherFence && !later(imported) && !later(importing)) return undefined
  const since = [
    fencedBy !== undefined ? `fenced by move ${fencedBy}` : '',
    imported !== undefined ? `imported by move ${imported}` : '',
    importing !== undefined ? `being imported by move ${importing}` : '',
  ]
    .filter(Boolean)
    .join(', ')
  return `move ${moveId} is stale here: ${what} this group, whose copy of the partition was ${since} since (a late request of an earlier move, refused)`
}

/**
 * Whether chunk 0 of move `moveId` may clear a copy of the partition the target group holds
 * unfenced (FORMAT_LEVEL_MOVE_ABORT): only one imported by an earlier move. Moves of a partition
 * run one at a time and the meta state routes to the target only once its import completed, so
 * a later move targets a group only when the partition is served elsewhere: a copy the group
 * still holds unfenced is then an aborted move's (its last chunk landed as the abort lifted the
 * source's fence). A partition the group opened itself (imported by none) is never cleared.
 */
export function replacesAborted(moveId: number, moves: PartitionMoves): boolean {
  return moves.imported !== undefined && moves.imported < moveId
}
