import { ConfChangeType } from '../conf-change'
import { DEFAULT_RAFT_CONFIG } from '../config'
import { RaftError } from '../errors'
import { MemoryLogStorage } from '../memory-storage'
import type { Message } from '../message'
import { Prng } from '../prng'
import { RawNode } from '../raw-node'
import { Role } from '../read-state'
import type { Ready } from '../ready'
import { type ConfState, type Entry, EntryType, type ReplicaId, type Snapshot } from '../types'
import { hashBytes, SafetyChecker, SafetyViolation } from './checker'
import { EventQueue } from './event-queue'
import { type SwarmOptions, swarmOptions } from './swarm'

/** How the simulator replays a seed; printed with every failure. */
export function replayCommand(seed: number, rejoin = false, few = false): string {
  return `pnpm --filter @mq/raft-core sim --seed ${seed}${rejoin ? ' --rejoin' : ''}${few ? ' --few' : ''}`
}

/** A simulation failed: a safety property broke, liveness did not return, or the core threw. */
export class SimFailure extends Error {
  override readonly name = 'SimFailure'
  readonly seed: number
  constructor(
    seed: number,
    atMs: number,
    detail: string,
    options?: { cause?: unknown; rejoin?: boolean; few?: boolean },
  ) {
    super(
      `seed ${seed} failed at ${atMs}ms: ${detail}\n  replay: ${replayCommand(seed, options?.rejoin, options?.few)}`,
      options,
    )
    this.seed = seed
  }
}

export interface SimResult {
  readonly seed: number
  readonly virtualMs: number
  readonly events: number
  readonly committed: number
  readonly elections: number
  readonly crashes: number
  /** Replicas started again empty under their id (SwarmOptions.rejoinWiped). */
  readonly wipes: number
  readonly snapshotsInstalled: number
  readonly confChanges: number
  readonly transfers: number
  readonly reads: number
  readonly dropped: number
  /** The fewest voters a configuration proposed during the run named (SwarmOptions.votersMin). */
  readonly fewestVoters: number
  readonly checks: number
  readonly livenessMs: number
}

type SimEvent =
  | { kind: 'tick'; node: SimNode; incarnation: number }
  | { kind: 'flush'; node: SimNode; incarnation: number }
  | { kind: 'deliver'; msg: Message }
  | { kind: 'client' }
  | { kind: 'fault' }
  | { kind: 'heal'; links: string[] }
  | { kind: 'restart'; node: SimNode }

interface SimNode {
  readonly id: ReplicaId
  storage: MemoryLogStorage
  raw: RawNode | null
  incarnation: number
  readonly clockRate: number
  readonly clockOffsetMs: number
  /** Readies taken and not yet advanced, oldest first, each with its storage sync mark. */
  pending: PendingReady[]
  /** Pending Readies that wait for their flush before being sent and applied. */
  late: number
  /** When the last scheduled flush lands (flushes land in order). */
  flushAtMs: number
  /** The state machine: last applied index and a hash chain over applied entries. */
  appliedIndex: number
  stateHash: number
  lastTimestampMs: number
  commitSeen: number
  wasLeaderTerm: number
}

interface PendingReady {
  readonly rd: Ready
  /** Sent and applied before its flush (a leader keeping its term, behind no late Ready). */
  readonly early: boolean
  /** The storage writes staged up to this Ready (MemoryLogStorage.stageMark). */
  readonly mark: number
}

const TICK_MS = 10
/** Rounding of the group clock's pace check (whole ms, readings at ticks). */
const CLOCK_PACE_SLACK_MS = 20
const encoder = new TextEncoder()
const EMPTY_CONF: ConfState = { voters: [], learners: [], votersOutgoing: [], learnersNext: [] }

/**
 * A whole Raft cluster in one process on virtual time, after TigerBeetle's VOPR and
 * FoundationDB's simulation: one seed fixes the fault mix (swarm), the network (drop,
 * duplicate, delay, reorder, symmetric and one-way partitions, malformed messages), crashes
 * that lose unsynced writes, clock rates, and a client that proposes, reads, changes
 * membership and transfers leadership. The checker runs after every event. After the
 * safety phase the faults stop and a leader must commit a proposal within a bound.
 */
