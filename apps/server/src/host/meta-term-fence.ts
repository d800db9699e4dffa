/** Groups whose highest meta term a fence keeps, at most (the least recently stepped forgotten first). */
export const FENCED_GROUPS_MAX = 10_000

/**
 * On a group's leader: the highest meta term from which it took a replica change step, per
 * group, so that a step of a lower term — a deposed meta leader's, delayed in flight after a
 * later leader retargeted or finished the change — is refused instead of acting on a change
 * that no longer is (it would remove, as a leftover member, the replica that replaced its
 * `add`). In memory: a group's new leader, or this node after a restart, knows no term yet and
 * takes the first step it gets, as before; the fence narrows the window, it does not close it.
 */
export class MetaTermFence {
  readonly #highest = new Map<number, number>()

  /**
   * Whether a step of group `groupId` sent in meta term `term` may run (0: a version that sends
   * no term, always); a higher term than any seen is remembered.
   */
  admit(groupId: number, term: number): boolean {
    if (term === 0) return true
    const highest = this.#highest.get(groupId) ?? 0
    if (term < highest) return false
    this.#highest.delete(groupId) // re-inserted: the map's order is recency
    this.#highest.set(groupId, term)
    while (this.#highest.size > FENCED_GROUPS_MAX) {
      this.#highest.delete(this.#highest.keys().next().value as number)
    }
    return true
  }

  /** The highest term a step of `groupId` was taken from (0: none yet). */
  highest(groupId: number): number {
    return this.#highest.get(groupId) ?? 0
  }
}
