import { expect } from 'vitest'
import {
  type ConfState,
  type Entry,
  EntryType,
  MemoryLogStorage,
  type Message,
  Prng,
  RawNode,
  type RawNodeOptions,
  type ReadState,
  type ReplicaId,
  type Snapshot,
  type StateMachine,
} from '../src/index'

const encoder = new TextEncoder()
const decoder = new TextDecoder()

export function conf(voters: ReplicaId[], learners: ReplicaId[] = []): ConfState {
  return { voters, learners, votersOutgoing: [], learnersNext: [] }
}

export interface HarnessNode {
  raw: RawNode
  storage: MemoryLogStorage
  /** Data of applied Normal entries with data, in order (the state machine). */
  applied: string[]
  appliedEntries: Entry[]
  readStates: ReadState[]
}

/**
 * A synchronous in-process network of RawNodes for scripted scenario tests (etcd's
 * `network`): each node persists, sends and applies in the order Ready prescribes; messages
 * are delivered until the cluster is quiet; links can be cut one way or both.
 */
export class Harness {
  readonly nodes = new Map<ReplicaId, HarnessNode>()
  readonly #cut = new Set<string>()
  readonly #options: Partial<RawNodeOptions>
  /** Every message delivered, for assertions on traffic. */
  readonly delivered: Message[] = []
  /** Optional filter: return false to drop a message, or a message to deliver instead. */
  filter: ((m: Message) => boolean | Message) | null = null
  /** Whether replicas record their clock offsets (Ready.clockOffsetMs), as RaftHost does. */
  recordClockOffset = true
  #seed = 1

  constructor(ids: ReplicaId[], options: Partial<RawNodeOptions> = {}, learners: ReplicaId[] = []) {
    this.#options = options
    for (const id of [...ids, ...learners]) this.add(id, conf(ids, learners))
  }

