import type { ChangeReplicasResponse } from '@mq/protocol'

/**
 * The meta leader's watch on the replicas being added (soft state of its term): a change waits
 * for its learner to catch up, and a learner on a live node that never does (its link to the
 * group's leader cut while the meta leader still hears its node, say) held the change —
 * and the node's next replicas — for ever. Each step's answer that waits for the learner says
 * how far it has come (replica-changer.ts: its match index and the image pages served it); a
 * change whose mark has not moved for `stallMs` (--replica-stall-ms) is found stalled: the change
 * is retargeted as for a lost node (meta-service `stalled`), and its node receives no new
 * replica for another `stallMs` (its replicas, and its other changes, stay).
 */
export class LearnerStalls {
  readonly #stallMs: number
  /** Per group (0: the meta group): the learner waited for, its last mark, and since when. */
  readonly #marks = new Map<
    number,
    { readonly add: string; readonly mark: string; readonly sinceMs: number }
  >()
  /** The changes found stalled, per group: the node being added, and when. */
  readonly #stalled = new Map<number, { readonly add: string; readonly atMs: number }>()

  constructor(stallMs: number) {
    this.#stallMs = stallMs
  }

  /** How long a learner's mark must stand still for it to be found stalled. */
  get stallMs(): number {
    return this.#stallMs
  }

  /**
   * Takes the answer to a step of group `groupId`'s change adding `add`, at `nowMs`; true when
   * it finds `add` stalled (once per stall).
   */
  note(
    groupId: number,
    add: string,
    answer: Pick<ChangeReplicasResponse, 'addMatch' | 'addImagePages'>,
    nowMs: number,
  ): boolean {
    if (answer.addMatch === undefined) {
      // Not waiting for the learner (a step taken, done, or a leader of an earlier version).
      this.#marks.delete(groupId)
      return false
    }
    const mark = `${answer.addMatch}/${answer.addImagePages ?? 0}`
    const last = this.#marks.get(groupId)
    if (!last || last.add !== add || last.mark !== mark) {
      this.#marks.set(groupId, { add, mark, sinceMs: nowMs })
      return false
    }
    if (nowMs - last.sinceMs < this.#stallMs) return false
    this.#marks.delete(groupId)
    this.#stalled.set(groupId, { add, atMs: nowMs })
    return true
  }

  /** A group's change ended (or its step failed): its mark goes. */
  forget(groupId: number): void {
    this.#marks.delete(groupId)
  }

  /** The changes found stalled within the last `stallMs`: group id (0: the meta group) → node being added. */
  stalled(nowMs: number): Map<number, string> {
    const stalled = new Map<number, string>()
    for (const [groupId, { add, atMs }] of this.#stalled)
      if (nowMs - atMs >= this.#stallMs) this.#stalled.delete(groupId)
      else stalled.set(groupId, add)
    return stalled
  }

  /** Forgets everything (another term). */
  clear(): void {
    this.#marks.clear()
    this.#stalled.clear()
  }
}
