import type { Entry, ReplicaId } from '../types'

/** A broken Raft property, found by the checker. */
export class SafetyViolation extends Error {
  override readonly name = 'SafetyViolation'
}

/** FNV-1a over bytes, to compare entry payloads cheaply. */
export function hashBytes(data: Uint8Array, seed = 0x811c9dc5): number {
  let h = seed >>> 0
  for (let i = 0; i < data.length; i++) {
    h ^= data[i]!
    h = Math.imul(h, 0x01000193) >>> 0
  }
  return h
}

/**
 * Checks Raft's safety properties (Raft Fig. 3) from outside the code under test, fed by the
 * simulator after every event:
 * - Election Safety: at most one leader per term;
 * - Log Matching: two logs with an entry of the same index and term hold the same entry and
 *   agree on the term before it (so, by induction, on every entry before it);
 * - Leader Completeness: a leader of term T holds every entry committed in a term below T;
 * - State Machine Safety: every replica applies the same entry at each index (checked on a
 *   hash chain of the applied state, so snapshots are covered too);
 * - committed entries never change (the term committed at an index is fixed forever);
 * - ReadIndex linearizability: a read index is at least the commit index known anywhere
 *   when the read was issued; timestamps never decrease along the applied log.
 *
 * Committed entries are never lost: an entry committed and then lost would show as a leader
 * without it (leader completeness), as a different term committed at its index, or as a
 * different state hash at its index; and the liveness phase ends only when every voter has
 * applied past every index committed during the run.
 */
export class SafetyChecker {
  readonly #leaderOfTerm = new Map<number, ReplicaId>()
  readonly #entry = new Map<string, { dataHash: number; prevTerm: number }>()
  readonly #committedTerm = new Map<number, number>()
  /** The lowest term in which any replica saw each index committed. */
  readonly #commitSeenInTerm = new Map<number, number>()
  readonly #stateHash = new Map<number, number>()
  maxCommitted = 0
  checks = 0

  leaderElected(id: ReplicaId, term: number, termAt: (index: number) => number, firstIndex: number): void {
    this.checks++
    const other = this.#leaderOfTerm.get(term)
    if (other !== undefined && other !== id) {
      throw new SafetyViolation(`election safety: ${other} and ${id} both lead term ${term}`)
    }
    this.#leaderOfTerm.set(term, id)
    for (let i = Math.max(1, firstIndex); i <= this.maxCommitted; i++) {
      const seen = this.#commitSeenInTerm.get(i)
      if (seen === undefined || seen >= term) continue
      const t = termAt(i)
      if (t !== this.#committedTerm.get(i)) {
        throw new SafetyViolation(
          `leader completeness: leader ${id} of term ${term} has term ${t} at ${i}, committed with term ${this.#committedTerm.get(i)}`,
        )
      }
    }
  }

  persisted(id: ReplicaId, entries: readonly Entry[], prevTerm: number): void {
    this.checks++
    let prev = prevTerm
    for (const e of entries) {
      const key = `${e.index}:${e.term}`
      const dataHash = hashBytes(e.data, e.type)
      const seen = this.#entry.get(key)
      if (seen === undefined) this.#entry.set(key, { dataHash, prevTerm: prev })
      else if (seen.dataHash !== dataHash || seen.prevTerm !== prev) {
        throw new SafetyViolation(
          `log matching: ${id} holds a different entry or prefix at index ${e.index} term ${e.term}`,
        )
      }
      prev = e.term
    }
  }

  committed(id: ReplicaId, index: number, term: number, nodeTerm: number): void {
    this.checks++
    const t = this.#committedTerm.get(index)
    if (t === undefined) this.#committedTerm.set(index, term)
    else if (t !== term) {
      throw new SafetyViolation(`committed entry changed: ${id} commits term ${term} at ${index}, was ${t}`)
    }
    const seen = this.#commitSeenInTerm.get(index)
    if (seen === undefined || nodeTerm < seen) this.#commitSeenInTerm.set(index, nodeTerm)
    if (index > this.maxCommitted) this.maxCommitted = index
  }

  applied(id: ReplicaId, index: number, stateHash: number): void {
    this.checks++
    const h = this.#stateHash.get(index)
    if (h === undefined) this.#stateHash.set(index, stateHash)
    else if (h !== stateHash) {
      throw new SafetyViolation(
        `state machine safety: ${id} has a different state after applying index ${index}`,
      )
    }
  }

  readAnswered(id: ReplicaId, readIndex: number, commitKnownAtRequest: number): void {
    this.checks++
    if (readIndex < commitKnownAtRequest) {
      throw new SafetyViolation(
        `linearizable read: ${id} got read index ${readIndex} below the commit index ${commitKnownAtRequest} known when it asked`,
      )
    }
  }

  stateHashAt(index: number): number | undefined {
    return this.#stateHash.get(index)
  }
}