export class SimCluster {
  readonly seed: number
  readonly options: SwarmOptions
  readonly #prng: Prng
  readonly #queue = new EventQueue<SimEvent>(1_000_000)
  readonly #nodes = new Map<ReplicaId, SimNode>()
  readonly #blocked = new Map<string, number>()
  readonly checker = new SafetyChecker()
  #nowMs = 0
  /** The highest group clock a leader read so far, and when (#checkClockPace). */
  #maxStamp = { ms: 0, atMs: 0 }
  /** When each entry (`index:term`) was first handed to a replica to persist (#checkCommittedPace). */
  readonly #firstSeenMs = new Map<string, number>()
  /** The highest index any replica applied (the first apply of the next is checked). */
  #firstAppliedIndex = 0
  /** The lowest `stamp − rate × first seen` over the entries applied so far (#checkCommittedPace). */
  #committedPaceMin = Number.POSITIVE_INFINITY
  /** The highest clock rate of any replica so far (#checkCommittedPace). */
  #fastestClockRate = 1
  #faultsOn = true
  #proposalSeq = 0
  readonly #reads = new Map<string, number>()
  /** Receives a line per notable event when set (replaying a seed with --trace). */
  trace: ((line: string) => void) | null = null
  #stats = {
    events: 0,
    elections: 0,
    crashes: 0,
    wipes: 0,
    snapshotsInstalled: 0,
    confChanges: 0,
    transfers: 0,
    reads: 0,
    dropped: 0,
    fewestVoters: 0,
  }

  constructor(seed: number, overrides: Partial<SwarmOptions> = {}) {
    this.seed = seed
    this.#prng = new Prng(seed)
    this.options = { ...swarmOptions(new Prng(seed ^ 0x5eed5eed)), ...overrides }
    this.#stats.fewestVoters = this.options.nodeCount
    const ids = Array.from({ length: this.options.nodeCount }, (_, i) => `n${i + 1}`)
    const conf: ConfState = { voters: ids, learners: [], votersOutgoing: [], learnersNext: [] }
    for (const id of ids) this.#createNode(id, conf)
  }

  #createNode(id: ReplicaId, conf: ConfState): SimNode {
    const node: SimNode = {
      id,
      storage: new MemoryLogStorage(conf),
      raw: null,
      incarnation: 0,
      clockRate:
        this.options.clockRateSpread > 0
          ? 1 + (this.#prng.float() * 2 - 1) * this.options.clockRateSpread
          : 1,
      clockOffsetMs: this.#prng.below(this.options.clockOffsetMsMax),
      pending: [],
      late: 0,
      flushAtMs: 0,
      appliedIndex: 0,
      stateHash: 0,
      lastTimestampMs: 0,
      commitSeen: 0,
      wasLeaderTerm: 0,
    }
    this.#nodes.set(id, node)
    this.#fastestClockRate = Math.max(this.#fastestClockRate, node.clockRate)
    this.#start(node)
    return node
  }

  #start(node: SimNode): void {
    node.incarnation++
    const o = this.options
    node.raw = new RawNode(
      {
        id: node.id,
        prng: new Prng(this.#prng.nextU32()),
        electionTicks: o.electionTicks,
        heartbeatTicks: o.heartbeatTicks,
        preVote: o.preVote,
        checkQuorum: o.checkQuorum,
        inflightMsgsMax: o.inflightMsgsMax,
        msgEntriesMax: o.msgEntriesMax,
        msgBytesMax: o.msgBytesMax,
        snapshotChunkBytes: o.snapshotChunkBytes,
        uncommittedEntriesMax: 512,
        commitBroadcast: o.commitBroadcast,
        joinBySnapshot: o.joinBySnapshot,
      },
      node.storage,
    )
    const snap = node.storage.snapshot()
    this.#restoreStateMachine(node, snap)
    node.commitSeen = node.raw.status().commit
    node.pending = []
    node.late = 0
    this.#scheduleTick(node)
  }

  #restoreStateMachine(node: SimNode, snap: Snapshot): void {
    if (snap.meta.index === 0) {
      node.appliedIndex = 0
      node.stateHash = 0
      node.lastTimestampMs = 0
      return
    }
    const view = new DataView(snap.data.buffer, snap.data.byteOffset, snap.data.byteLength)
    node.appliedIndex = view.getFloat64(0)
    node.stateHash = view.getUint32(8)
    node.lastTimestampMs = view.getFloat64(12)
    if (node.appliedIndex !== snap.meta.index)
      this.#fail(`snapshot data of ${node.id} does not match its index`)
  }

  #snapshotData(node: SimNode): Uint8Array {
    const data = new Uint8Array(20 + this.options.snapshotPadBytes)
    const view = new DataView(data.buffer)
    view.setFloat64(0, node.appliedIndex)
    view.setUint32(8, node.stateHash)
    view.setFloat64(12, node.lastTimestampMs)
    return data
  }

  #scheduleTick(node: SimNode): void {
    this.#queue.push(this.#nowMs + TICK_MS / node.clockRate, {
      kind: 'tick',
      node,
      incarnation: node.incarnation,
    })
  }

  #localClockMs(node: SimNode): number {
    return Math.floor(this.#nowMs * node.clockRate) + node.clockOffsetMs
  }

  /** The replica's steady clock (its rate, no offset), or undefined when the seed runs without. */
  #localMonoMs(node: SimNode): number | undefined {
    return this.options.steadyClock ? this.#nowMs * node.clockRate : undefined
  }

  #log(line: string): void {
    this.trace?.(`${this.#nowMs.toFixed(1)} ${line}`)
  }

  #fail(detail: string, cause?: unknown): never {
    const rejoin = this.options.rejoinWiped
    const few = this.options.votersMin < 3
    throw new SimFailure(
      this.seed,
      Math.floor(this.#nowMs),
      detail,
      cause === undefined ? { rejoin, few } : { cause, rejoin, few },
    )
  }

  /** Runs the safety phase then the liveness phase; throws SimFailure on any violation. */
  run(): SimResult {
    try {
      this.#queue.push(0, { kind: 'client' })
      this.#queue.push(0, { kind: 'fault' })
      this.#runUntil(this.options.safetyMs)
      this.#stopFaults()
      const livenessMs = this.#liveness()
      return {
        seed: this.seed,
        virtualMs: Math.floor(this.#nowMs),
        committed: this.checker.maxCommitted,
        checks: this.checker.checks,
        livenessMs,
        ...this.#stats,
      }
    } catch (e) {
      if (e instanceof SimFailure) throw e
      if (e instanceof SafetyViolation) this.#fail(e.message, e)
      this.#fail(`unexpected exception: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`, e)
    }
  }

  #runUntil(endMs: number, until?: () => boolean): boolean {
    while (this.#queue.peekAt() <= endMs) {
      const at = this.#queue.peekAt()
      const ev = this.#queue.pop()!
      if (at > this.#nowMs) this.#nowMs = at
      this.#stats.events++
      this.#handle(ev)
      if (until?.()) return true
    }
    this.#nowMs = endMs
    return false
  }

  #handle(ev: SimEvent): void {
    switch (ev.kind) {
      case 'tick': {
        const n = ev.node
        if (n.raw === null || ev.incarnation !== n.incarnation) return
        n.raw.tick(this.#localClockMs(n), this.#localMonoMs(n))
        if (n.raw.status().role === Role.Leader) this.#checkClockPace(n.raw.timelineMs())
        this.#pump(n)
        this.#scheduleTick(n)
        return
      }
      case 'flush': {
        const n = ev.node
        if (n.raw === null || ev.incarnation !== n.incarnation) return
        this.#finishReady(n)
        return
      }
      case 'deliver': {
        const n = this.#nodes.get(ev.msg.to)
        if (n === undefined || n.raw === null || this.#isBlocked(ev.msg.from, ev.msg.to)) {
          this.#stats.dropped++
          return
        }
        n.raw.observeClock(this.#localClockMs(n), this.#localMonoMs(n))
        n.raw.step(ev.msg)
        this.#pump(n)
        return
      }
      case 'client':
        this.#client()
        this.#queue.push(this.#nowMs + 1 + this.#prng.below(this.options.clientIntervalMsMax), {
          kind: 'client',
        })
        return
      case 'fault':
        if (!this.#faultsOn) return
        this.#fault()
        this.#queue.push(this.#nowMs + 1 + this.#prng.below(20), { kind: 'fault' })
        return
      case 'heal':
        for (const l of ev.links) this.#unblock(l)
        return
      case 'restart':
        if (ev.node.raw === null) {
          this.#log(`${ev.node.id} restart`)
          this.#start(ev.node)
          this.#pump(ev.node)
        }
        return
    }
  }

  // ---- the Ready loop: persist, then (after a simulated fsync) send and apply ------------------

  #pump(n: SimNode): void {
    const raw = n.raw!
    while (n.pending.length < this.options.pipelineMax && raw.hasReady()) this.#takeReady(n, raw)
  }

  #takeReady(n: SimNode, raw: RawNode): void {
    const rd = raw.ready()
    const status = raw.status()
    if (this.trace !== null) {
      if (rd.softState !== null)
        this.#log(
          `${n.id} ${rd.softState.role} term=${status.term} lead=${rd.softState.lead} last=${status.lastIndex} conf=${status.conf.voters.join('/')}+${status.conf.learners.join('/')}`,
        )
      for (const m of rd.messages)
        if (m.type !== 6 && m.type !== 7)
          this.#log(
            `${n.id} send ${JSON.stringify({ ...m, entries: m.entries.map((e) => `${e.index}/${e.term}${e.type === 1 ? 'C' : ''}`), snapshot: m.snapshot === null ? null : m.snapshot.meta.index })}`,
          )
      if (rd.hardState !== null && rd.hardState.commit > n.commitSeen)
        this.#log(`${n.id} commit ${rd.hardState.commit}`)
    }
    if (rd.softState !== null && rd.softState.role === Role.Leader && status.term !== n.wasLeaderTerm) {
      n.wasLeaderTerm = status.term
      this.#stats.elections++
      this.checker.leaderElected(n.id, status.term, (i) => raw.termAt(i), status.firstIndex)
    }
    if (rd.hardState !== null && rd.hardState.commit > n.commitSeen) {
      for (let i = n.commitSeen + 1; i <= rd.hardState.commit; i++) {
        const t = raw.termAt(i)
        if (t >= 0) this.checker.committed(n.id, i, t, rd.hardState.term)
      }
      n.commitSeen = rd.hardState.commit
    }
    // As the host does: a leader that keeps its term and vote sends and applies before its
    // own flush (its own log counts toward commitment only once persisted, at advance), unless
    // a late Ready of its own is still pending (sends and applies stay in order).
    const before = n.storage.initialState().hardState
    const votes =
      rd.hardState !== null && (rd.hardState.term !== before.term || rd.hardState.vote !== before.vote)
    const early =
      n.late === 0 && !votes && rd.snapshot === null && (rd.softState?.role ?? status.role) === Role.Leader
    // Persist (staged: durable only at the flush below).
    if (rd.snapshot !== null) n.storage.applySnapshot(rd.snapshot)
    if (rd.entries.length > 0) {
      for (const e of rd.entries) {
        const key = `${e.index}:${e.term}`
        if (!this.#firstSeenMs.has(key)) this.#firstSeenMs.set(key, this.#nowMs)
      }
      n.storage.append(rd.entries)
      this.checker.persisted(n.id, rd.entries, n.storage.term(rd.entries[0]!.index - 1))
    }
    if (rd.hardState !== null) n.storage.setHardState(rd.hardState)
    if (rd.clockOffsetMs !== null && this.options.recordClockOffset)
      n.storage.setClockOffset(rd.clockOffsetMs)
    n.pending.push({ rd, early, mark: n.storage.stageMark() })
    if (early) this.#sendAndApply(n, rd)
    else n.late++
    // Flushes land in the order they were started (a later one never overtakes).
    const delay = this.options.fsyncMsMax > 0 ? this.#prng.below(this.options.fsyncMsMax + 1) : 0
    n.flushAtMs = Math.max(n.flushAtMs, this.#nowMs + delay)
    this.#queue.push(n.flushAtMs, { kind: 'flush', node: n, incarnation: n.incarnation })
  }

  /** The oldest pending Ready's flush landed: its writes (only those) are durable now. */
  #finishReady(n: SimNode): void {
    const raw = n.raw!
    const { rd, early, mark } = n.pending.shift()!
    n.storage.sync(mark)
    if (!early) {
      n.late--
      this.#sendAndApply(n, rd)
    }
    raw.advance(rd)
    this.#maybeCompact(n)
    this.#pump(n)
  }

  #sendAndApply(n: SimNode, rd: Ready): void {
    for (const m of rd.messages) this.#send(m)
    if (rd.snapshot !== null) {
      this.#restoreStateMachine(n, rd.snapshot)
      this.#stats.snapshotsInstalled++
      this.checker.applied(n.id, n.appliedIndex, n.stateHash)
    }
    for (const e of rd.committedEntries) {
      if (e.index !== n.appliedIndex + 1) {
        this.#fail(`${n.id} applies index ${e.index} after ${n.appliedIndex}: out of order`)
      }
      if (e.timestampMs < n.lastTimestampMs) {
        this.#fail(
          `${n.id} applies entry ${e.index} stamped ${e.timestampMs} after one stamped ${n.lastTimestampMs}`,
        )
      }
      n.appliedIndex = e.index
      n.lastTimestampMs = e.timestampMs
      if (e.index > this.#firstAppliedIndex) this.#checkCommittedPace(e)
      n.stateHash = hashBytes(
        e.data,
        (n.stateHash ^ e.term ^ (e.type === EntryType.ConfChange ? 0x100 : 0)) >>> 0,
      )
      this.checker.applied(n.id, e.index, n.stateHash)
    }
    for (const r of rd.readStates) {
      const known = this.#reads.get(r.requestCtx)
      if (known !== undefined) {
        this.checker.readAnswered(n.id, r.index, known)
        this.#reads.delete(r.requestCtx)
      }
    }
  }

  #maybeCompact(n: SimNode): void {
    const raw = n.raw!
    const first = n.storage.firstIndex()
    // A leader wants an image for a follower that holds nothing (RaftConfig.joinBySnapshot):
    // one at the applied index, compacting nothing, as RaftHost makes it.
    const wanted = raw.takeSnapshotWanted()
    if (!wanted && n.appliedIndex - first + 1 < this.options.compactEntries) return
    if (raw.termAt(n.appliedIndex) < 0) return // a received snapshot is about to replace the log
    const meta = raw.snapshotMeta(n.appliedIndex)
    const keep = this.#prng.below(4)
    const compactIndex = wanted
      ? Math.min(n.appliedIndex, first - 1)
      : Math.max(first - 1, n.appliedIndex - keep)
    n.storage.compact({ meta, data: this.#snapshotData(n) }, compactIndex)
  }

  // ---- the network ----------------------------------------------------------------------------

  #send(m: Message): void {
    const o = this.options
    if (this.#isBlocked(m.from, m.to) || (this.#faultsOn && this.#prng.chance(o.dropRate))) {
      this.#stats.dropped++
      return
    }
    const copies = this.#faultsOn && this.#prng.chance(o.duplicateRate) ? 2 : 1
    for (let c = 0; c < copies; c++) {
      let msg = m
      if (this.#faultsOn && this.#prng.chance(o.corruptRate)) msg = this.#corrupt(m)
      const latency = 1 + this.#prng.below(this.#faultsOn ? o.latencyMsMax : Math.min(o.latencyMsMax, 5))
      this.#queue.push(this.#nowMs + latency, { kind: 'deliver', msg })
    }
  }

  /**
   * With `leaderClockPace`: every leader's group clock keeps pace with real time, not only the
   * stamps that commit (#checkCommittedPace). Each new highest reading of a leader's group
   * clock (RawNode.timelineMs, at each of its ticks: what it stamps entries with) is at most
   * (1 + stampCatchUp) x the real time since the previous highest, plus CLOCK_PACE_SLACK_MS.
   * A leader change to a replica whose clock is ahead used to jump by the offset (seeds run
   * with `steadyClock: false` still do). Only where clocks run at one rate: a replica whose
   * steady clock runs fast (the seeds' rates differ by up to half, real ones by millionths)
   * counts its predecessor's clock forward that much faster.
   */
  #checkClockPace(stampMs: number): void {
    if (stampMs <= this.#maxStamp.ms) return
    const o = this.options
    if (o.leaderClockPace && o.clockRateSpread === 0 && this.#maxStamp.ms > 0) {
      const rate = 1 + DEFAULT_RAFT_CONFIG.stampCatchUp
      const allowed = rate * (this.#nowMs - this.#maxStamp.atMs + CLOCK_PACE_SLACK_MS)
      if (stampMs - this.#maxStamp.ms > allowed) {
        this.#fail(
          `the group clock jumped from ${this.#maxStamp.ms} to ${stampMs} in ${(this.#nowMs - this.#maxStamp.atMs).toFixed(1)} ms`,
        )
      }
    }
    this.#maxStamp = { ms: stampMs, atMs: this.#nowMs }
  }

  /**
   * What leases rest on: the committed log's stamps never run ahead of real time by more than
   * the leaders' catch-up allows, whoever stamped them, with crashes too. For every applied
   * entry j and every entry i before it, `stamp(j) − stamp(i) ≤ rate × (applied(j) −
   * seen(i)) + CLOCK_PACE_SLACK_MS` (rate: 1 + stampCatchUp, times the fastest replica's
   * clock rate where they differ), where applied(j) is when any replica first applied j and
   * seen(i) when i was first handed to a replica to persist (at or after its leader stamped
   * it, so the bound is the strict side): a lease granted by entry i (its deadline its stamp
   * plus the visibility, counted by the consumer from a send before i existed) is then never
   * found expired by an entry applied before that visibility has passed in real time. Entries
   * a leader stamped and that never committed are not looked at (#checkClockPace, with
   * `leaderClockPace`, is the stricter check of every leader's readings). Linear: the bound for
   * all i < j is one running minimum of `stamp(i) − rate × seen(i)`.
   */
  #checkCommittedPace(e: Entry): void {
    this.#firstAppliedIndex = e.index
    const key = `${e.index}:${e.term}`
    const seenMs = this.#firstSeenMs.get(key) ?? this.#nowMs
    this.#firstSeenMs.delete(key)
    // Entries stamped 0 carry no clock (written before any leader read one).
    if (e.timestampMs === 0) return
    // Where clocks run at different rates, the fastest counts group time that much faster.
    const rate = (1 + DEFAULT_RAFT_CONFIG.stampCatchUp) * this.#fastestClockRate
    if (e.timestampMs - rate * this.#nowMs > this.#committedPaceMin + CLOCK_PACE_SLACK_MS) {
      const over = e.timestampMs - rate * this.#nowMs - this.#committedPaceMin - CLOCK_PACE_SLACK_MS
      this.#fail(
        `the committed group clock ran ahead: entry ${e.index} (stamped ${e.timestampMs}, applied at ${this.#nowMs.toFixed(1)} ms) is ${over.toFixed(1)} ms past the pace allowed since an earlier entry`,
      )
    }
    this.#committedPaceMin = Math.min(this.#committedPaceMin, e.timestampMs - rate * seenMs)
  }

  /** A malformed copy the core must drop (never a well-formed lie: Raft is not Byzantine-tolerant). */
  #corrupt(m: Message): Message {
    switch (this.#prng.below(4)) {
      case 0:
        return { ...m, term: -1 }
      case 1:
        return { ...m, index: Number.NaN }
      case 2:
        return { ...m, type: 99 as Message['type'] }
      default:
        return { ...m, to: 'nobody' }
    }
  }

  #isBlocked(from: ReplicaId, to: ReplicaId): boolean {
    return this.#blocked.size > 0 && (this.#blocked.get(`${from}>${to}`) ?? 0) > 0
  }

  #block(link: string): void {
    this.#blocked.set(link, (this.#blocked.get(link) ?? 0) + 1)
  }

  #unblock(link: string): void {
    const c = (this.#blocked.get(link) ?? 0) - 1
    if (c <= 0) this.#blocked.delete(link)
    else this.#blocked.set(link, c)
  }

  // ---- faults -----------------------------------------------------------------------------------

  #fault(): void {
    const o = this.options
    const p = this.#prng
    const ids = [...this.#nodes.keys()]
    if (p.chance(o.partitionRate)) {
      const links: string[] = []
      const kind = p.below(4)
      if (kind === 3) {
        // Clog one link one way (FoundationDB style).
        const a = ids[p.below(ids.length)]!
        const b = ids[p.below(ids.length)]!
        if (a !== b) links.push(`${a}>${b}`)
      } else {
        const side = new Set(ids.filter(() => p.chance(0.4)))
        if (kind === 2) {
          // Isolate one replica, the leader more often than not (leader churn with partly
          // replicated entries is where Raft's subtle rules, such as Figure 8, matter).
          side.clear()
          const leader = this.#leaderNode()
          side.add(leader !== null && p.chance(0.6) ? leader.id : ids[p.below(ids.length)]!)
        }
        const oneWay = kind === 1
        for (const a of side) {
          for (const b of ids) {
            if (side.has(b)) continue
            links.push(`${a}>${b}`)
            if (!oneWay) links.push(`${b}>${a}`)
          }
        }
      }
      for (const l of links) this.#block(l)
      this.#queue.push(this.#nowMs + 1 + p.below(o.partitionMsMax), { kind: 'heal', links })
    }
    if (p.chance(o.crashRate)) {
      // A failure detector's false alarm: a follower forgets a leader that is alive.
      const up = [...this.#nodes.values()].filter((n) => n.raw !== null)
      const n = up[p.below(Math.max(1, up.length))]
      if (n?.raw?.forgetLeader() === true) this.#pump(n)
    }
    if (p.chance(o.crashRate)) {
      const up = [...this.#nodes.values()].filter((n) => n.raw !== null)
      const down = this.#nodes.size - up.length
      if (up.length > 0 && down < Math.ceil(this.#nodes.size / 2)) {
        const leader = this.#leaderNode()
        const n = leader !== null && p.chance(o.leaderCrashBias) ? leader : up[p.below(up.length)]!
        this.#crash(n)
        // The failure detector (closed connections): most survivors forget a crashed leader.
        for (const o of this.#nodes.values()) {
          if (o.raw !== null && o.raw.status().lead === n.id && p.chance(0.8) && o.raw.forgetLeader()) {
            this.#pump(o)
          }
        }
        const downMs = p.chance(0.5) ? 1 + p.below(50) : 1 + p.below(o.downMsMax)
        this.#queue.push(this.#nowMs + downMs, { kind: 'restart', node: n })
      }
    }
  }

  /** A live replica that believes it leads (the one of the highest term when several do). */
  #leaderNode(): SimNode | null {
    let best: SimNode | null = null
    let bestTerm = -1
    for (const n of this.#nodes.values()) {
      const s = n.raw?.status()
      if (s !== undefined && s.role === Role.Leader && s.term > bestTerm) {
        best = n
        bestTerm = s.term
      }
    }
    return best
  }

  #crash(n: SimNode): void {
    this.#log(`${n.id} crash`)
    n.raw = null
    n.pending = []
    n.late = 0
    n.incarnation++
    n.storage.crash()
    this.#stats.crashes++
  }

  #stopFaults(): void {
    this.#faultsOn = false
    this.#blocked.clear()
    for (const n of this.#nodes.values()) {
      if (n.raw === null) {
        this.#start(n)
        this.#pump(n)
      }
    }
  }

  // ---- the client -------------------------------------------------------------------------------

  #client(): void {
    const p = this.#prng
    const o = this.options
    const up = [...this.#nodes.values()].filter((n) => n.raw !== null)
    if (up.length === 0) return
    const leaders = up.filter((n) => n.raw!.status().role === Role.Leader)
    const target =
      leaders.length > 0 && p.chance(0.9) ? leaders[p.below(leaders.length)]! : up[p.below(up.length)]!
    const raw = target.raw!
    try {
      const r = p.float()
      if (r < o.confChangeRate) {
        this.#changeMembership(target)
      } else if (r < o.confChangeRate + o.transferRate) {
        const voters = raw.status().conf.voters
        if (voters.length > 0) raw.transferLeader(voters[p.below(voters.length)]!)
        this.#stats.transfers++
      } else if (r < o.confChangeRate + o.transferRate + o.readRate) {
        const ctx = `r${this.#proposalSeq++}`
        this.#reads.set(ctx, this.checker.maxCommitted)
        raw.readIndex(ctx)
        this.#stats.reads++
      } else if (this.#faultsOn) {
        const count = 1 + p.below(3)
        const datas: Uint8Array[] = []
        for (let i = 0; i < count; i++) datas.push(encoder.encode(`p${this.#proposalSeq++}`))
        raw.proposeBatch(datas, this.#localClockMs(target), this.#localMonoMs(target))
      }
    } catch (e) {
      if (!(e instanceof RaftError)) throw e
    }
    this.#pump(target)
  }

  #changeMembership(leader: SimNode): void {
    const raw = leader.raw!
    const p = this.#prng
    const { voters, learners } = raw.status().conf
    const pool = Array.from({ length: this.options.nodeCount + 2 }, (_, i) => `n${i + 1}`)
    const outside = pool.filter((id) => !voters.includes(id) && !learners.includes(id))
    let change: { type: ConfChangeType; id: ReplicaId }
    // A learner is promoted once it holds something (as mq-server's, once caught up): one that
    // holds nothing takes only a snapshot listing it as a learner (RaftConfig.joinBySnapshot).
    const holding = learners.filter((id) => (raw.matchIndex(id) ?? 0) > 0)
    if (holding.length > 0 && p.chance(0.6)) {
      change = { type: ConfChangeType.AddVoter, id: holding[p.below(holding.length)]! }
    } else if (voters.length < 5 && outside.length > 0 && p.chance(0.5)) {
      change = { type: ConfChangeType.AddLearner, id: outside[p.below(outside.length)]! }
    } else if (voters.length > this.options.votersMin) {
      const id = voters[p.below(voters.length)]!
      change = { type: p.chance(0.7) ? ConfChangeType.Remove : ConfChangeType.AddLearner, id }
    } else {
      return
    }
    raw.proposeConfChange(change)
    this.#log(`${leader.id} proposes ${change.type} ${change.id}`)
    this.#stats.confChanges++
    this.#stats.fewestVoters = Math.min(this.#stats.fewestVoters, raw.status().conf.voters.length)
    const known = this.#nodes.get(change.id)
    if (known === undefined) this.#createNode(change.id, EMPTY_CONF)
    else if (
      this.options.rejoinWiped &&
      change.type === ConfChangeType.AddLearner &&
      outside.includes(change.id)
    )
      this.#wipe(known)
  }

  /**
   * `n`'s storage is gone (its removal committed: the leader refuses a change while one is
   * uncommitted) and it starts again empty under its id, as a node given its group again.
   */
  #wipe(n: SimNode): void {
    this.#log(`${n.id} wiped`)
    n.raw = null
    n.pending = []
    n.late = 0
    n.storage = new MemoryLogStorage(EMPTY_CONF)
    n.commitSeen = 0
    n.wasLeaderTerm = 0
    this.#stats.wipes++
    this.#start(n)
    this.#pump(n)
  }

  // ---- liveness ---------------------------------------------------------------------------------

  /**
   * After the faults stop: within `livenessMs` a leader that is a voter of its own
   * configuration must appear and commit a fresh proposal, and every live voter and learner
   * of that configuration must apply it (a learner that never joins fails too). Returns how
   * long it took.
   */
  #liveness(): number {
    const start = this.#nowMs
    const deadline = start + this.options.livenessMs
    const marker = encoder.encode(`liveness-${this.seed}`)
    let proposedAt = -1
    let proposer: SimNode | null = null
    let index = 0
    const done = (): boolean => {
      if (proposer === null || proposer.raw === null) return false
      const conf = proposer.raw.status().conf
      const want = this.checker.stateHashAt(index)
      if (want === undefined) return false
      return [...conf.voters, ...conf.learners].every((v) => {
        const n = this.#nodes.get(v)
        return n !== undefined && n.appliedIndex >= index
      })
    }
    while (this.#nowMs < deadline) {
      if (proposer === null || proposer.raw === null || proposer.raw.status().role !== Role.Leader) {
        const leader = [...this.#nodes.values()].find((n) => {
          const s = n.raw?.status()
          return (
            s !== undefined &&
            s.role === Role.Leader &&
            s.conf.voters.includes(n.id) &&
            s.leadTransferee === ''
          )
        })
        if (leader !== undefined) {
          try {
            index = leader.raw!.propose(marker, this.#localClockMs(leader), this.#localMonoMs(leader))
            proposer = leader
            proposedAt = this.#nowMs
            this.#pump(leader)
          } catch (e) {
            if (!(e instanceof RaftError)) throw e
          }
        }
      }
      if (this.#runUntil(Math.min(deadline, this.#nowMs + 5), done)) {
        return Math.floor(this.#nowMs - start)
      }
    }
    const statuses = [...this.#nodes.values()].map((n) => {
      const s = n.raw?.status()
      return s === undefined
        ? `${n.id}:down`
        : `${n.id}:${s.role}@${s.term} commit=${s.commit} applied=${n.appliedIndex} last=${s.lastIndex} voters=${s.conf.voters.join('/')}`
    })
    this.#fail(
      `liveness: no proposal committed within ${this.options.livenessMs}ms after faults stopped (proposed at ${proposedAt}, index ${index}); ${statuses.join('; ')}`,
    )
  }
}
