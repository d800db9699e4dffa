/**
 * The moves a data group last took part in for one partition (DataGroupMachine.movesOf): the one
 * that fenced it here (as a move's source; FORMAT_LEVEL_MOVE_IDS), the one whose import it
 * completed last, and the one it is importing now.
 */
export interface PartitionMoves {
  readonly fencedBy?: number
  readonly imported?: number
  readonly importing?: number
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
  what: 'copy from' | 'import into' | 'drop in',
): string | undefined {
  if (moveId === undefined) return undefined
  const { fencedBy, imported, importing } = moves
  const later = (id: number | undefined) => id !== undefined && id > moveId
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
