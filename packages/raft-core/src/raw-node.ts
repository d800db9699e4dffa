import type { ConfChange } from './conf-change'
import { type RaftConfig, resolveRaftConfig } from './config'
import type { Message } from './message'
import { Raft } from './raft'
import { TERM_UNKNOWN } from './raft-log'
import { type RaftStats, Role, type SoftState } from './read-state'
import type { Ready } from './ready'
import type { LogStorage } from './storage'
import type { ConfState, HardState, ReplicaId, SnapshotMeta } from './types'

export type RawNodeOptions = Partial<RaftConfig> & Pick<RaftConfig, 'id' | 'prng'>

/** A snapshot of a replica's state, for callers and checkers (never for deciding safety). */
export interface RaftStatus {
  readonly id: ReplicaId
  readonly term: number
  readonly vote: ReplicaId
  readonly lead: ReplicaId
  readonly role: Role
  readonly commit: number
  readonly applied: number
  readonly firstIndex: number
  readonly lastIndex: number
  readonly conf: ConfState
  /**
   * Index of the log entry `conf` comes from (0: no configuration entry after the snapshot,
   * whose configuration it is). `conf` takes effect when appended (dissertation §4.1), so it
   * is committed only once `commit` >= `confIndex`; until then a later leader may drop it.
   */
  readonly confIndex: number
  readonly leadTransferee: ReplicaId
}

const NO_MESSAGES: readonly Message[] = Object.freeze([])

/**
 * The caller's handle on one Raft replica (etcd's RawNode): inputs are tick(), step(),
 * propose(), proposeConfChange(), transferLeader() and readIndex(); output is a Ready, taken
 * with ready() and acknowledged with advance() once done in the order written on Ready.
 * Pure and synchronous: no I/O, no clock, no timers; same inputs, same outputs.
 */
export class RawNode {
  readonly #raft: Raft
  #prevSoft: SoftState
  #prevHard: HardState
  /** Readies handed out and not yet advanced, oldest first. */
  readonly #outstanding: Ready[] = []

  /** Throws InvalidConfigError for a bad option or a bad stored configuration. */
  constructor(options: RawNodeOptions, storage: LogStorage) {
    this.#raft = new Raft(resolveRaftConfig(options), storage)
    this.#prevSoft = { lead: this.#raft.lead, role: this.#raft.role }
    // Diff against what is stored, so a bootstrap's term and commit reach the first Ready.
    this.#prevHard = storage.initialState().hardState
  }

  /**
   * Advances logical time by one tick. `nowMs`, when given, is the wall clock entries are
   * stamped with, `monoMs` a steady (monotonic) clock read at the same moment: with it, a
   * leader continues the group clock of its predecessor (Raft.timelineMs).
   */
  tick(nowMs?: number, monoMs?: number): void {
    if (nowMs !== undefined) this.#raft.observeClock(nowMs, monoMs)
    this.#raft.tick()
  }

  /**
   * Reads the host's clocks without a tick: call it before step() with a steady clock, so
   * that what a leader's message says of its group clock is taken as of when it arrived.
   */
  observeClock(nowMs: number, monoMs?: number): void {
    this.#raft.observeClock(nowMs, monoMs)
  }

  /** The group clock this replica would stamp an entry with now, were it the leader (Raft.timelineMs). */
  timelineMs(): number {
    return this.#raft.timelineMs()
  }

  /** Feeds a message from a peer. Malformed or stale messages are dropped and counted in stats. */
  step(m: Message): void {
    this.#raft.step(m)
  }

  /** Appends one entry (see proposeBatch); returns its index. */
  propose(data: Uint8Array, nowMs?: number, monoMs?: number): number {
    if (nowMs !== undefined) this.#raft.observeClock(nowMs, monoMs)
    return this.#raft.propose([data])
  }

  /**
   * Appends entries at consecutive indexes and returns the first. The entry at an index is
   * the proposal only if it is applied with the same term (a later leader may overwrite it).
   * Throws NotLeaderError (with the leader hint), ProposalDroppedError (transfer under way,
   * too many uncommitted entries) or InvalidArgumentError (empty data).
   */
  proposeBatch(datas: readonly Uint8Array[], nowMs?: number, monoMs?: number): number {
    if (nowMs !== undefined) this.#raft.observeClock(nowMs, monoMs)
    return this.#raft.propose(datas)
  }

