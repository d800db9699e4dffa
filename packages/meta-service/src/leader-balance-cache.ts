import { type LeaderTransfer, preferredLeaders, transfersByNode } from './leader-balance'
import type { MetaState } from './meta-state'

/** What the balancing is computed from besides the meta state (see `preferredLeaders`). */
export interface LeaderBalanceInput {
  /** The nodes that may be given a leadership. */
  readonly leaders: ReadonlySet<string>
  readonly keepers: ReadonlySet<string>
  readonly stable: ReadonlySet<string>
  readonly overrides: ReadonlyMap<number, string>
}

/**
 * The meta leader's leader balancing, computed once for a meta state's revision and the same
 * node sets and overrides, then answered to every node's heartbeat from there: at the meta
 * state's bounds (1,000 nodes, 10,000 groups) one computation costs ~35 ms balanced and more
 * while leaderships move, and 1,000 nodes send ~2,000 heartbeats a second (an audit).
 */
export class LeaderBalanceCache {
  #state: MetaState | undefined
  #revision = -1
  #input: LeaderBalanceInput | undefined
  #transfers = new Map<string, LeaderTransfer[]>()
  /** Computations made (for tests). */
  computed = 0

  /** The transfers to ask of `nodeId` (groups it leads that should have another leader). */
  transfersFor(state: MetaState, nodeId: string, input: LeaderBalanceInput): readonly LeaderTransfer[] {
    if (state !== this.#state || state.revision() !== this.#revision || !this.#sameInput(input)) {
      const preferred = preferredLeaders(state, input.leaders, input)
      this.#transfers = transfersByNode(state, preferred)
      this.#state = state
      this.#revision = state.revision()
      // Copies: the caller's sets and map may change after.
      this.#input = {
        leaders: new Set(input.leaders),
        keepers: new Set(input.keepers),
        stable: new Set(input.stable),
        overrides: new Map(input.overrides),
      }
      this.computed++
    }
    return this.#transfers.get(nodeId) ?? []
  }

  #sameInput(input: LeaderBalanceInput): boolean {
    const before = this.#input
    if (before === undefined) return false
    const sameSet = (a: ReadonlySet<string>, b: ReadonlySet<string>) =>
      a.size === b.size && [...a].every((x) => b.has(x))
    return (
      sameSet(before.leaders, input.leaders) &&
      sameSet(before.keepers, input.keepers) &&
      sameSet(before.stable, input.stable) &&
      before.overrides.size === input.overrides.size &&
      [...input.overrides].every(([g, n]) => before.overrides.get(g) === n)
    )
  }
}
