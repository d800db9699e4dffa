/** Groups whose highest meta term a fence keeps, at most (the least recently stepped forgotten first). */
export const FENCED_GROUPS_MAX = 10_000

/**
 * On a group's leader: the highest meta term from which it took a replica change step, per
 * group, so that a step of a lower term — a deposed meta leader's, delayed in flight after a
 * later leader retargeted or finished the change — is refused instead of acting on a change
 * that no longer is (it would remove, as a leftover member, the replica that replaced its
 * `add`). The terms are in memory: a group's new leader, or this node after a restart, knows
 * none yet, so `refusal` also asks the meta group its term now before a step.
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

  /**
   * Why a step of `groupId` sent in meta term `term` may not run, once the meta group said its
   * term now (`currentTerm`: a linearizable read, so at least the term of every meta leader
   * elected before it; 0 from a meta replica of a version that does not say), or undefined when
   * it may (and is remembered as `admit` does):
   * - a lower term than the meta group's is a deposed meta leader's step, refused even where no
   *   step of the group was taken yet, and the meta group's term becomes the group's floor;
   * - a higher one was sent by no meta leader (forged by a peer-secret holder, or corrupt): it
   *   is refused and not remembered, so it cannot fence the real leader's steps out.
   * Asks nothing for a term of 0 (a version that sends none) or a step the fence refuses
   * already. Rejects as `currentTerm` does (the meta group unreachable): no step is taken.
   */
  async refusal(
    groupId: number,
    term: number,
    currentTerm: () => Promise<number>,
  ): Promise<string | undefined> {
    if (term === 0) return undefined
    const deposed = (floor: string) =>
      `a replica change step of group ${groupId} from meta term ${term}, below ${floor}: a deposed meta leader's, ignored`
    const known = () => `meta term ${this.highest(groupId)}, which this group's leader has seen`
    if (term < this.highest(groupId)) return deposed(known())
    const current = await currentTerm()
    if (current > term) {
      this.admit(groupId, current)
      return deposed(`the meta group's term ${current}`)
    }
    if (current > 0 && term > current) {
      return `a replica change step of group ${groupId} from meta term ${term}, above the meta group's term ${current}: no meta leader sent it, ignored`
    }
    return this.admit(groupId, term) ? undefined : deposed(known())
  }

  /** The highest term a step of `groupId` was taken from (0: none yet). */
  highest(groupId: number): number {
    return this.#highest.get(groupId) ?? 0
  }
}