  /** Proposes a single-server membership change; returns its index. See Raft.proposeConfChange. */
  proposeConfChange(change: ConfChange): number {
    return this.#raft.proposeConfChange(change)
  }

  /** Starts a leadership transfer to voter `to`. */
  transferLeader(to: ReplicaId): void {
    this.#raft.transferLeader(to)
  }

  /** A follower forgets its leader (see Raft.forgetLeader); returns whether it did. */
  forgetLeader(): boolean {
    return this.#raft.forgetLeader()
  }

  /** Requests a linearizable read index; the answer arrives in Ready.readStates. */
  readIndex(requestCtx: string): void {
    this.#raft.readIndex(requestCtx)
  }

  /** Starts an election now (pre-vote first when enabled); a no-op on a leader or a non-voter. */
  campaign(): void {
    this.#raft.hup(false)
  }

  /** The term of the entry at `index`, or -1 when it is compacted or beyond the log. */
  termAt(index: number): number {
    return this.#raft.log.term(index)
  }

  /**
   * Metadata for a snapshot of the state machine taken at `index` (handed out for applying in
   * a Ready, which the caller applied — advanced or not — and not compacted). Throws
   * RangeError when the index was never handed out for applying or is already compacted.
   */
  snapshotMeta(index: number): SnapshotMeta {
    const log = this.#raft.log
    const term = log.term(index)
    if (index > log.applying || term === TERM_UNKNOWN || index < log.firstIndex() - 1) {
      throw new RangeError(`snapshotMeta(${index}): must be applied (<= ${log.applying}) and not compacted`)
    }
    // At the compaction floor the entry is gone, but the snapshot taken there knows its stamp:
    // an image made at the index just compacted to (on demand) carried none, and a replica
    // that installed it and led next stamped below the entries it covers.
    const snap = (log.unstableSnapshot ?? log.storage.snapshot()).meta
    const timestampMs =
      index >= log.firstIndex()
        ? log.slice(index, index + 1, 0)[0]!.timestampMs
        : snap.index === index
          ? snap.timestampMs
          : undefined
    return timestampMs === undefined
      ? { index, term, conf: this.#raft.confAt(index) }
      : { index, term, conf: this.#raft.confAt(index), timestampMs }
  }

  /**
   * Whether a follower needed a snapshot that the storage has no image for (snapshotsOnDemand),
   * or none listing it as a learner (a follower that holds nothing: RaftConfig.joinBySnapshot),
   * since the last call. The caller then snapshots the state machine and records
   * the image in the storage (compact without compacting further); the leader sends it at
   * its next try.
   */
  takeSnapshotWanted(): boolean {
    const wanted = this.#raft.snapshotWanted
    this.#raft.snapshotWanted = false
    return wanted
  }

  /**
   * On the leader: stops the snapshot transfer to `id` (the image it carries cannot be
   * fetched any more); the next try sends the storage's snapshot as it is then.
   */
  abortSnapshot(id: ReplicaId): void {
    this.#raft.abortSnapshot(id)
  }

  status(): RaftStatus {
    const r = this.#raft
    return {
      id: r.id,
      term: r.term,
      vote: r.vote,
      lead: r.lead,
      role: r.role,
      commit: r.log.committed,
      applied: r.log.applied,
      firstIndex: r.log.firstIndex(),
      lastIndex: r.log.lastIndex(),
      conf: r.conf,
      confIndex: r.lastConfIndex(),
      leadTransferee: r.leadTransferee,
    }
  }

  /**
   * On a leader: the highest log index known to be stored on `id` (a voter, a learner, or
   * the leader itself), from the leader's progress tracking. Undefined on a non-leader, or
   * for a non-member.
   */
  matchIndex(id: ReplicaId): number | undefined {
    const r = this.#raft
    if (r.role !== Role.Leader) return undefined
    return r.progress.get(id)?.match
  }

  /**
   * On a leader: whether `id` answered since the leader last counted its quorum (at most an
   * election timeout ago, or since it became leader); undefined on a non-leader or for a
   * non-member. False right after a count for everyone who has not answered again yet.
   */
  recentlyActive(id: ReplicaId): boolean | undefined {
    const r = this.#raft
    if (r.role !== Role.Leader) return undefined
    return r.progress.get(id)?.recentActive
  }

  get stats(): Readonly<RaftStats> {
    return this.#raft.stats
  }

  /**
   * While paused, Readies carry no committed entries (everything else goes on: entries to
   * persist, messages, hard states), so a state machine that applies asynchronously and has
   * fallen behind stops being handed more (back-pressure) without the replica falling silent:
   * it keeps appending, acknowledging and voting, and a leader keeps its heartbeats. Not
   * replicated; applying resumes where it stopped when unpaused.
   */
  pauseApplying(paused: boolean): void {
    this.#raft.log.applyPaused = paused
  }

  /** True when ready() would return work (new work only: not what outstanding Readies carry). */
  hasReady(): boolean {
    const r = this.#raft
    const log = r.log
    if (r.msgs.length > 0 || r.readStates.length > 0 || r.hasPendingSends()) return true
    if (log.hasEntriesToPersist() || log.hasNextCommitted()) return true
    if (log.unstableSnapshot !== null && !log.snapshotInProgress) return true
    if (r.lead !== this.#prevSoft.lead || r.role !== this.#prevSoft.role) return true
    const h = this.#prevHard
    return r.term !== h.term || r.vote !== h.vote || log.committed !== h.commit
  }

  /**
   * Takes the pending work; the caller must then follow the order documented on Ready. Several
   * Readies may be outstanding (pipelined persistence): each carries only work the earlier
   * ones do not, and they are advanced in the order they were taken.
   */
  ready(): Ready {
    const r = this.#raft
    r.flushSends()
    const log = r.log
    let softState: SoftState | null = null
    if (r.lead !== this.#prevSoft.lead || r.role !== this.#prevSoft.role) {
      softState = { lead: r.lead, role: r.role }
      this.#prevSoft = softState
    }
    let hardState: HardState | null = null
    const h = this.#prevHard
    if (r.term !== h.term || r.vote !== h.vote || log.committed !== h.commit) {
      hardState = r.hardState()
      this.#prevHard = hardState
    }
    const committedEntries = log.nextCommitted(r.cfg.applyBytesMax)
    if (committedEntries.length > 0) log.applying = committedEntries.at(-1)!.index
    const messages = r.msgs.length > 0 ? r.msgs : NO_MESSAGES
    r.msgs = []
    const readStates = r.readStates
    r.readStates = []
    const entries = log.entriesToPersist()
    log.persistingAll()
    let snapshot: Ready['snapshot'] = null
    if (log.unstableSnapshot !== null && !log.snapshotInProgress) {
      snapshot = log.unstableSnapshot
      log.snapshotInProgress = true
    }
    const clockOffsetMs = r.takeClockOffset()
    const rd: Ready = {
      softState,
      hardState,
      entries,
      snapshot,
      committedEntries,
      messages,
      readStates,
      clockOffsetMs,
    }
    this.#outstanding.push(rd)
    return rd
  }

  /** Readies taken and not yet advanced. */
  get outstandingReadies(): number {
    return this.#outstanding.length
  }

  /** Acknowledges that `rd`, the oldest outstanding Ready, was persisted, sent and applied (in that order). */
  advance(rd: Ready): void {
    if (rd !== this.#outstanding[0]) throw new Error('RawNode.advance: not the oldest outstanding Ready')
    this.#outstanding.shift()
    const r = this.#raft
    const log = r.log
    if (rd.snapshot !== null) log.stableSnapshotTo(rd.snapshot.meta.index)
    const last = rd.entries.at(-1)
    if (last !== undefined) log.stableTo(last.index, last.term)
    const appliedTo = rd.committedEntries.at(-1)?.index ?? rd.snapshot?.meta.index ?? 0
    if (appliedTo > log.applied) log.applied = appliedTo
    if (log.applying < log.applied) log.applying = log.applied
    r.pruneConfLog()
    if (log.unstableSnapshot === null) r.onPersisted(log.unstableOffset - 1)
  }
}
