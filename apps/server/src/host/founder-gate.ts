import { status } from '@grpc/grpc-js'
import type { ProbeResponse } from '@mq/protocol'

/** A founding member of the meta group (`--initial-meta`). */
export interface Founder {
  readonly nodeId: string
  readonly address: string
}

export interface FounderGateOptions {
  /** This node's id (one of `founders`). */
  readonly self: string
  readonly founders: readonly Founder[]
  /** Asks another founder whether its meta replica is pristine (Peer.Probe); rejects when it cannot tell. */
  readonly probe: (founder: Founder) => Promise<ProbeResponse>
  /** Hosts this founder's meta replica with the founding voters; called once. */
  readonly open: () => void
  /** Says why the gate still waits; called at most every `logEveryMs`. */
  readonly waiting: (message: string) => void
  readonly logEveryMs?: number
}

/**
 * Whether a founder that started with an empty data dir may bootstrap the meta group: when a
 * majority of the founders (itself included) holds no meta log entry beyond the founding ones
 * (`pristine`), and none answered that its replica holds more (`ran`). Every commit of the
 * meta group needs a majority of the founding voters to hold the entry first, so nothing was
 * ever committed: the cluster is new. One founder that holds more proves the meta group ran,
 * even when others answer pristine only because they wait at their own gates (a wiped founder
 * and one that never started would otherwise make a majority of 3 and elect a leader of
 * empty logs). (Not "never voted": founders that opened their gates first campaign at once,
 * and a gate waiting for founders that never voted would keep a 4-founder cluster whose first
 * two campaigned from ever electing a leader.) Otherwise the node is a founder whose data dir was wiped (or that never
 * started before, in a running cluster), and only the meta leader's acceptance of its store
 * opens the gate (FounderGate.open on a heartbeat answer).
 */
export function foundersPristine(
  founders: readonly Founder[],
  self: string,
  pristine: ReadonlySet<string>,
  ran: ReadonlySet<string> = new Set(),
): boolean {
  if (founders.some((f) => f.nodeId !== self && ran.has(f.nodeId))) return false
  const count = founders.filter((f) => f.nodeId === self || pristine.has(f.nodeId)).length
  return count > founders.length / 2
}

/**
 * Holds a founder's meta replica back while its data dir was empty at its start: a founder
 * that lost its data (wiped, a new disk) and bootstrapped again with the founding voters could
 * vote a second time in a term, or for a candidate missing entries it had acknowledged. The
 * gate opens when the founders say the cluster is new (`foundersPristine`, asked each round),
 * or when the meta leader accepts the node's store in a heartbeat answer (`open`): a founder
 * that never started before in a running cluster, whose vote was never cast. A wiped founder
 * the meta state knows is refused there instead, and stops.
 */
export class FounderGate {
  readonly #options: FounderGateOptions
  #opened = false
  #probing = false
  #loggedMs = Number.NEGATIVE_INFINITY

  constructor(options: FounderGateOptions) {
    this.#options = options
  }

  get opened(): boolean {
    return this.#opened
  }

  /** Opens the gate (once): the founder hosts its meta replica. */
  open(): void {
    if (this.#opened) return
    this.#opened = true
    this.#options.open()
  }

  /** Asks the other founders once (one round at a time); opens the gate when a majority is pristine. */
  async round(nowMs: number): Promise<void> {
    if (this.#opened || this.#probing) return
    this.#probing = true
    try {
      const others = this.#options.founders.filter((f) => f.nodeId !== this.#options.self)
      // Each answer: pristine, ran (its replica holds more), or none (unreachable, another node).
      // A version without Peer.Probe (UNIMPLEMENTED) may hold entries it cannot tell of: it
      // counts as "ran" (taken as none, it let a wiped founder and one that never started
      // pass beside an older founder that had run the meta group).
      const answers = await Promise.all(
        others.map((f) =>
          this.#options.probe(f).then(
            (r) => (r.nodeId !== f.nodeId ? undefined : r.metaPristine ? 'pristine' : 'ran'),
            (error: unknown) => (unimplemented(error) ? 'ran' : undefined),
          ),
        ),
      )
      const named = (answer: string) =>
        new Set(others.filter((_, i) => answers[i] === answer).map((f) => f.nodeId))
      const pristine = named('pristine')
      const ran = named('ran')
      if (foundersPristine(this.#options.founders, this.#options.self, pristine, ran)) {
        this.open()
      } else if (!this.#opened && nowMs - this.#loggedMs >= (this.#options.logEveryMs ?? 10_000)) {
        this.#loggedMs = nowMs
        const list = (ids: ReadonlySet<string>) => [...ids].sort().join(', ') || 'none'
        this.#options.waiting(
          `node ${this.#options.self} is a founding member that started with an empty data dir: it hosts its meta replica once a majority of the ${this.#options.founders.length} founders says its meta replica holds no entry beyond the founding ones and none holds more (a new cluster; so far ${list(pristine)} besides itself, and ${list(ran)} holding more), or once the meta leader accepts it; waiting`,
        )
      }
    } finally {
      this.#probing = false
    }
  }
}

/** Whether `error` (a ServiceError, or the MqError made of one) is the callee's UNIMPLEMENTED. */
function unimplemented(error: unknown): boolean {
  const e = error as { code?: unknown; cause?: { code?: unknown } } | undefined
  return e?.code === status.UNIMPLEMENTED || e?.cause?.code === status.UNIMPLEMENTED
}
