import type { ConfChange } from '../conf-change'
import {
  HostStoppedError,
  InvalidArgumentError,
  NotLeaderError,
  OverloadedError,
  ProposalDroppedError,
  SnapshotTooLargeError,
} from '../errors'
import type { Message } from '../message'
import { type RaftStatus, RawNode, type RawNodeOptions } from '../raw-node'
import { Role } from '../read-state'
import type { Ready } from '../ready'
import type { Durability, WritableLogStorage } from '../storage'
import type { Entry, HardState, ReplicaId, Snapshot } from '../types'
import type { Clock, GroupId, StateMachine, Transport } from './ports'

/** Bounds of one group in a host. */
export interface GroupLimits {
  /** Proposals waiting to be applied; more are refused with OverloadedError. */
  readonly pendingProposalsMax: number
  /** Bytes of proposals waiting to be applied; more are refused with OverloadedError. */
  readonly inflightBytesMax: number
  /** A proposal not applied within this many ticks fails with ProposalDroppedError (outcome unknown). */
  readonly proposalTimeoutTicks: number
  /** Pending linearizable reads; more are refused with OverloadedError. */
  readonly pendingReadsMax: number
  /** Snapshot the state machine and compact once the log holds this many applied entries. */
  readonly compactEntries: number
  /**
   * Applied entries kept in the log after a compaction (lets slow followers catch up without
   * a snapshot); with snapshots on demand, at most about a tenth of `compactBytes` of them.
   */
  readonly compactKeepEntries: number
  /**
   * With snapshots on demand: compact also once the applied entries still in the log hold
   * this many bytes of data. The log after the last compaction is kept in memory (see
   * LogStorage), so large entries must bound it by size too; a compaction then costs no image.
   */
  readonly compactBytes: number
}

export const DEFAULT_GROUP_LIMITS: GroupLimits = {
  pendingProposalsMax: 10_000,
  inflightBytesMax: 64 * 1024 * 1024,
  proposalTimeoutTicks: 100,
  pendingReadsMax: 4096,
  compactEntries: 10_000,
  compactKeepEntries: 1000,
  compactBytes: 64 * 1024 * 1024,
}

export interface GroupOptions {
  readonly groupId: GroupId
  /** Raft options of this replica (id, prng, timing, flow-control bounds). */
  readonly raft: RawNodeOptions
  /** The group's log; its writes become durable at the host's Durability.flush(). */
  readonly storage: WritableLogStorage
  readonly stateMachine: StateMachine
  /**
   * For a state machine that persists its own state: the index it has already applied.
   * When absent, the state machine is restored from the storage's latest snapshot.
   */
  readonly appliedIndex?: number
  readonly limits?: Partial<GroupLimits>
  /**
   * The state machine keeps its state durably (it implements `persisted`, and the group is
   * added with its `appliedIndex`): a compaction records only the snapshot's metadata once
   * the state is durable, and an image is made only when a follower needs one (then kept in
   * the storage until the next compaction). Default false: every compaction takes an image.
   */
  readonly snapshotsOnDemand?: boolean
}

export interface HostOptions {
  readonly transport: Transport
  /** One flush makes every group's staged writes durable (group commit). */
  readonly durability: Durability
  readonly clock: Clock
  /** Called once when storage or a state machine fails; the host then refuses all work. */
  readonly onFatal?: (error: unknown) => void
  /**
   * Called when a group's snapshot was too large for its storage (SnapshotTooLargeError): the
   * log stays uncompacted until a later snapshot fits. The host goes on.
   */
  readonly onSnapshotTooLarge?: (groupId: GroupId, error: SnapshotTooLargeError) => void
  /** Bound on Ready cycles one processing run performs before yielding to the event loop. */
  readonly cyclesPerRunMax?: number
  /**
   * Cycles whose flush may be outstanding at once (default 4; 1 = each cycle waits for its
   * flush before the next starts). While one flush runs, later cycles still send leaders'
   * appends, apply what a majority made durable and stage the next writes.
   */
  readonly pipelineMax?: number
  /**
   * A group whose state machine reports this many entries handed to it and not finished
   * (StateMachine.applyBacklog) is handed no more until it is below again (default 128): its
   * replica goes on persisting, acknowledging and voting (RawNode.pauseApplying), so an apply
   * that falls behind — slow writes, a follower with less CPU — holds back its proposals'
   * answers (and, through the proposal bounds, new proposals) instead of growing without bound.
   */
  readonly applyBacklogMax?: number
  /**
   * Bytes of proposals waiting to be applied in all the host's groups together (default
   * 512 MiB); more are refused with OverloadedError. Each group has its own bound too
   * (GroupLimits.inflightBytesMax, 64 MiB by default), which alone let a host of many groups
   * hold that much per group.
   */
  readonly inflightBytesMax?: number
  /**
   * Bytes of data of the applied entries that the logs of all the host's groups with snapshots
   * on demand hold together (default 128 MiB). Each such group compacts at its own
   * `compactBytes` (64 MiB by default), which alone let a host of many groups keep that much in
   * memory per group; past this bound, each tick compacts the group holding the most (one at a
   * time, among those holding more than a fifth of their `compactBytes` whose compaction frees a
   * tenth of them or more: a compaction keeps up to a tenth for slow followers, and always the
   * last entry). Infinity: no host-wide bound.
   */
  readonly logBytesMax?: number
}

/** HostOptions.inflightBytesMax when not given. */
export const HOST_INFLIGHT_BYTES_MAX = 512 * 1024 * 1024

/** HostOptions.logBytesMax when not given. */
export const HOST_LOG_BYTES_MAX = 128 * 1024 * 1024

/** Bytes of data of `entries` (what a group's `appliedBytes` counts). */
function dataBytes(entries: readonly Entry[]): number {
  let n = 0
  for (const e of entries) n += e.data.length
  return n
}

/** What a proposal resolves to once its entry is applied. */
export interface Applied {
  readonly index: number
  readonly result: unknown
}

interface PendingProposal {
  readonly term: number
  readonly bytes: number
  readonly deadlineTick: number
  readonly resolve: (a: Applied) => void
  readonly reject: (e: unknown) => void
}

/**
 * One read index asked of Raft for every read that joined it before it was asked (while the
 * group's previous one was being confirmed: readMayAsk): one ReadIndex, one heartbeat round,
 * each read still answered with an index taken after it arrived.
 */
class PendingRead {
  index = -1
  readonly deadlineTick: number
  readonly #waiters: Array<{ resolve: (index: number) => void; reject: (e: unknown) => void }> = []

  constructor(deadlineTick: number) {
    this.deadlineTick = deadlineTick
  }