  /** Adds (or restarts from `storage`) a node. */
  add(id: ReplicaId, initial: ConfState, storage?: MemoryLogStorage): HarnessNode {
    const s = storage ?? new MemoryLogStorage(initial)
    const raw = new RawNode(
      { electionTicks: 10, heartbeatTicks: 1, ...this.#options, id, prng: new Prng(this.#seed++) },
      s,
    )
    const snap = s.snapshot()
    const applied = snap.meta.index > 0 ? (JSON.parse(decoder.decode(snap.data)) as string[]) : []
    const node: HarnessNode = { raw, storage: s, applied, appliedEntries: [], readStates: [] }
    this.nodes.set(id, node)
    return node
  }

  node(id: ReplicaId): HarnessNode {
    const n = this.nodes.get(id)
    if (n === undefined) throw new Error(`no node ${id}`)
    return n
  }

  raw(id: ReplicaId): RawNode {
    return this.node(id).raw
  }

  /** Cuts the link from `a` to `b` (and back unless oneWay). */
  cut(a: ReplicaId, b: ReplicaId, oneWay = false): void {
    this.#cut.add(`${a}>${b}`)
    if (!oneWay) this.#cut.add(`${b}>${a}`)
  }

  isolate(id: ReplicaId): void {
    for (const other of this.nodes.keys()) if (other !== id) this.cut(id, other)
  }

  heal(): void {
    this.#cut.clear()
  }

  /** Runs every node's Ready loop and delivers messages until quiet (bounded). */
  settle(roundsMax = 10_000): void {
    for (let round = 0; round < roundsMax; round++) if (this.hop().length === 0) return
    throw new Error('Harness.settle: cluster did not go quiet')
  }

  /** Runs every node's Ready loop once and delivers what it sent (one network hop); returns those messages. */
  hop(): readonly Message[] {
    const outbox: Message[] = []
    for (const [, n] of this.nodes) {
      while (n.raw.hasReady()) outbox.push(...this.#handleReady(n))
    }
    for (const m of outbox) this.deliver(m)
    return outbox
  }

  deliver(original: Message): void {
    let m = original
    if (this.#cut.has(`${m.from}>${m.to}`)) return
    if (this.filter !== null) {
      const verdict = this.filter(m)
      if (verdict === false) return
      if (verdict !== true) m = verdict
    }
    const n = this.nodes.get(m.to)
    if (n === undefined) return
    this.delivered.push(m)
    n.raw.step(m)
  }

  /** Processes one Ready of `n` in the documented order; returns the messages to send. */
  #handleReady(n: HarnessNode): readonly Message[] {
    const rd = n.raw.ready()
    if (rd.snapshot !== null) n.storage.applySnapshot(rd.snapshot)
    if (rd.entries.length > 0) n.storage.append(rd.entries)
    if (rd.hardState !== null) n.storage.setHardState(rd.hardState)
    if (rd.clockOffsetMs !== null && this.recordClockOffset) n.storage.setClockOffset(rd.clockOffsetMs)
    n.storage.sync()
    if (rd.snapshot !== null) {
      n.applied = JSON.parse(decoder.decode(rd.snapshot.data)) as string[]
    }
    for (const e of rd.committedEntries) {
      n.appliedEntries.push(e)
      if (e.type === EntryType.Normal && e.data.length > 0) n.applied.push(decoder.decode(e.data))
    }
    n.readStates.push(...rd.readStates)
    n.raw.advance(rd)
    // A leader wants an image for a follower that holds nothing (RaftConfig.joinBySnapshot).
    if (n.raw.takeSnapshotWanted()) this.#image(n)
    return rd.messages
  }

  tick(id: ReplicaId, times = 1): void {
    for (let i = 0; i < times; i++) this.raw(id).tick()
  }

  /** Makes `id` campaign (up to three rounds, as a higher term may be needed), settling after each. */
  elect(id: ReplicaId): void {
    for (let round = 0; round < 3; round++) {
      this.raw(id).campaign()
      this.settle()
      if (this.raw(id).status().role === 'leader') return
    }
  }

  /** One heartbeat round from `id` (a leader resumes paused followers on their replies). */
  heartbeat(id: ReplicaId): void {
    for (let i = 0; i < 2; i++) {
      this.raw(id).tick()
      this.settle()
    }
  }

  propose(id: ReplicaId, text: string): number {
    const index = this.raw(id).propose(encoder.encode(text))
    this.settle()
    return index
  }

  /** Snapshots `id`'s state machine at its applied index and compacts its log up to it. */
  compact(id: ReplicaId): void {
    this.#image(this.node(id), true)
  }

  /** Records an image of `n`'s state machine at its applied index, compacting up to it or not at all. */
  #image(n: HarnessNode, compact = false): void {
    const applied = n.raw.status().applied
    const meta = n.raw.snapshotMeta(applied)
    const compactIndex = compact ? applied : Math.min(applied, n.storage.firstIndex() - 1)
    n.storage.compact({ meta, data: encoder.encode(JSON.stringify(n.applied)) }, compactIndex)
    n.storage.sync()
  }

  /** Crashes `id` (losing unsynced writes) and restarts it from its storage. */
  restart(id: ReplicaId): HarnessNode {
    const n = this.node(id)
    n.storage.crash()
    return this.add(id, n.raw.status().conf, n.storage)
  }

  leaders(): ReplicaId[] {
    return [...this.nodes.values()]
      .filter((n) => n.raw.status().role === 'leader')
      .map((n) => n.raw.status().id)
  }
}

export function bytes(text: string): Uint8Array {
  return encoder.encode(text)
}

/**
 * A state machine that keeps the data of the normal entries it applies, in order (each apply
 * answers the item's place), and the index it applied last; `onEntry` sees every entry
 * applied, before it.
 */
export class ListMachine implements StateMachine {
  items: string[] = []
  applied = 0
  constructor(readonly onEntry?: (e: Entry) => void) {}
  apply(entries: readonly Entry[]): readonly unknown[] {
    return entries.map((e) => {
      this.onEntry?.(e)
      this.applied = e.index
      if (e.type !== EntryType.Normal || e.data.length === 0) return undefined
      this.items.push(decoder.decode(e.data))
      return this.items.length - 1
    })
  }
  snapshot(): Uint8Array {
    return encoder.encode(JSON.stringify(this.items))
  }
  restore(s: Snapshot): void {
    this.items = JSON.parse(decoder.decode(s.data)) as string[]
    this.applied = s.meta.index
  }
}

/** Shuffles `items` in place with `p` (Fisher–Yates): messages delivered out of order. */
export function shuffle<T>(p: Prng, items: T[]): void {
  for (let i = items.length - 1; i > 0; i--) {
    const j = p.below(i + 1)
    const t = items[i] as T
    items[i] = items[j] as T
    items[j] = t
  }
}

/**
 * Every replica of each group holds the same items, and every resolved proposal sits at the
 * place its apply answered on every replica.
 */
export function expectReplicasAgree(
  machines: ReadonlyMap<string, ListMachine>,
  ids: readonly ReplicaId[],
  groups: readonly number[],
  resolved: readonly { readonly g: number; readonly result: unknown; readonly data: string }[],
  label = '',
): void {
  const of = (id: ReplicaId, g: number) => machines.get(`${id}/${g}`)?.items ?? []
  for (const g of groups) {
    const first = of(ids[0] as ReplicaId, g)
    for (const id of ids) expect(of(id, g), `${label} group ${g}`).toEqual(first)
  }
  for (const r of resolved) for (const id of ids) expect(of(id, r.g)[r.result as number], label).toBe(r.data)
}