  get waiters(): number {
    return this.#waiters.length
  }

  wait(): Promise<number> {
    return new Promise<number>((resolve, reject) => this.#waiters.push({ resolve, reject }))
  }

  resolve(index: number): void {
    for (const w of this.#waiters) w.resolve(index)
  }

  reject(e: unknown): void {
    for (const w of this.#waiters) w.reject(e)
  }
}

class Group {
  readonly id: GroupId
  readonly raw: RawNode
  readonly storage: WritableLogStorage
  readonly sm: StateMachine
  readonly limits: GroupLimits
  readonly proposals = new Map<number, PendingProposal>()
  readonly reads = new Map<string, PendingRead>()
  /** Reads waiting in `reads` (several may share one entry). */
  readWaiters = 0
  /** The read context that new reads join: not yet asked of Raft (#askRead asks it). */
  openRead: string | null = null
  /** The last read context asked of Raft and not yet answered with an index, and when. */
  askedRead: { ctx: string; tick: number } | null = null
  inflightBytes = 0
  ticks = 0
  readSeq = 0
  /**
   * What this replica's read contexts start with: the group and its incarnation (set when the
   * replica is added), so that a late answer to a read of an earlier incarnation (before a
   * restart, or before the group was removed and added again) matches no read of this one.
   */
  readPrefix = ''
  /** A Ready whose writes the storage refused for now (retriable); `step` writes are staged. */
  stalled: { rd: Ready; step: number } | null = null
  /** Handing committed entries is paused for the state machine's backlog (#paceApplying). */
  applyPaused = false
  applied: number
  role: Role = Role.Follower
  lead: ReplicaId = ''
  /** The hard state last staged in storage. */
  hardState: HardState
  /** Readies taken and waiting for their flush before being sent and applied (not early). */
  late = 0
  /** After leaderGone(): campaign at this tick if still leaderless (-1: no such plan). */
  campaignAtTick = -1
  /** A state-machine snapshot is being taken (at most one at a time; see #maybeCompact). */
  snapshotting = false
  /** No snapshot before this applied index (the last one was too large for the storage). */
  compactAfter = 0
  /**
   * A Ready carrying a snapshot was taken and is not advanced yet: no other Ready of the group
   * is taken until its state machine has restored it (see #restoreLater).
   */
  restoring = false
  /** Snapshots on demand (GroupOptions.snapshotsOnDemand). */
  readonly onDemand: boolean
  /** A follower needs an image that is not made yet (see #makeImage). */
  imageWanted = false
  /** No image before this tick (the last one was too large for the storage). */
  imageAfterTick = 0
  /** Bytes of data of the applied entries still in the log (counted with snapshots on demand). */
  appliedBytes = 0
  /**
   * Of appliedBytes, those the compaction under way will free (0 when none is, or once a
   * restored snapshot has replaced the log it was for).
   */
  compactingBytes = 0

  /** Ends the read `ctx` (after it resolved or failed its waiters). */
  endRead(ctx: string, read: PendingRead): void {
    this.reads.delete(ctx)
    this.readWaiters -= read.waiters
    if (this.openRead === ctx) this.openRead = null
    if (this.askedRead?.ctx === ctx) this.askedRead = null
  }

  /** Fails every pending read with `e`. */
  failReads(e: unknown): void {
    for (const r of this.reads.values()) r.reject(e)
    this.reads.clear()
    this.readWaiters = 0
    this.openRead = null
    this.askedRead = null
  }

  constructor(o: GroupOptions) {
    this.id = o.groupId
    this.storage = o.storage
    this.sm = o.stateMachine
    this.limits = { ...DEFAULT_GROUP_LIMITS, ...o.limits }
    this.onDemand = o.snapshotsOnDemand === true
    if (this.onDemand && (o.stateMachine.persisted === undefined || o.appliedIndex === undefined)) {
      throw new InvalidArgumentError(
        `group ${o.groupId}: snapshots on demand need a state machine that implements persisted() and its appliedIndex`,
      )
    }
    const snap = o.storage.snapshot()
    let applied = o.appliedIndex ?? snap.meta.index
    if (o.appliedIndex === undefined || o.appliedIndex < snap.meta.index) {
      if (snap.meta.index > 0 && o.stateMachine.restore(snap) instanceof Promise) {
        throw new InvalidArgumentError(
          `group ${o.groupId}: the state machine restores asynchronously; pass its appliedIndex when adding the group`,
        )
      }
      applied = snap.meta.index
    }
    this.raw = new RawNode({ ...o.raft, appliedIndex: applied, snapshotsOnDemand: this.onDemand }, o.storage)
    this.hardState = o.storage.initialState().hardState
    this.applied = applied
    // A restarted replica holds its applied tail in memory again: count it (for the host's bound).
    if (this.onDemand) {
      const hi = Math.min(applied, o.storage.lastIndex()) + 1
      const lo = o.storage.firstIndex()
      if (lo < hi) this.appliedBytes = dataBytes(o.storage.entries(lo, hi, Number.MAX_SAFE_INTEGER))
    }
  }
}

/** A Ready taken in a cycle; `early` ones were sent and applied before their flush. */
interface Step {
  readonly g: Group
  readonly rd: Ready
  readonly early: boolean
}

/** A cycle whose Readies wait for its flush (null: nothing of it needed one). */
interface PipelinedCycle {
  readonly steps: readonly Step[]
  readonly flushed: Promise<void> | null
  readonly done: Deferred
}

interface Deferred {
  readonly promise: Promise<void>
  resolve(): void
}

/** The data of a snapshot that records metadata only (snapshots on demand). */
const NO_IMAGE = new Uint8Array(0)
/** Ticks before an image on demand is tried again after one was too large for the storage. */
const IMAGE_RETRY_TICKS = 100

function deferred(): Deferred {
  let resolve!: () => void
  const promise = new Promise<void>((r) => {
    resolve = r
  })
  return { promise, resolve }
}

function sameVote(a: HardState, b: HardState): boolean {
  return a.term === b.term && a.vote === b.vote
}

/**
 * How many ticks reads that joined a context wait for the one asked before it to be answered
 * before they are asked anyway (a ReadIndex lost with its message is answered by none).
 */
const READ_ASK_WAIT_TICKS = 2

/**
 * Whether `g`'s open read may be asked now: one ReadIndex in flight at a time, so the reads
 * that come while it is confirmed share the next one, as etcd's read loop does; unless the one
 * in flight has waited READ_ASK_WAIT_TICKS.
 */
function readMayAsk(g: Group): boolean {
  return g.askedRead === null || g.ticks - g.askedRead.tick >= READ_ASK_WAIT_TICKS
}

/** Whether the group leads once `rd` is applied (its soft state, when it carries one, is newer). */
function leads(g: Group, rd: Ready): boolean {
  return (rd.softState?.role ?? g.role) === Role.Leader
}

/**
 * Drives many Raft groups in one process (a multi-Raft host) through injected ports. Each
 * processing cycle follows the order written on Ready for every group at once:
 *
 *   1. take every group's Ready and stage its snapshot, entries and hard state in storage;
 *   2. one Durability.flush() for all of them (group commit), unless only commit indexes moved;
 *   3. send each group's messages (only now: they promise durable state);
 *   4. restore snapshots, apply committed entries in order, answer proposals and reads;
 *   5. advance each group, compact logs that grew past their limit.
 *
 * A leader whose Ready keeps its term and vote does 3 and 4 before the flush (its appends go
 * out while its own disk writes them; it counts its own log only once durable).
 *
 * Cycles are pipelined (up to `pipelineMax`): the next cycle starts while the previous
 * flush runs, so a leader keeps sending new appends and applying what its followers made
 * durable, and new writes gather for the next flush. Steps 3-5 of a cycle run once its flush
 * has landed, cycles oldest first; a group's Ready goes early only behind no late Ready of its
 * own, so per group everything stays in the order taken.
 *
 * A storage write refused with a retriable error (the storage's own back-pressure, such
 * as a full group-commit queue) changes nothing and is retried after the next flush; any
 * other storage or state machine error is fatal: the host stops (HostStoppedError).
 *
 * Proposals resolve when their entry is applied, or fail with NotLeaderError (retriable, with
 * the leader hint: refused by a non-leader, nothing appended), ProposalDroppedError (retriable,
 * outcome unknown: overwritten by a new leader, timed out, on a leader or after it stepped
 * down, transfer under way) or OverloadedError (back-pressure: too many proposals or bytes
 * pending).
 */
export class RaftHost {
  readonly #groups = new Map<GroupId, Group>()
  readonly #transport: Transport
  readonly #durability: Durability
  readonly #clock: Clock
  /** Group replicas added so far (part of each one's read prefix). */
  #groupsAdded = 0
  readonly #onFatal: (error: unknown) => void
  readonly #onSnapshotTooLarge: (groupId: GroupId, error: SnapshotTooLargeError) => void
  readonly #cyclesPerRunMax: number
  readonly #applyBacklogMax: number
  readonly #inflightBytesMax: number
  readonly #logBytesMax: number
  /** Bytes of proposals pending in every group (the sum of their `inflightBytes`). */
  #inflightBytes = 0
  readonly #pipelineMax: number
  /** Cycles whose flush has not landed yet, oldest first. */
  readonly #pipeline: PipelinedCycle[] = []
  /**
   * #drain() runs: set and cleared synchronously by #drain itself (a drain with nothing to
   * await ends before its promise is even stored), so a cycle never leaves a pipelined entry
   * without a drain to finish it.
   */
  #drainActive = false
  #draining: Promise<void> = Promise.resolve()
  /** Work under way outside the drain (snapshots, installs), for idle() and stop(). */
  readonly #background = new Set<Promise<void>>()
  #running: Promise<void> | null = null
  #again = false
  #fatal: unknown = null
  /** stop() was called: no more input, no new cycles. */
  #stopped = false
  /** Counters for tests and metrics. */
  readonly stats = {
    cycles: 0,
    flushes: 0,
    droppedMessages: 0,
    stalledWrites: 0,
    snapshotsTooLarge: 0,
    imagesOnDemand: 0,
    /** Times a group's applying was paused for its state machine's backlog (applyBacklogMax). */
    applyPauses: 0,
    /** Compactions started because the host's groups held more than HostOptions.logBytesMax. */
    logBoundCompactions: 0,
  }

  /** Bytes of proposals waiting to be applied in all groups (bounded by HostOptions.inflightBytesMax). */
  get inflightBytes(): number {
    return this.#inflightBytes
  }

  constructor(options: HostOptions) {
    this.#transport = options.transport
    this.#durability = options.durability
    this.#clock = options.clock
    this.#onFatal = options.onFatal ?? (() => {})
    this.#onSnapshotTooLarge = options.onSnapshotTooLarge ?? (() => {})
    this.#cyclesPerRunMax = options.cyclesPerRunMax ?? 64
    this.#applyBacklogMax = options.applyBacklogMax ?? 128
    if (!Number.isInteger(this.#applyBacklogMax) || this.#applyBacklogMax < 1) {
      throw new InvalidArgumentError(
        `applyBacklogMax must be a positive integer, got ${options.applyBacklogMax}`,
      )
    }
    this.#inflightBytesMax = options.inflightBytesMax ?? HOST_INFLIGHT_BYTES_MAX
    this.#logBytesMax = options.logBytesMax ?? HOST_LOG_BYTES_MAX
    if (
      !(this.#logBytesMax === Infinity || (Number.isSafeInteger(this.#logBytesMax) && this.#logBytesMax >= 1))
    ) {
      throw new InvalidArgumentError(
        `logBytesMax must be a positive integer or Infinity, got ${this.#logBytesMax}`,
      )
    }
    if (!Number.isSafeInteger(this.#inflightBytesMax) || this.#inflightBytesMax < 1) {
      throw new InvalidArgumentError(
        `inflightBytesMax must be a positive integer, got ${options.inflightBytesMax}`,
      )
    }
    this.#pipelineMax = options.pipelineMax ?? 4
    if (!Number.isInteger(this.#pipelineMax) || this.#pipelineMax < 1) {
      throw new InvalidArgumentError(`pipelineMax must be a positive integer, got ${options.pipelineMax}`)
    }
  }

  /** Adds a group replica. Throws InvalidArgumentError for a duplicate id, InvalidConfigError for a bad config. */
  addGroup(options: GroupOptions): void {
    this.#checkAlive()
    if (this.#groups.has(options.groupId)) {
      throw new InvalidArgumentError(`group ${options.groupId} is already hosted here`)
    }
    const group = new Group(options)
    group.readPrefix = `${options.groupId}:${this.#clock.nowMs()}.${++this.#groupsAdded}`
    this.#groups.set(options.groupId, group)
    this.#schedule()
  }

  /** Stops hosting a group; its pending proposals and reads fail with ProposalDroppedError. */
  removeGroup(groupId: GroupId): void {
    const g = this.#groups.get(groupId)
    if (g === undefined) return
    this.#groups.delete(groupId)
    this.#inflightBytes -= g.inflightBytes
    const e = new ProposalDroppedError(`group ${groupId} was removed from this host`)
    for (const p of g.proposals.values()) p.reject(e)
    // Settled here: a restore of the group still running would settle them again, and take
    // their bytes off the host's count a second time.
    g.proposals.clear()
    g.inflightBytes = 0
    g.failReads(e)
  }

  groupIds(): GroupId[] {
    return [...this.#groups.keys()]
  }

  status(groupId: GroupId): RaftStatus {
    return this.#group(groupId).raw.status()
  }

  /**
   * Bytes of data of the applied entries `groupId`'s log holds, as counted towards
   * HostOptions.logBytesMax (0 without snapshots on demand: those groups are not counted).
   */
  appliedLogBytes(groupId: GroupId): number {
    return this.#group(groupId).appliedBytes
  }

  /** On the leader of `groupId`: how far `id`'s log is known to match (RawNode.matchIndex). */
  matchIndex(groupId: GroupId, id: ReplicaId): number | undefined {
    return this.#group(groupId).raw.matchIndex(id)
  }

  /**
   * The time an entry proposed to `groupId` now would be stamped with, were this replica its
   * leader (RawNode.timelineMs), from the clocks as read now: what a leader compares the
   * group's deadlines with (its wall clock may be ahead of the group's clock). The wall clock
   * for a group not hosted here (removed while a caller still held it): never throws.
   */
  groupClockMs(groupId: GroupId): number {
    const now = this.#clock.nowMs()
    const g = this.#groups.get(groupId)
    if (g === undefined) return now
    g.raw.observeClock(now, this.#clock.monoMs?.())
    return g.raw.timelineMs()
  }

  /** On the leader of `groupId`: whether `id` answered lately (RawNode.recentlyActive). */
  recentlyActive(groupId: GroupId, id: ReplicaId): boolean | undefined {
    return this.#group(groupId).raw.recentlyActive(id)
  }

  /** Advances every group by one tick (the owner calls this on a timer) and fails expired requests. */
  tick(): void {
    if (this.#stopped) return
    this.#checkAlive()
    const now = this.#clock.nowMs()
    const mono = this.#clock.monoMs?.()
    for (const g of this.#groups.values()) {
      g.raw.tick(now, mono)
      g.ticks++
      if (g.campaignAtTick >= 0 && g.ticks >= g.campaignAtTick) {
        g.campaignAtTick = -1
        const s = g.raw.status()
        if (s.lead === '' && s.role === Role.Follower) g.raw.campaign()
      }
      this.#expire(g)
    }
    this.#boundLogBytes()
    this.#schedule()
  }

  /**
   * Past HostOptions.logBytesMax of applied entries in the logs of all groups with snapshots
   * on demand, compacts the one holding the most (not snapshotting or restoring) whose
   * compaction frees a tenth of its compactBytes or more. Checked once a tick: a group that
   * takes no more entries (idle, or applying slowly) is compacted too, which its own threshold
   * would never do. The bytes a compaction under way will free are not counted: under a slow
   * `persisted()`, the next ticks would otherwise compact more groups than the bound needs.
   */
  #boundLogBytes(): void {
    if (this.#logBytesMax === Infinity) return
    let total = 0
    const candidates: Group[] = []
    for (const g of this.#groups.values()) {
      if (!g.onDemand) continue
      total += g.appliedBytes - g.compactingBytes
      if (!g.snapshotting && !g.restoring && g.appliedBytes > g.limits.compactBytes / 5) candidates.push(g)
    }
    if (total <= this.#logBytesMax) return
    // The largest first; one that would free little (its tail is what a compaction keeps:
    // one large entry, say) is passed over, or it would be compacted again every tick.
    candidates.sort((a, b) => b.appliedBytes - a.appliedBytes)
    for (const g of candidates) {
      if (this.#maybeCompact(g, true)) {
        this.stats.logBoundCompactions++
        return
      }
    }
  }

  /** Feeds a message received from the transport. Messages for unknown groups are dropped and counted. */
  receive(groupId: GroupId, message: Message): void {
    if (this.#fatal !== null || this.#stopped) return
    const g = this.#groups.get(groupId)
    if (g === undefined) {
      this.stats.droppedMessages++
      return
    }
    if (this.#clock.monoMs !== undefined) g.raw.observeClock(this.#clock.nowMs(), this.#clock.monoMs())
    g.raw.step(message)
    this.#schedule()
  }

  /** Proposes `data`; resolves with the state machine's result once the entry is applied here. */
  propose(groupId: GroupId, data: Uint8Array): Promise<Applied> {
    try {
      this.#checkAlive()
      const g = this.#group(groupId)
      if (g.proposals.size >= g.limits.pendingProposalsMax) {
        throw new OverloadedError(
          `group ${groupId} has ${g.proposals.size} proposals pending (limit ${g.limits.pendingProposalsMax}); retry after some are applied`,
        )
      }
      if (g.inflightBytes + data.length > g.limits.inflightBytesMax) {
        throw new OverloadedError(
          `group ${groupId} has ${g.inflightBytes} bytes of proposals pending (limit ${g.limits.inflightBytesMax}); retry after some are applied`,
        )
      }
      if (this.#inflightBytes + data.length > this.#inflightBytesMax) {
        throw new OverloadedError(
          `this node has ${this.#inflightBytes} bytes of proposals pending in all its groups (limit ${this.#inflightBytesMax}); retry after some are applied`,
        )
      }
      const index = g.raw.propose(data, this.#clock.nowMs(), this.#clock.monoMs?.())
      const term = g.raw.termAt(index)
      this.#forget(g, index)
      const promise = new Promise<Applied>((resolve, reject) => {
        g.proposals.set(index, {
          term,
          bytes: data.length,
          deadlineTick: g.ticks + g.limits.proposalTimeoutTicks,
          resolve,
          reject,
        })
      })
      g.inflightBytes += data.length
      this.#inflightBytes += data.length
      this.#schedule()
      return promise
    } catch (e) {
      return Promise.reject(e)
    }
  }

  /** Proposes a membership change; resolves with its index once applied here. */
  proposeConfChange(groupId: GroupId, change: ConfChange): Promise<Applied> {
    try {
      this.#checkAlive()
      const g = this.#group(groupId)
      const index = g.raw.proposeConfChange(change)
      const term = g.raw.termAt(index)
      this.#forget(g, index)
      const promise = new Promise<Applied>((resolve, reject) => {
        g.proposals.set(index, {
          term,
          bytes: 0,
          deadlineTick: g.ticks + g.limits.proposalTimeoutTicks,
          resolve,
          reject,
        })
      })
      this.#schedule()
      return promise
    } catch (e) {
      return Promise.reject(e)
    }
  }

  /**
   * A linearizable read barrier (Raft §8): resolves with a read index once this replica has
   * applied it, so a read of the local state machine then is linearizable. Works on followers
   * too (the leader is asked). Fails with NotLeaderError when no leader is known.
   */
  readIndex(groupId: GroupId): Promise<number> {
    try {
      this.#checkAlive()
      const g = this.#group(groupId)
      if (g.readWaiters >= g.limits.pendingReadsMax) {
        throw new OverloadedError(`group ${groupId} has ${g.readWaiters} reads pending; retry shortly`)
      }
      let read = g.openRead === null ? undefined : g.reads.get(g.openRead)
      if (read === undefined) {
        const ctx = `${g.readPrefix}:${++g.readSeq}`
        read = new PendingRead(g.ticks + g.limits.proposalTimeoutTicks)
        g.reads.set(ctx, read)
        g.openRead = ctx
      }
      g.readWaiters++
      const promise = read.wait()
      this.#schedule()
      return promise
    } catch (e) {
      return Promise.reject(e)
    }
  }

  /** Starts a leadership transfer of `groupId` to `to`. Throws NotLeaderError on a non-leader. */
  transferLeader(groupId: GroupId, to: ReplicaId): void {
    this.#checkAlive()
    this.#group(groupId).raw.transferLeader(to)
    this.#schedule()
  }

  /**
   * A failure detector's verdict: replica `leaderId` is gone (say, its process's connections
   * closed). Every group here that follows it forgets it (no leader lease any more, so its
   * pre-votes are granted at once) and campaigns a few ticks later unless a leader is known by
   * then: the next tick for the first of the remaining voters by id, two ticks apart for the
   * others, so that the followers, which all learn of the death together, do not split the vote.
   * Returns the ids of the groups that forgot it.
   */
  leaderGone(leaderId: ReplicaId): GroupId[] {
    if (this.#fatal !== null || leaderId === '') return []
    const forgot: GroupId[] = []
    for (const g of this.#groups.values()) {
      const s = g.raw.status()
      if (s.lead !== leaderId || !g.raw.forgetLeader()) continue
      const rank = s.conf.voters
        .filter((v) => v !== leaderId)
        .sort()
        .indexOf(s.id)
      if (rank >= 0) g.campaignAtTick = g.ticks + 1 + 2 * rank
      forgot.push(g.id)
    }
    if (forgot.length > 0) this.#schedule()
    return forgot
  }

  /** Makes this replica campaign now (tests, bootstrapping a known leader). */
  campaign(groupId: GroupId): void {
    this.#group(groupId).raw.campaign()
    this.#schedule()
  }

  /**
   * Stops the host before its storage closes: from now on received messages and ticks are
   * ignored, no new cycle starts, and new proposals and reads fail with HostStoppedError.
   * Resolves once the cycles under way and their flushes are done; what is still pending then
   * fails with ProposalDroppedError (outcome unknown: retry). Idempotent.
   */
  async stop(): Promise<void> {
    this.#stopped = true
    await this.idle().catch(() => {})
    const e = new ProposalDroppedError('the host stopped; the outcome is unknown, retry')
    for (const g of this.#groups.values()) {
      for (const p of g.proposals.values()) p.reject(e)
      g.failReads(e)
      g.proposals.clear()
      g.inflightBytes = 0
    }
    this.#inflightBytes = 0
  }

  /**
   * Fail-stop for a failure found outside the host (a state machine's own asynchronous write,
   * say): from now on the host takes no part in any group, exactly as after a failure of its
   * own storage — received messages and ticks are ignored (it neither votes, nor acknowledges
   * appends, nor campaigns when a leader hands over to it), pending proposals and reads fail
   * with `error`, later calls with HostStoppedError, and `onFatal` is called (once, with the
   * first failure). Idempotent.
   */
  halt(error: unknown): void {
    this.#die(error)
  }

  /**
   * Snapshots on demand: the image the storage holds for `groupId` cannot be fetched any more
   * (the state machine dropped it: expired, or taken before a restart). Makes a new one, as
   * for a follower that needs an image when the storage has none, and stops the transfer of
   * the old one to `follower` (when given), which gets the new one at the leader's next try.
   */
  refreshImage(groupId: GroupId, follower?: ReplicaId): void {
    this.#checkAlive()
    const g = this.#group(groupId)
    if (!g.onDemand) return
    if (follower !== undefined) g.raw.abortSnapshot(follower)
    g.imageWanted = true
    this.#schedule()
  }

  /** Resolves once no group has ready work left (after the cycles already scheduled). */
  async idle(): Promise<void> {
    while (this.#running !== null || this.#drainActive || this.#background.size > 0) {
      if (this.#running !== null) await this.#running
      if (this.#drainActive) await this.#draining
      if (this.#background.size > 0) await Promise.all(this.#background)
    }
    if (this.#fatal !== null) throw this.#fatal
  }

  #group(groupId: GroupId): Group {
    const g = this.#groups.get(groupId)
    if (g === undefined) throw new InvalidArgumentError(`group ${groupId} is not hosted here`)
    return g
  }

  #checkAlive(): void {
    if (this.#stopped) throw new HostStoppedError('the host is stopping')
    if (this.#fatal !== null) {
      throw new HostStoppedError('the host stopped after a storage or state machine failure; restart it', {
        cause: this.#fatal,
      })
    }
  }

  /**
   * `groupId`'s state machine finished work (its applyBacklog went down): a group paused for
   * its backlog resumes now once below applyBacklogMax, not at the next tick (a leader whose
   * clients wait for its answers would idle until then). Cheap when not paused.
   */
  backlogDown(groupId: GroupId): void {
    const g = this.#groups.get(groupId)
    if (g?.applyPaused && (g.sm.applyBacklog?.() ?? 0) < this.#applyBacklogMax) this.#schedule()
  }

  #schedule(): void {
    if (this.#fatal !== null || this.#stopped) return
    if (this.#running !== null) {
      this.#again = true
      return
    }
    this.#running = this.#run().finally(() => {
      this.#running = null
      if (this.#again && this.#fatal === null) {
        this.#again = false
        this.#schedule()
      }
    })
  }

  async #run(): Promise<void> {
    // Let the caller's synchronous burst (many proposals, many received messages) land first,
    // so one cycle carries all of it.
    await Promise.resolve()
    try {
      for (let cycle = 0; cycle < this.#cyclesPerRunMax; cycle++) {
        this.#again = false
        // Bounded pipeline: past its depth, the oldest cycle's flush must land first.
        while (this.#pipeline.length >= this.#pipelineMax) await this.#pipeline[0]!.done.promise
        const worked = this.#cycle()
        if (worked === false) return
        if (worked !== true) await worked
      }
      this.#again = true // more work remains: continue in a fresh run (yields to I/O between runs)
    } catch (e) {
      this.#die(e)
    }
  }

  /**
   * One cycle over every group: takes each group's new Ready and stages its writes; a leader
   * that may go early sends and applies at once; the rest wait in the pipeline for this
   * cycle's flush (see #drain). Returns false when no group had work, true when it did, or a
   * promise to await first when the storage refused some writes for now (stalled groups retry
   * once the flush that drains its staging queue has landed).
   */
  #cycle(): boolean | Promise<void> {
    // Halted (halt(), or a fatal error) while this run was scheduled or between its cycles: no
    // Ready is taken, written or sent any more.
    if (this.#fatal !== null) return false
    const steps: Step[] = []
    let mustFlush = false
    let stalled = 0
    for (const g of this.#groups.values()) {
      if (g.openRead !== null && readMayAsk(g)) this.#askRead(g, g.openRead)
      if (g.raw.takeSnapshotWanted() || g.imageWanted) this.#makeImage(g)
      if (g.restoring) continue
      if (g.stalled === null) {
        this.#paceApplying(g)
        if (!g.raw.hasReady()) continue
        g.stalled = { rd: g.raw.ready(), step: 0 }
      }
      const rd = g.stalled.rd
      // Judged before staging, which records the hard state as the last one staged.
      const votes = rd.hardState !== null && !sameVote(rd.hardState, g.hardState)
      if (!this.#stage(g)) {
        stalled++
        continue
      }
      g.stalled = null
      // A hard state that only moves the commit index need not be durable before anything
      // (the commit index is re-learned from the leader after a restart): it rides along with
      // the next flush. Entries, snapshots, terms and votes must be durable first.
      if (rd.snapshot !== null || rd.entries.length > 0 || votes) mustFlush = true
      // Early only behind no late Ready of its own: sends and applies stay in order per group.
      const early = g.late === 0 && !votes && rd.snapshot === null && leads(g, rd)
      if (!early) g.late++
      if (rd.snapshot !== null) g.restoring = true
      steps.push({ g, rd, early })
    }
    if (steps.length === 0 && stalled === 0) return false
    this.stats.cycles++
    // A leader that keeps its term sends and applies before its own flush (dissertation
    // §10.2.1): it counts its own log toward commitment only once persisted (at advance), so
    // what it applies is already durable on a majority, and its appends promise nothing
    // about its own disk.
    for (const s of steps) {
      if (!s.early) continue
      if (s.rd.messages.length > 0) this.#transport.send(s.g.id, s.rd.messages)
      this.#apply(s.g, s.rd) // synchronous: an early Ready carries no snapshot
    }
    let flushed: Promise<void> | null = null
    if (mustFlush || stalled > 0) {
      // A flush also drains the storage's staging queue, so stalled groups can stage next cycle.
      flushed = this.#durability.flush()
      flushed.catch(() => {}) // observed by #drain, in order
      this.stats.flushes++
    }
    const pending: PipelinedCycle = { steps, flushed, done: deferred() }
    this.#pipeline.push(pending)
    if (!this.#drainActive) this.#draining = this.#drain()
    return stalled > 0 ? pending.done.promise : true
  }

  /**
   * Pauses handing `g`'s committed entries to its state machine while its backlog is at
   * applyBacklogMax, resumes below it (checked at every cycle, and ticks run one).
   */
  #paceApplying(g: Group): void {
    if (g.sm.applyBacklog === undefined) return
    const paused = g.sm.applyBacklog() >= this.#applyBacklogMax
    if (paused && !g.applyPaused) this.stats.applyPauses++
    g.applyPaused = paused
    g.raw.pauseApplying(paused)
  }

  /**
   * Finishes pipelined cycles oldest first, each once its flush has landed: sends the late
   * Readies' messages (they promise durable state), applies them, advances every Ready of
   * the cycle and compacts. A flush never lands before an earlier one, so per group the
   * Readies are persisted, sent, applied and advanced in the order they were taken.
   */
  async #drain(): Promise<void> {
    this.#drainActive = true
    try {
      while (this.#pipeline.length > 0 && this.#fatal === null) {
        const p = this.#pipeline[0]!
        if (p.flushed !== null) await p.flushed
        // Halted (or failed elsewhere) while the flush ran: nothing more is sent or applied.
        if (this.#fatal !== null) break
        // The replica itself, not its id: a group removed and added again while the flush
        // ran is a new replica (a new state machine, a new log), and the removed one's Ready
        // must neither reach it nor go out in its name.
        for (const { g, rd, early } of p.steps) {
          if (!early && rd.messages.length > 0 && this.#groups.get(g.id) === g)
            this.#transport.send(g.id, rd.messages)
        }
        for (const { g, rd, early } of p.steps) {
          if (!early) g.late--
          if (this.#groups.get(g.id) !== g) continue
          if (rd.snapshot !== null) {
            this.#restoreLater(g, rd)
            continue
          }
          if (!early) this.#apply(g, rd) // synchronous without a snapshot
          g.raw.advance(rd)
          this.#maybeCompact(g)
        }
        this.#pipeline.shift()
        p.done.resolve()
        this.#schedule() // advancing may have made work (a leader's own log now counts)
      }
    } catch (e) {
      this.#die(e)
    } finally {
      this.#drainActive = false
      for (const p of this.#pipeline.splice(0)) p.done.resolve()
    }
  }

  /**
   * Stages the outstanding Ready's writes in order (snapshot, entries, hard state). Returns
   * false when the storage refuses one with a retriable error (its back-pressure, e.g. a full
   * group commit): that write changed nothing, and staging resumes from it next cycle.
   */
  #stage(g: Group): boolean {
    const st = g.stalled!
    const rd = st.rd
    try {
      if (st.step === 0) {
        if (rd.snapshot !== null) g.storage.applySnapshot(rd.snapshot)
        st.step = 1
      }
      if (st.step === 1) {
        if (rd.entries.length > 0) g.storage.append(rd.entries)
        st.step = 2
      }
      if (st.step === 2) {
        if (rd.hardState !== null) {
          g.storage.setHardState(rd.hardState)
          g.hardState = rd.hardState
        }
        st.step = 3
      }
      if (st.step === 3) {
        if (rd.clockOffsetMs !== null) g.storage.setClockOffset(rd.clockOffsetMs)
        st.step = 4
      }
      return true
    } catch (e) {
      if (storageBusy(e)) {
        this.stats.stalledWrites++
        return false
      }
      throw e
    }
  }

  /**
   * Installs the snapshot of `rd` into the state machine, then applies the rest of `rd` and
   * advances it, without holding the drain: restoring a large state takes seconds, and the
   * node's other groups go on meanwhile (heartbeats, appends, applies). The group takes no
   * other Ready until this one is advanced (`restoring`), so its Readies stay in order.
   */
  #restoreLater(g: Group, rd: Ready): void {
    this.#inBackground(
      (this.#apply(g, rd) ?? Promise.resolve())
        .then(() => {
          if (this.#fatal !== null || this.#groups.get(g.id) !== g) return
          g.raw.advance(rd)
          this.#maybeCompact(g)
        })
        .finally(() => {
          g.restoring = false
          this.#schedule()
        }),
    )
  }

  /** Runs `work` outside the drain: idle() waits for it; a failure is fatal. */
  #inBackground(work: Promise<void>): void {
    const task: Promise<void> = work
      .catch((e: unknown) => this.#die(e))
      .finally(() => this.#background.delete(task))
    this.#background.add(task)
  }

  /** Applies `rd`; returns a promise only when it restores a snapshot. */
  #apply(g: Group, rd: Ready): Promise<void> | undefined {
    if (rd.softState !== null) {
      const leadWas = g.lead
      g.role = rd.softState.role
      g.lead = rd.softState.lead
      if (g.lead !== '' && g.lead !== leadWas) this.#reissueReads(g)
    }
    if (rd.snapshot !== null) return this.#restore(g, rd.snapshot).then(() => this.#applyCommitted(g, rd))
    this.#applyCommitted(g, rd)
    return undefined
  }

  /**
   * Asks Raft for the read index of the reads that joined `ctx` (one ReadIndex, one heartbeat
   * round for all of them); reads that come after it start a new context.
   */
  #askRead(g: Group, ctx: string): void {
    g.openRead = null
    const read = g.reads.get(ctx)
    if (read === undefined) return
    try {
      g.raw.readIndex(ctx)
      g.askedRead = { ctx, tick: g.ticks }
    } catch (e) {
      g.endRead(ctx, read)
      read.reject(e)
    }
  }

  /**
   * A new leader is known: reads still waiting for their read index asked the old one (a
   * follower forwards ReadIndex to the leader it knows; a leader that stepped down drops the
   * reads it was confirming), which may be gone or silent. Each asks again, of the new leader,
   * under the same context, instead of waiting out its deadline; a read index that still
   * comes from the old leader is as good (it confirmed its leadership after the read began).
   */
  #reissueReads(g: Group): void {
    let asked = false
    for (const [ctx, r] of g.reads) {
      if (r.index >= 0 || ctx === g.openRead) continue // the open read is asked at the next cycle
      try {
        g.raw.readIndex(ctx)
        asked = true
      } catch (e) {
        g.endRead(ctx, r)
        r.reject(e)
      }
    }
    if (asked) this.#schedule()
  }

  async #restore(g: Group, snapshot: Snapshot): Promise<void> {
    await g.sm.restore(snapshot)
    g.applied = snapshot.meta.index
    g.appliedBytes = 0
    g.compactingBytes = 0
    // Proposals at or below the snapshot were decided elsewhere; their outcome here is unknown.
    for (const [index, p] of g.proposals) {
      if (index > g.applied) continue
      this.#settle(
        g,
        index,
        p,
        new ProposalDroppedError('replaced by a snapshot; outcome unknown, retry idempotently'),
      )
    }
  }

  /** Applies the committed entries in order, answers their proposals, then the reads now applied. */
  #applyCommitted(g: Group, rd: Ready): void {
    if (rd.committedEntries.length > 0) {
      const results = g.sm.apply(rd.committedEntries)
      for (let i = 0; i < rd.committedEntries.length; i++) {
        const e = rd.committedEntries[i]!
        const p = g.proposals.get(e.index)
        if (p === undefined) continue
        if (p.term === e.term) this.#settle(g, e.index, p, null, { index: e.index, result: results[i] })
        else
          this.#settle(
            g,
            e.index,
            p,
            new ProposalDroppedError('the entry was overwritten by a new leader; retry'),
          )
      }
      g.applied = rd.committedEntries.at(-1)!.index
      if (g.onDemand) g.appliedBytes += dataBytes(rd.committedEntries)
    }
    for (const rs of rd.readStates) {
      const r = g.reads.get(rs.requestCtx)
      if (r !== undefined) r.index = rs.index
      if (g.askedRead?.ctx === rs.requestCtx) {
        g.askedRead = null
        if (g.openRead !== null) this.#schedule() // the reads that waited for it ask now
      }
    }
    for (const [ctx, r] of g.reads) {
      if (r.index >= 0 && r.index <= g.applied) {
        g.endRead(ctx, r)
        r.resolve(r.index)
      }
    }
  }

  /** A new entry took `index`: an older proposal there was overwritten (a new term truncated it). */
  #forget(g: Group, index: number): void {
    const old = g.proposals.get(index)
    if (old !== undefined)
      this.#settle(
        g,
        index,
        old,
        new ProposalDroppedError('the entry was overwritten by a new leader; retry'),
      )
  }

  #settle(g: Group, index: number, p: PendingProposal, error: unknown, value?: Applied): void {
    g.proposals.delete(index)
    g.inflightBytes -= p.bytes
    this.#inflightBytes -= p.bytes
    if (error !== null) p.reject(error)
    else p.resolve(value!)
  }

  /**
   * Fails proposals and reads past their deadline (pending entries are index-ordered, so is
   * time). A proposal is pending only once its entry is in this replica's log, and others may
   * have stored it: its outcome is unknown, also on a replica that no longer leads (a new
   * leader may have committed it; NotLeaderError would say it was not stored, and a client
   * that cannot tell a repeat would store it twice).
   */
  #expire(g: Group): void {
    for (const [index, p] of g.proposals) {
      if (p.deadlineTick > g.ticks) break
      const where =
        g.role === Role.Leader ? '' : ` (this replica no longer leads${g.lead ? `; ${g.lead} does` : ''})`
      this.#settle(
        g,
        index,
        p,
        new ProposalDroppedError(
          `not applied within ${g.limits.proposalTimeoutTicks} ticks${where}; outcome unknown`,
        ),
      )
    }
    for (const [ctx, r] of g.reads) {
      if (r.deadlineTick > g.ticks) continue
      g.endRead(ctx, r)
      r.reject(
        g.role === Role.Leader
          ? new ProposalDroppedError('read not confirmed in time; retry')
          : new NotLeaderError(g.lead),
      )
    }
  }

  /**
   * Past the group's threshold, snapshots its state machine at the applied index and compacts
   * the log behind it once the image is ready. The snapshot is asked for here, so that it is
   * the state of exactly this index, but not awaited: a state machine with a large state takes
   * seconds to read, and awaiting it here held every group's cycles on this node (no
   * heartbeats, no appends: measured, 41 leaderships won in a 60 s load with snapshots every
   * 2,000 entries). The log grows meanwhile; a snapshot installed meanwhile makes the
   * compaction a no-op (the storage keeps the newer one). `now`: past the host's bound
   * (#boundLogBytes), whatever the group's own thresholds. Returns whether it started one.
   */
  #maybeCompact(g: Group, now = false): boolean {
    if (g.snapshotting || g.applied < g.compactAfter) return false
    const first = g.storage.firstIndex()
    const byBytes = now || (g.onDemand && g.appliedBytes >= g.limits.compactBytes)
    if (g.applied - first + 1 < g.limits.compactEntries && !byBytes) return false
    if (g.raw.termAt(g.applied) < 0) return false // a received snapshot is about to replace the log
    const kept = this.#keptAfterCompaction(g, first)
    // For the host's bound, only a compaction that frees a tenth of compactBytes or more.
    if (now && g.appliedBytes - kept.bytes < g.limits.compactBytes / 10) return false
    const meta = g.raw.snapshotMeta(g.applied)
    const compactIndex = g.applied - kept.entries
    g.compactingBytes = g.appliedBytes - kept.bytes
    g.snapshotting = true
    // On demand: metadata only, once the state it stands for is durable in the state machine.
    const image = g.onDemand ? g.sm.persisted!().then(() => NO_IMAGE) : Promise.resolve(g.sm.snapshot())
    this.#inBackground(
      image.then((data) => {
        g.snapshotting = false
        const freed = g.compactingBytes
        g.compactingBytes = 0
        if (this.#fatal !== null || this.#stopped || this.#groups.get(g.id) !== g) return
        const outcome = this.#record(g, { meta, data }, compactIndex)
        // Less the compacted entries' bytes (entries applied meanwhile stay counted; none if a
        // snapshot restored meanwhile replaced the log and reset the count).
        if (outcome === 'done') g.appliedBytes = Math.max(0, g.appliedBytes - freed)
        // Too large: the log stays as it is, and a later snapshot may fit.
        else if (outcome === 'too large') g.compactAfter = meta.index + g.limits.compactEntries
        // Busy: compact after a later cycle.
      }),
    )
    return true
  }

  /**
   * How many of the applied entries a compaction keeps: the last `compactKeepEntries` of them
   * (those still in the log); with snapshots on demand, fewer when they hold more than a
   * tenth of `compactBytes`.
   */
  #keptAfterCompaction(g: Group, first: number): { entries: number; bytes: number } {
    const lo = Math.max(first, g.applied - g.limits.compactKeepEntries + 1)
    if (lo > g.applied) return { entries: 0, bytes: 0 }
    if (!g.onDemand) return { entries: g.applied - lo + 1, bytes: 0 }
    const tail = g.storage.entries(lo, g.applied + 1, Number.MAX_SAFE_INTEGER)
    const budget = g.limits.compactBytes / 10
    let bytes = 0
    let entries = 0
    for (let i = tail.length - 1; i >= 0; i--) {
      const size = tail[i]!.data.length
      if (entries > 0 && bytes + size > budget) break
      bytes += size
      entries++
    }
    return { entries, bytes }
  }

  /**
   * A follower needs a snapshot and the storage holds only metadata (snapshots on demand), or
   * none that lists the follower, which holds nothing (RaftConfig.joinBySnapshot, any group).
   * Takes an image at the applied index and records it in the storage without compacting
   * further; the leader sends it at its next try. One at a time per group; an image too large
   * for the storage is not tried again for IMAGE_RETRY_TICKS.
   */
  #makeImage(g: Group): void {
    g.imageWanted = true
    if (g.snapshotting || g.restoring || g.ticks < g.imageAfterTick) return
    if (g.raw.termAt(g.applied) < 0) return
    g.imageWanted = false
    g.snapshotting = true
    const meta = g.raw.snapshotMeta(g.applied)
    this.#inBackground(
      Promise.resolve(g.sm.snapshot()).then((data) => {
        g.snapshotting = false
        if (this.#fatal !== null || this.#stopped || this.#groups.get(g.id) !== g) return
        const outcome = this.#record(g, { meta, data }, Math.min(meta.index, g.storage.firstIndex() - 1))
        if (outcome === 'too large') {
          g.imageAfterTick = g.ticks + IMAGE_RETRY_TICKS
          return
        }
        if (outcome === 'done') {
          this.stats.imagesOnDemand++
          // Asked for again meanwhile (each try of the leader's asks): this image answers them.
          g.imageWanted = false
          g.raw.takeSnapshotWanted()
        } else g.imageWanted = true // the storage is busy: again after a later cycle
        this.#schedule()
      }),
    )
  }

  /**
   * Records `snapshot` in the group's storage, compacting the log up to `compactIndex`.
   * 'too large' (SnapshotTooLargeError) is reported and not fatal: every replica would stop
   * at the same index, and again after each restart. 'busy' is the storage's retriable
   * back-pressure. Any other error throws.
   */
  #record(g: Group, snapshot: Snapshot, compactIndex: number): 'done' | 'too large' | 'busy' {
    try {
      g.storage.compact(snapshot, compactIndex)
      return 'done'
    } catch (e) {
      if (e instanceof SnapshotTooLargeError) {
        this.stats.snapshotsTooLarge++
        this.#onSnapshotTooLarge(g.id, e)
        return 'too large'
      }
      if (!storageBusy(e)) throw e
      this.stats.stalledWrites++
      return 'busy'
    }
  }

  #die(e: unknown): void {
    if (this.#fatal !== null) return
    this.#fatal = e
    for (const g of this.#groups.values()) {
      for (const p of g.proposals.values()) p.reject(e)
      g.failReads(e)
      g.proposals.clear()
    }
    this.#onFatal(e)
  }
}

/**
 * Whether a storage write was refused for now (its back-pressure: a full staging queue): any
 * error that says it is retriable — raft-core's own, or the storage package's (kv-storage's
 * OverloadedError is not a RaftError). The write is tried again after the next flush.
 */
function storageBusy(e: unknown): boolean {
  return typeof e === 'object' && e !== null && (e as { retriable?: unknown }).retriable === true
}
