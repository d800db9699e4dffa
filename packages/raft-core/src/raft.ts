import {
  applyConfChange,
  type ConfChange,
  ConfChangeType,
  decodeConfChange,
  encodeConfChange,
  isEmptyConf,
  validateConfState,
} from './conf-change'
import type { RaftConfig } from './config'
import { InvalidArgumentError, InvalidConfigError, NotLeaderError, ProposalDroppedError } from './errors'
import { type Message, MessageType, malformedReason, message } from './message'
import { Progress, ProgressState } from './progress'
import { RaftLog, TERM_UNKNOWN } from './raft-log'
import { type RaftStats, type ReadState, Role } from './read-state'
import type { LogStorage } from './storage'
import {
  type ConfState,
  type Entry,
  EntryType,
  type HardState,
  type ReplicaId,
  type Snapshot,
  type SnapshotMeta,
} from './types'

/** Context value on a Vote that a TimeoutNow forced: it bypasses the leader lease (§3.10). */
const CAMPAIGN_TRANSFER = 1
/** Join nonces are drawn from [1, JOIN_NONCE_MAX]. */
const JOIN_NONCE_MAX = 0x7fff_ffff
const EMPTY_DATA = new Uint8Array(0)

interface PendingRead {
  readonly seq: number
  readonly index: number
  readonly requestCtx: string
  readonly from: ReplicaId
}

interface SnapshotReceipt {
  readonly meta: SnapshotMeta
  readonly totalBytes: number
  readonly chunks: Uint8Array[]
  bytes: number
}

/**
 * One Raft replica as a pure state machine (etcd's raft.go). Inputs are method calls; the
 * outputs it accumulates (messages, read states, log and state changes) are collected by
 * RawNode into a Ready. One step function per role, swapped by becomeX() (Raft Fig. 2).
 *
 * Invariants:
 * - term only grows; vote is reset exactly when term changes;
 * - at most one leader per term (each replica votes once per term, §5.2);
 * - a leader never overwrites or deletes its own entries (§5.3, Leader Append-Only);
 * - a leader commits only entries of its own term by counting replicas (§5.4.2);
 * - the configuration in force is the latest one in the log (dissertation §4.1).
 */
export class Raft {
  readonly id: ReplicaId
  readonly cfg: RaftConfig
  readonly log: RaftLog
  term = 0
  vote: ReplicaId = ''
  lead: ReplicaId = ''
  role: Role = Role.Follower
  conf: ConfState
  readonly progress = new Map<ReplicaId, Progress>()
  msgs: Message[] = []
  /** A follower needs an image the storage does not hold (snapshotsOnDemand, joinBySnapshot). */
  snapshotWanted = false
  readStates: ReadState[] = []
  leadTransferee: ReplicaId = ''
  electionElapsed = 0
  heartbeatElapsed = 0
  readonly stats: RaftStats = {
    droppedMalformed: 0,
    droppedStale: 0,
    ignoredInLease: 0,
    droppedOutbound: 0,
    refusedHoldingNothing: 0,
  }

  /** Conf at firstIndex()-1 (the snapshot's), and the changes in the log after it, ascending. */
  #baseConf: ConfState
  #confLog: { index: number; conf: ConfState }[] = []
  readonly #votes = new Map<ReplicaId, boolean>()
  #randomizedElectionTimeout = 0
  #pendingReads: PendingRead[] = []
  /** ReadIndex requests waiting for the first commit of this leader's term (§8). */
  #waitingReads: { requestCtx: string; from: ReplicaId }[] = []
  #readSeq = 0
  readonly #readAcks = new Map<ReplicaId, number>()
  #clockMs = 0
  /** The host's steady (monotonic) clock as last read; NaN while the host gives none. */
  #monoMs = Number.NaN
  #lastStampMs = 0
  /**
   * Our steady clock when the log's last entry reached it (our own proposal, a leader's App, a
   * snapshot); NaN when none did since this replica started (see #electionClock).
   */
  #lastAppendMonoMs = Number.NaN
  /** #lastAppendMonoMs was set from our estimate at restart (observeClock), no entry since. */
  #boundFromEstimate = false
  /**
   * The group clock the current leader last told us (Message.leaderTimeMs) and our steady
   * clock when we heard it; null when it told us none. A leader that steps down keeps its own.
   */
  #anchor: ClockReading | null = null
  /** #anchor came from votes (#noteVoterClock), not from a leader's message or our own leadership. */
  #anchorFromVotes = false
  /** While leading with a steady clock: where its group clock started (see timelineMs). */
  #leaderBase: LeaderClock | null = null
  /**
   * The group clock minus our wall clock as last handed to the host to record
   * (takeClockOffset), or as restored from storage at start; undefined while there is none.
   */
  #recordedOffsetMs: number | undefined
  #appendPending = false
  #commitPending = false
  #snapshotReceipt: SnapshotReceipt | null = null
  /**
   * While this replica holds nothing (RaftConfig.joinBySnapshot): a random number it sends its
   * leaders, which the chunks of a snapshot sent for it must carry (a chunk sent for an earlier
   * replica under its id, delayed or duplicated, would not); 0 until drawn.
   */
  #joinNonce = 0
  #stepRole: (m: Message) => void = this.#stepFollower
  #tickRole: () => void = this.#tickElection

  /**
   * Restores a replica from `storage`. Throws InvalidConfigError when the stored
   * configuration is invalid, or when a fresh replica (empty log) is not a member of a
   * non-empty configuration. An empty configuration is allowed: the replica waits to be
   * added by a leader and never campaigns.
   */
  constructor(cfg: RaftConfig, storage: LogStorage) {
    this.id = cfg.id
    this.cfg = cfg
    const { hardState, conf, clockOffsetMs } = storage.initialState()
    this.#recordedOffsetMs = clockOffsetMs
    const snap = storage.snapshot()
    this.#baseConf = snap.meta.index > 0 ? snap.meta.conf : conf
    const fresh = storage.lastIndex() === 0
    if (!isEmptyConf(this.#baseConf)) validateConfState(this.#baseConf, fresh ? this.id : undefined)
    if (hardState.commit > storage.lastIndex()) {
      throw new InvalidConfigError(
        `stored commit ${hardState.commit} is beyond the last stored index ${storage.lastIndex()}: the log storage lost entries`,
      )
    }
    const applied = Math.max(cfg.appliedIndex, snap.meta.index)
    if (applied > Math.max(hardState.commit, snap.meta.index)) {
      throw new InvalidConfigError(`appliedIndex ${applied} is beyond the stored commit ${hardState.commit}`)
    }
    this.log = new RaftLog(storage, Math.max(hardState.commit, snap.meta.index), applied)
    let term = hardState.term
    if (fresh && snap.meta.index === 0 && !isEmptyConf(this.#baseConf)) {
      // Bootstrap (as etcd does): write the initial membership into the log as committed
      // configuration entries of term 1, identical on every founding replica, so that a
      // replica added later learns the whole membership from the log itself.
      const bootstrap = bootstrapEntries(this.#baseConf)
      this.#baseConf = EMPTY_CONF
      this.log.truncateAndAppend(bootstrap)
      for (const e of bootstrap) this.#noteAppended(e)
      this.log.commitTo(bootstrap.length)
      if (term < 1) term = 1
    }
    this.conf = this.#baseConf
    this.#lastStampMs = snap.meta.timestampMs ?? 0
    // Replay the configuration changes still in the log: the latest one is in force.
    const last = storage.lastIndex()
    for (let lo = storage.firstIndex(); lo <= last; ) {
      const batch = storage.entries(lo, last + 1, 1 << 24)
      for (const e of batch) this.#noteAppended(e)
      lo += batch.length
    }
    this.#setConf(this.#confLog.at(-1)?.conf ?? this.#baseConf)
    this.term = term
    this.vote = hardState.vote
    this.becomeFollower(this.term, '')
  }

  hardState(): HardState {
    return { term: this.term, vote: this.vote, commit: this.log.committed }
  }

  /**
   * Whether this replica holds nothing yet — no entry, no snapshot, hence no membership (a
   * founder's log starts with its founding membership) — and waits for its first state in a
   * snapshot (RaftConfig.joinBySnapshot).
   */
  #holdsNothing(): boolean {
    return this.cfg.joinBySnapshot && this.log.lastIndex() === 0
  }

  /**
   * True when this replica may campaign: a voter with no snapshot waiting to be installed. Also
   * a voter of the committed configuration whose removal (or demotion) is in its log, not yet
   * committed: a leader that removed itself and lost its lead before the change committed
   * (check-quorum, a higher term) holds the only copy of it, so the others' logs are behind
   * its own and it refused them its vote; of two voters, neither could ever be elected (an
   * audit). Elected, it commits the change under the new configuration, then steps down.
   */
  promotable(): boolean {
    if (this.log.unstableSnapshot !== null) return false
    if (this.conf.voters.includes(this.id)) return true
    return (
      this.lastConfIndex() > this.log.committed && this.confAt(this.log.committed).voters.includes(this.id)
    )
  }

  /**
   * Sets the host's latest readings of its wall clock and (when it has one) of its steady
   * clock, from which the group clock is made (timelineMs). Stamps never go backwards anyway
   * (max with the last stamp in the log); the reading is not kept as a high-water mark, so a
   * clock that stepped forward for a moment and was put right does not leave its peak behind
   * (a follower then stamped it hours later, when it led: every lease expired and messages
   * past a TTL of hours were deleted; clock audit).
   */
  observeClock(nowMs: number, monoMs?: number): void {
    this.#clockMs = nowMs
    if (monoMs === undefined) return
    const first = Number.isNaN(this.#monoMs)
    this.#monoMs = monoMs
    if (first && Number.isNaN(this.#lastAppendMonoMs) && this.#lastStampMs > 0) {
      // Restarted with a log: its last entry reached us before the restart, when the group
      // clock was at most our estimate now (wall clock plus recorded offset), so #electionClock
      // bounds the clock by that counted forward. Without it, a restarted replica that heard a
      // leader whose entries never reached it, on a clock ahead of the committed one, continued
      // that clock once elected (simulator, seeds 1171 and 1745 of a crash mix: 300-ms jumps).
      const est = this.#estimateMs()
      if (est > 0) {
        this.#lastAppendMonoMs = monoMs - Math.max(0, est - this.#lastStampMs)
        this.#boundFromEstimate = true
      }
    }
  }

  /**
   * A leader of this term told us its clock while our whole log is committed: its log holds
   * ours, so that clock is no leader's whose entries never reached us. A bound set from our
   * estimate at restart (observeClock) rises to it: an estimate below the truth (the wall clock
   * went back while the node was down) would otherwise hold the clock, once we lead, below the
   * group's until an entry reaches us (an idle group: every lease ran that much longer).
   */
  #leaderVouches(): void {
    if (!this.#boundFromEstimate || this.log.committed < this.log.lastIndex()) return
    if (this.#anchor === null || this.#anchorFromVotes) return
    const known = this.#knownClockMs()
    if (known > this.#logBoundMs()) this.#lastAppendMonoMs = this.#monoMs - (known - this.#lastStampMs)
  }

  /**
   * The group clock: what this replica stamps an entry with when it leads. With a steady
   * clock, a leader continues the clock its predecessor told it (or, when it heard none, its
   * own wall clock) at the pace of its steady clock, plus what it has caught up with its wall
   * clock while behind it: at most stampCatchUp of the steady time since its election, never
   * past the wall clock, never given back. So the group's time runs at 1 to 1 + stampCatchUp
   * times real time whoever leads: a node whose clock is ahead, or a wall clock stepped forward,
   * does not move it at once (leases granted before would end early), and a node whose clock is
   * behind does not stop it (leases, delays and TTLs would wait, and a follower counting the
   * clock forward would get ahead of it). Never below the last stamp in the log. Without a
   * steady clock: the wall clock as last read, or the last stamp when that is later.
   */
  timelineMs(): number {
    const b = this.#leaderBase
    if (b === null) return Math.max(this.#clockMs, this.#lastStampMs)
    const elapsed = this.#monoMs - b.monoMs
    const steady = b.timeMs + elapsed
    const behind = this.#clockMs - steady
    if (behind > b.caughtUpMs) b.caughtUpMs = Math.min(behind, elapsed * this.cfg.stampCatchUp)
    return Math.max(Math.floor(steady + b.caughtUpMs), this.#lastStampMs)
  }

  /**
   * The group clock as this replica knows it now: #anchor counted forward, or, when it heard
   * none since it restarted, its estimate (#estimateMs); 0 when it knows none.
   */
  #knownClockMs(): number {
    const a = this.#anchor
    if (a === null) return this.#estimateMs()
    if (Number.isNaN(this.#monoMs)) return 0
    return Math.floor(a.timeMs + (this.#monoMs - a.monoMs))
  }

  /**
   * The group clock as a replica that heard none since it restarted takes it to be: its wall
   * clock plus the offset it recorded before (takeClockOffset), 0 when none was recorded. As
   * right as that wall clock kept pace while the node was down, whatever the skew between
   * nodes (the offset takes it out).
   */
  #estimateMs(): number {
    const rec = this.#recordedOffsetMs
    if (rec === undefined || Number.isNaN(this.#monoMs) || this.#clockMs <= 0) return 0
    return Math.max(1, this.#clockMs + rec)
  }

  /**
   * The group clock minus the wall clock to record, or null when the recorded one is still
   * close enough: at most CLOCK_OFFSET_ABOVE_MS above what this replica knows now (a recorded
   * offset above the truth would start a restarted replica's clock ahead: leases granted
   * before would end early) and at most CLOCK_OFFSET_BELOW_MS below it (below only delays
   * deadlines). Nothing while it knows no clock of its own (it heard none since it restarted),
   * nor while all it knows is what voters told it: their clocks are guesses, of which an
   * election takes the lowest with this replica's own estimate (#electionClock); recorded, the
   * first grant's clock replaced that estimate before the election looked at it, and a grant
   * from a replica whose recorded offset was older than a lowering of the clock started the
   * group clock 65 ms ahead (simulator, seed 1040 of the crash sweep, until 2026-12-04).
   */
  takeClockOffset(): number | null {
    if (Number.isNaN(this.#monoMs) || this.#clockMs <= 0) return null
    let known: number
    if (this.#leaderBase !== null) known = this.timelineMs()
    else if (this.#anchor !== null && !this.#anchorFromVotes) {
      known = this.#knownClockMs()
      // No further than our log vouches for (as #electionClock): a leader whose entries never
      // reached us may run a clock ahead of the committed one, and recorded, a restart carried
      // it into our estimate (simulator, seed 4830 of a crash mix: a 70-ms jump once elected).
      known = Math.min(known, this.#logBoundMs())
    } else return null
    const off = Math.round(known - this.#clockMs)
    const rec = this.#recordedOffsetMs
    if (rec !== undefined && off >= rec - CLOCK_OFFSET_ABOVE_MS && off <= rec + CLOCK_OFFSET_BELOW_MS) {
      return null
    }
    this.#recordedOffsetMs = off
    return off
  }

  /**
   * A voter's grant carried its group clock (#knownClockMs). A candidate that heard a leader
   * keeps what it heard: it holds every committed entry, so it heard their leader after each
   * was made, and counting forward from there never ends a lease early (a voter may have heard
   * that leader before, while the leader's clock stood still, and count ahead of it). One that
   * heard none (it restarted: its own wall clock would start the clock) takes the lowest a voter
   * tells it.
   */
  #noteVoterClock(timeMs: number): void {
    if (Number.isNaN(this.#monoMs)) return
    if (this.#anchor !== null && !(this.#anchorFromVotes && timeMs < this.#knownClockMs())) return
    this.#anchor = { timeMs, monoMs: this.#monoMs }
    this.#anchorFromVotes = true
  }

  /** What a leader's App, Heartbeat or Snap of this term told us of its group clock (see #anchor). */
  #noteLeaderTime(m: Message): void {
    if (this.role === Role.Leader) return
    this.#anchor =
      m.leaderTimeMs > 0 && !Number.isNaN(this.#monoMs)
        ? { timeMs: m.leaderTimeMs, monoMs: this.#monoMs }
        : null
    this.#anchorFromVotes = false
  }

  // ---- role transitions -------------------------------------------------------------------

  becomeFollower(term: number, lead: ReplicaId): void {
    if (this.role === Role.Leader && this.#leaderBase !== null) {
      // A leader that steps down continues from its own clock if it leads again unheard.
      this.#anchor = { timeMs: this.timelineMs(), monoMs: this.#monoMs }
      this.#anchorFromVotes = false
    }
    this.#reset(term)
    this.lead = lead
    this.role = Role.Follower
    this.#stepRole = this.#stepFollower
    this.#tickRole = this.#tickElection
  }

  #becomePreCandidate(): void {
    if (this.role === Role.Leader) throw new Error('invariant: a leader cannot become a pre-candidate')
    // Pre-vote changes neither term nor vote (dissertation §9.6).
    this.#votes.clear()
    this.lead = ''
    this.role = Role.PreCandidate
    this.#stepRole = this.#stepCandidate
    this.#tickRole = this.#tickElection
  }

  #becomeCandidate(): void {
    if (this.role === Role.Leader) throw new Error('invariant: a leader cannot become a candidate')
    this.#reset(this.term + 1)
    this.vote = this.id
    this.role = Role.Candidate
    this.#stepRole = this.#stepCandidate
    this.#tickRole = this.#tickElection
  }

  #becomeLeader(): void {
    if (this.role === Role.Follower) throw new Error('invariant: a follower cannot become leader directly')
    this.#reset(this.term)
    this.lead = this.id
    this.role = Role.Leader
    this.#leaderBase = this.#electionClock()
    this.#stepRole = this.#stepLeader
    this.#tickRole = this.#tickHeartbeat
    for (const pr of this.progress.values()) pr.recentActive = true
    const self = this.progress.get(this.id)
    if (self !== undefined) {
      self.match = this.log.unstableOffset - 1
      self.becomeReplicate()
    }
    // The no-op of the new term: committing it commits everything before it (§5.4.2, §8).
    this.#appendEntries([EMPTY_DATA], EntryType.Normal)
  }

  /** Where a new leader's group clock starts (see timelineMs); null without a steady clock. */
  #electionClock(): LeaderClock | null {
    if (Number.isNaN(this.#monoMs)) return null
    const known = this.#knownClockMs()
    let timeMs = known > 0 ? known : Math.max(this.#clockMs, this.#lastStampMs)
    if (this.#anchorFromVotes) {
      // Voters' clocks and our own estimate are all guesses: the lowest ends no lease early.
      const own = this.#estimateMs()
      if (own > 0 && own < timeMs) timeMs = own
    }
    // No further than the log's last stamp counted forward from when that entry reached us:
    // it was stamped before, so that never runs ahead of real time. The clock we heard may:
    // a leader whose entries never reached us (our log conflicted with its), leading on its
    // own clock 450 ms ahead of the one our log's uncommitted entries carry, whose clock we
    // would continue while committing those entries (simulator seed 30,804: a 600-ms jump).
    const bound = this.#logBoundMs()
    if (bound < timeMs) timeMs = Math.floor(bound)
    return { timeMs, monoMs: this.#monoMs, caughtUpMs: 0 }
  }

  /**
   * The log's last stamp counted forward from when that entry reached us (#electionClock):
   * what our log vouches for; Infinity when unknown (no stamp, or none arrived since start).
   */
  #logBoundMs(): number {
    if (this.#lastStampMs <= 0 || Number.isNaN(this.#lastAppendMonoMs)) return Number.POSITIVE_INFINITY
    return this.#lastStampMs + Math.max(0, this.#monoMs - this.#lastAppendMonoMs)
  }

  #reset(term: number): void {
    this.#leaderBase = null
    if (this.term !== term) {
      this.term = term
      this.vote = ''
    }
    this.lead = ''
    this.electionElapsed = 0
    this.heartbeatElapsed = 0
    this.#randomizedElectionTimeout = this.cfg.electionTicks + this.cfg.prng.below(this.cfg.electionTicks)
    this.leadTransferee = ''
    this.#votes.clear()
    this.#pendingReads = []
    this.#waitingReads = []
    this.#readAcks.clear()
    this.#appendPending = false
    this.#commitPending = false
    this.#snapshotReceipt = null
    const next = this.log.lastIndex() + 1
    for (const pr of this.progress.values()) {
      pr.match = 0
      pr.next = next
      pr.becomeProbe()
      pr.next = next
      pr.recentActive = false
      pr.joinNonce = 0
    }
  }

  // ---- time ---------------------------------------------------------------------------------

  tick(): void {
    this.#tickRole()
  }

  #tickElection(): void {
    this.electionElapsed++
    if (this.promotable() && this.electionElapsed >= this.#randomizedElectionTimeout) {
      this.electionElapsed = 0
      this.hup(false)
    }
  }

  #tickHeartbeat(): void {
    this.heartbeatElapsed++
    this.electionElapsed++
    if (this.electionElapsed >= this.cfg.electionTicks) {
      this.electionElapsed = 0
      // Check-quorum (dissertation §6.2): a leader that has not heard from a quorum within an
      // election timeout steps down, so a partitioned leader stops serving.
      if (this.cfg.checkQuorum && !this.#quorumActive()) {
        this.becomeFollower(this.term, '')
        return
      }
      // A transfer that did not finish within an election timeout is abandoned (§3.10).
      this.leadTransferee = ''
    }
    if (this.heartbeatElapsed >= this.cfg.heartbeatTicks) {
      this.heartbeatElapsed = 0
      this.#bcastHeartbeat()
    }
  }

  #quorumActive(): boolean {
    let active = 0
    for (const v of this.conf.voters) {
      if (v === this.id) active++
      else if (this.progress.get(v)?.recentActive === true) active++
    }
    for (const [id, pr] of this.progress) if (id !== this.id) pr.recentActive = false
    return active >= quorumSize(this.conf.voters.length)
  }

  // ---- elections (§5.2) ---------------------------------------------------------------------

  /** Starts an election (with a pre-vote round when enabled, unless `transfer` forces it). */
  hup(transfer: boolean): void {
    if (this.role === Role.Leader || !this.promotable()) return
    if (this.cfg.preVote && !transfer) this.#campaign(true, false)
    else this.#campaign(false, transfer)
  }

  #campaign(pre: boolean, transfer: boolean): void {
    let voteTerm: number
    if (pre) {
      this.#becomePreCandidate()
      voteTerm = this.term + 1
    } else {
      this.#becomeCandidate()
      voteTerm = this.term
    }
    const result = this.#poll(this.id, true)
    if (result === 'won') {
      if (pre) this.#campaign(false, transfer)
      else this.#becomeLeader()
      return
    }
    const lastIndex = this.log.lastIndex()
    const lastTerm = this.log.lastTerm()
    for (const v of this.conf.voters) {
      if (v === this.id) continue
      this.#send(
        message({
          type: pre ? MessageType.PreVote : MessageType.Vote,
          from: this.id,
          to: v,
          term: voteTerm,
          index: lastIndex,
          logTerm: lastTerm,
          context: transfer ? CAMPAIGN_TRANSFER : 0,
        }),
      )
    }
  }

  #poll(from: ReplicaId, granted: boolean): 'won' | 'lost' | 'pending' {
    if (!this.#votes.has(from)) this.#votes.set(from, granted)
    let yes = 0
    let no = 0
    for (const v of this.conf.voters) {
      const g = this.#votes.get(v)
      if (g === true) yes++
      else if (g === false) no++
    }
    const q = quorumSize(this.conf.voters.length)
    if (yes >= q) return 'won'
    if (no > this.conf.voters.length - q) return 'lost'
    return 'pending'
  }

  // ---- the message entry point ------------------------------------------------------------------

  /**
   * Handles one message from a peer. A malformed message is dropped and counted; a message
   * from an older term is dropped and counted (answered when that helps a stale leader or
   * pre-candidate catch up). Never throws for a bad message.
   */
  step(m: Message): void {
    if (malformedReason(m, this.id) !== '') {
      this.stats.droppedMalformed++
      return
    }
    if (m.term > this.term) {
      if (m.type === MessageType.Vote || m.type === MessageType.PreVote) {
        // Leader lease (dissertation §6, §4.2.3): while we hear from a leader, ignore vote
        // requests, so a removed or partitioned replica cannot depose it. TimeoutNow overrides.
        const inLease =
          this.cfg.checkQuorum && this.lead !== '' && this.electionElapsed < this.cfg.electionTicks
        if (m.context !== CAMPAIGN_TRANSFER && inLease) {
          this.stats.ignoredInLease++
          return
        }
      }
      if (m.type === MessageType.PreVote) {
        // A pre-vote request never changes our term.
      } else if (m.type === MessageType.PreVoteResp && !m.reject) {
        // A granted pre-vote carries the term we would campaign in; the campaign bumps it.
      } else if (
        m.type === MessageType.App ||
        m.type === MessageType.Heartbeat ||
        m.type === MessageType.Snap
      ) {
        this.becomeFollower(m.term, m.from)
      } else {
        // §5.1: a higher term makes us a follower. §5.2: only a leader's message or a granted
        // vote restarts the election timer, so a replica with a stale log that keeps
        // campaigning (a fast clock, no pre-vote) cannot hold off the up-to-date ones forever.
        const elapsed = this.electionElapsed
        this.becomeFollower(m.term, '')
        this.electionElapsed = elapsed
      }
    } else if (m.term < this.term) {
      this.stats.droppedStale++
      if (
        (this.cfg.checkQuorum || this.cfg.preVote) &&
        (m.type === MessageType.Heartbeat || m.type === MessageType.App)
      ) {
        // Tell a stale leader our term so it steps down (it may be the one cut off).
        this.#answerApp(m.from, {})
      } else if (m.type === MessageType.PreVote) {
        this.#send(
          message({
            type: MessageType.PreVoteResp,
            from: this.id,
            to: m.from,
            term: this.term,
            reject: true,
          }),
        )
      }
      return
    }

    if (m.type === MessageType.Vote || m.type === MessageType.PreVote) {
      this.#handleVoteRequest(m)
      return
    }
    if (m.type === MessageType.App || m.type === MessageType.Heartbeat || m.type === MessageType.Snap) {
      this.#noteLeaderTime(m)
    }
    this.#stepRole(m)
  }

  #handleVoteRequest(m: Message): void {
    const pre = m.type === MessageType.PreVote
    // §5.2: at most one vote per term, first come first served; §5.4.1: only for a log at
    // least as up to date as ours.
    const canVote =
      this.vote === m.from || (this.vote === '' && this.lead === '') || (pre && m.term > this.term)
    const respType = pre ? MessageType.PreVoteResp : MessageType.VoteResp
    // A replica that holds nothing may be one created again under a removed replica's id, and
    // the candidate one cut off since before the removal, which counts it a voter still.
    const empty = this.#holdsNothing()
    if (empty) this.stats.refusedHoldingNothing++
    if (canVote && !empty && this.log.isUpToDate(m.index, m.logTerm)) {
      // With the group clock as we know it: a candidate that heard none (it restarted) starts there.
      this.#send(
        message({
          type: respType,
          from: this.id,
          to: m.from,
          term: m.term,
          leaderTimeMs: this.#knownClockMs(),
        }),
      )
      if (!pre) {
        this.electionElapsed = 0
        this.vote = m.from
      }
    } else {
      this.#send(message({ type: respType, from: this.id, to: m.from, term: this.term, reject: true }))
    }
  }

  #stepFollower(m: Message): void {
    switch (m.type) {
      case MessageType.App:
        this.electionElapsed = 0
        this.lead = m.from
        this.#handleAppend(m)
        return
      case MessageType.Heartbeat:
        this.electionElapsed = 0
        this.lead = m.from
        this.#handleHeartbeat(m)
        return
      case MessageType.Snap:
        this.electionElapsed = 0
        this.lead = m.from
        this.#handleSnapshotChunk(m)
        return
      case MessageType.TimeoutNow:
        // Leadership transfer: campaign at once, bypassing pre-vote and the lease (§3.10).
        if (this.promotable()) this.hup(true)
        else this.stats.droppedStale++
        return
      case MessageType.ReadIndexResp:
        this.readStates.push({ index: m.index, requestCtx: m.requestCtx })
        return
      default:
        this.stats.droppedStale++
    }
  }

  #stepCandidate(m: Message): void {
    const respType = this.role === Role.PreCandidate ? MessageType.PreVoteResp : MessageType.VoteResp
    switch (m.type) {
      case MessageType.App:
        this.becomeFollower(m.term, m.from) // §5.2: another candidate won this term.
        this.#handleAppend(m)
        return
      case MessageType.Heartbeat:
        this.becomeFollower(m.term, m.from)
        this.#handleHeartbeat(m)
        return
      case MessageType.Snap:
        this.becomeFollower(m.term, m.from)
        this.#handleSnapshotChunk(m)
        return
      case MessageType.ReadIndexResp:
        this.readStates.push({ index: m.index, requestCtx: m.requestCtx })
        return
      case respType: {
        if (!m.reject && m.leaderTimeMs > 0) this.#noteVoterClock(m.leaderTimeMs)
        const result = this.#poll(m.from, !m.reject)
        if (result === 'won') {
          if (this.role === Role.PreCandidate) this.#campaign(false, false)
          else this.#becomeLeader()
        } else if (result === 'lost') {
          this.becomeFollower(this.term, '')
        }
        return
      }
      default:
        this.stats.droppedStale++
    }
  }

  #stepLeader(m: Message): void {
    const pr = this.progress.get(m.from)
    switch (m.type) {
      case MessageType.AppResp:
        if (pr === undefined) break
        pr.recentActive = true
        this.#handleAppendResponse(m, pr)
        return
      case MessageType.HeartbeatResp:
        if (pr === undefined) break
        if (m.context > this.#readSeq) {
          // An acknowledgement of a read this leader never asked for: it would confirm reads
          // no quorum did (an audit's stale read). Malformed.
          this.stats.droppedMalformed++
          return
        }
        pr.recentActive = true
        pr.probeSent = false
        if (pr.state === ProgressState.Replicate && pr.inflights.full()) pr.inflights.freeFirstOne()
        if (pr.state === ProgressState.Snapshot) this.#sendSnapshotChunk(m.from, pr)
        else if (pr.match < this.log.lastIndex()) this.#sendAppend(m.from, pr, true)
        if (m.context > 0) this.#ackRead(m.from, m.context)
        return
      case MessageType.SnapResp:
        if (pr === undefined || pr.state !== ProgressState.Snapshot || pr.snapshot === null) break
        if (m.index !== pr.snapshot.meta.index) break
        pr.recentActive = true
        if (m.reject) {
          // Refused (too large for it): try again at a later heartbeat's reply, not at once.
          pr.abortSnapshot()
          return
        }
        // The offset the follower holds. Unchanged: the answer to a duplicate (a heartbeat's
        // resend) of the chunk in flight, which goes on by itself; sending again would add one
        // more chunk in flight for good (until 2026-12-04: one more per heartbeat).
        if (m.context === pr.snapshotOffset || m.context > pr.snapshot.data.length) return
        pr.snapshotOffset = m.context // forward, or back when the follower lost its receipt
        if (pr.snapshotOffset < pr.snapshot.data.length) this.#sendSnapshotChunk(m.from, pr)
        return
      case MessageType.ReadIndex:
        if (pr === undefined) break
        this.#handleReadIndex(m.requestCtx, m.from)
        return
      default:
        break
    }
    this.stats.droppedStale++
  }

  // ---- replication, follower side (§5.3) ------------------------------------------------------

  #handleAppend(m: Message): void {
    const log = this.log
    if (this.#holdsNothing()) {
      // Its first state comes only from a snapshot (RaftConfig.joinBySnapshot): the leader is
      // told so (a rejection whose context is this replica's join nonce), and sends one.
      this.#tellHoldingNothing(m.from, m.index)
      return
    }
    if (m.index < log.committed) {
      this.#answerApp(m.from, { index: log.committed })
      return
    }
    if (log.matchTerm(m.index, m.logTerm)) {
      const lastNew = m.index + m.entries.length
      const conflict = log.findConflict(m.entries)
      if (conflict > 0) {
        const fresh = m.entries.slice(conflict - (m.index + 1))
        const truncatedFrom = log.truncateAndAppend(fresh)
        this.#dropConfsFrom(truncatedFrom)
        for (const e of fresh) this.#noteAppended(e)
        // A leader's stamps never decrease along its log: its last entry's is the log's last.
        this.#logEndsWith(fresh.at(-1)?.timestampMs ?? 0)
        this.#setConf(this.#confLog.at(-1)?.conf ?? this.#baseConf)
      }
      // §5.3: commit up to min(leaderCommit, index of last new entry).
      log.commitTo(Math.min(m.commit, lastNew))
      this.#leaderVouches()
      this.#answerApp(m.from, { index: lastNew })
      return
    }
    // Reject with a hint: the largest index <= m.index whose term <= m.logTerm, so the leader
    // can skip a whole term of mismatching entries in one round trip.
    const hintIndex = log.findConflictByTerm(Math.min(m.index, log.lastIndex()), m.logTerm)
    const hintTerm = log.term(hintIndex)
    this.#answerApp(m.from, {
      index: m.index,
      reject: true,
      rejectHint: hintIndex,
      logTerm: hintTerm === TERM_UNKNOWN ? 0 : hintTerm,
    })
  }

  /**
   * Refuses `to`'s App at `index` (or its snapshot, 0) while holding nothing: a rejection whose
   * context is this replica's join nonce (drawn at the first), which the leader's snapshot for
   * it must carry (RaftConfig.joinBySnapshot).
   */
  #tellHoldingNothing(to: ReplicaId, index: number): void {
    this.stats.refusedHoldingNothing++
    if (this.#joinNonce === 0) this.#joinNonce = 1 + this.cfg.prng.below(JOIN_NONCE_MAX)
    this.#answerApp(to, { index, reject: true, context: this.#joinNonce })
  }

  /** Answers an App (or a Snap, once it is over) from `to`: an AppResp of this term. */
  #answerApp(to: ReplicaId, fields: Partial<Message>): void {
    this.#send(message({ ...fields, type: MessageType.AppResp, from: this.id, to, term: this.term }))
  }

  #handleHeartbeat(m: Message): void {
    // The leader caps commit at our match, so it never exceeds our log; a larger value is bogus.
    if (m.commit > this.log.lastIndex()) this.stats.droppedMalformed++
    else this.log.commitTo(m.commit)
    this.#leaderVouches()
    // A replica that holds nothing confirms no read: a leader cut off since before an earlier
    // replica under its id was removed counts it a voter (a simulation seed answered a stale
    // read so). The answer still tells the leader it is there, to send it a snapshot.
    this.#send(
      message({
        type: MessageType.HeartbeatResp,
        from: this.id,
        to: m.from,
        term: this.term,
        context: this.#holdsNothing() ? 0 : m.context,
      }),
    )
  }

  #handleSnapshotChunk(m: Message): void {
    const c = m.snapshot!
    const reply = (context: number, reject = false): void =>
      this.#send(
        message({
          type: MessageType.SnapResp,
          from: this.id,
          to: m.from,
          term: this.term,
          index: c.meta.index,
          context,
          reject,
        }),
      )
    if (c.meta.index <= this.log.committed) {
      this.#snapshotReceipt = null
      this.#answerApp(m.from, { index: this.log.committed })
      return
    }
    let r = this.#snapshotReceipt
    // A chunk at offset 0 starts a receipt again: it begins a transfer, maybe of another image
    // of the same index, term and length (RaftHost.refreshImage makes one at the same applied
    // index), whose chunks must not finish what an earlier image began (an audit installed such
    // a splice). A duplicate of the first chunk costs only its resend.
    if (
      r === null ||
      c.offset === 0 ||
      r.meta.index !== c.meta.index ||
      r.meta.term !== c.meta.term ||
      r.totalBytes !== c.totalBytes
    ) {
      if (c.offset !== 0) {
        reply(0)
        return
      }
      if (c.totalBytes > this.cfg.snapshotBytesMax) {
        this.stats.droppedMalformed++
        reply(0, true)
        return
      }
      // A replica that holds nothing takes only a snapshot listing it as a learner: every add
      // goes through a learner, while a voter cut off since before this id was removed lists
      // the id's earlier replica as a voter, and would count this one's acknowledgements. And
      // only one sent for it (its join nonce): a chunk sent to an earlier replica under its id
      // and delivered late lists that one as a learner (a simulation seed installed it, then
      // replayed that replica's promotion, and voted as it).
      if (
        this.#holdsNothing() &&
        (!c.meta.conf.learners.includes(this.id) || this.#joinNonce === 0 || m.context !== this.#joinNonce)
      ) {
        reply(0, true)
        // And tell the leader its nonce: it may have restarted since it told one (the nonce is
        // in memory only), or the leader, having compacted past its probe, sent a snapshot as to
        // any follower; either way the leader sent that again at every heartbeat's reply and
        // probed it no more, so it never learned the nonce.
        this.#tellHoldingNothing(m.from, 0)
        return
      }
      r = { meta: c.meta, totalBytes: c.totalBytes, chunks: [], bytes: 0 }
      this.#snapshotReceipt = r
    }
    if (c.offset !== r.bytes) {
      reply(r.bytes) // a duplicate or a gap: tell the leader where we are.
      return
    }
    r.chunks.push(c.data)
    r.bytes += c.data.length
    if (r.bytes < r.totalBytes) {
      reply(r.bytes)
      return
    }
    this.#snapshotReceipt = null
    const data = new Uint8Array(r.totalBytes)
    let at = 0
    for (const chunk of r.chunks) {
      data.set(chunk, at)
      at += chunk.length
    }
    this.#restore({ meta: r.meta, data })
    // The commit index, not the last: entries kept past a snapshot this log already covered
    // may differ from the leader's, which counts what the reply names as matching.
    this.#answerApp(m.from, { index: this.log.committed })
  }

  /** §7: installs a snapshot unless our log already holds its last entry. */
  #restore(snapshot: Snapshot): void {
    const { index, term } = snapshot.meta
    if (index <= this.log.committed) return
    if (this.log.matchTerm(index, term)) {
      // Our log already contains the snapshot's last entry: keep the entries after it (§7).
      this.log.commitTo(index)
      return
    }
    this.log.restore(snapshot)
    this.#baseConf = snapshot.meta.conf
    this.#confLog = []
    this.#setConf(this.#baseConf)
    // The log is the snapshot now: the stamps of the entries it replaced no longer count.
    this.#logEndsWith(snapshot.meta.timestampMs ?? 0)
  }

  /**
   * The log now ends, as of our steady clock now, with an entry (or snapshot) stamped
   * `stampMs`: the floor of our stamps (#lastStampMs) and where #electionClock counts from.
   * Whatever the entries it replaced carried: stamps of entries a deposed leader made and that
   * were then overwritten are not part of the group's clock. Kept as a floor (as until
   * 2026-12-04), the peak of a leader cut off on a clock ahead of the committed one (its
   * entries never committed) made it, elected later, jump the group clock by that lead and end
   * every lease granted before early (simulator, seed 326 of the crash sweep with clocks 10 s
   * apart). An unstamped entry (0) leaves the floor as it was.
   */
  #logEndsWith(stampMs: number): void {
    if (stampMs > 0) this.#lastStampMs = stampMs
    this.#lastAppendMonoMs = this.#monoMs
    this.#boundFromEstimate = false
  }

  // ---- replication, leader side (§5.3) --------------------------------------------------------

  #handleAppendResponse(m: Message, pr: Progress): void {
    if (m.index > this.log.lastIndex()) {
      // It holds (or refused at) an index past anything this leader sent: counted, it would
      // commit entries no quorum holds (an audit's commit by one replica). Malformed.
      this.stats.droppedMalformed++
      return
    }
    if (m.reject) {
      if (pr.state === ProgressState.Snapshot) return
      if (
        m.context > 0 &&
        (pr.match === 0 || m.index === 0 || (pr.state === ProgressState.Probe && m.index === pr.next - 1))
      ) {
        // It holds nothing and takes its first state only from a snapshot that carries its join
        // nonce, `context` (RaftConfig.joinBySnapshot). A match above 0 was its id's earlier
        // replica's (its storage is gone): probing down to it again and again would be refused.
        // Index 0: it refused a snapshot sent as to any follower; with a match above 0 that
        // refusal was dropped, and the same snapshot sent at every heartbeat (an audit).
        pr.holdsNothing(m.context)
        this.#sendSnapshot(m.from, pr)
        return
      }
      pr.joinNonce = 0 // it holds something (or an earlier replica under its id did)
      let nextProbe = m.rejectHint
      if (m.logTerm > 0) nextProbe = this.log.findConflictByTerm(m.rejectHint, m.logTerm)
      if (pr.maybeDecrTo(m.index, nextProbe)) {
        if (pr.state === ProgressState.Replicate) pr.becomeProbe()
        this.#sendAppend(m.from, pr, true)
      } else {
        this.stats.droppedStale++
      }
      return
    }
    const wasPaused = pr.isPaused()
    const updated = pr.maybeUpdate(m.index)
    if (pr.match > 0) pr.joinNonce = 0
    if (pr.state === ProgressState.Snapshot) {
      // The snapshot transfer is over once the follower holds its index, or once its log
      // reaches our first entry (it caught up some other way): replicate from there.
      const snapIndex = pr.snapshot?.meta.index ?? 0
      if (pr.match >= snapIndex || pr.match + 1 >= this.log.firstIndex()) {
        pr.becomeProbe()
        pr.becomeReplicate()
        this.#sendAppend(m.from, pr, true)
      }
      if (!updated) return
    } else if (!updated) {
      if (pr.state === ProgressState.Replicate) pr.inflights.freeLE(m.index)
      return
    } else if (pr.state === ProgressState.Probe) {
      pr.becomeReplicate()
    } else {
      pr.inflights.freeLE(m.index)
    }
    if (this.#maybeCommit()) {
      if (this.role !== Role.Leader) return
    } else if (wasPaused && !pr.isPaused()) {
      this.#sendAppend(m.from, pr, true)
    }
    while (this.#sendAppend(m.from, pr, false)) {
      // Fill the window (pipelining), bounded by inflights and the log's end.
    }
    if (m.from === this.leadTransferee && pr.match === this.log.lastIndex()) this.#sendTimeoutNow(m.from)
  }

  /**
   * Sends one App to `to` if its progress is not paused. With `sendIfEmpty` false, sends
   * only when there are entries to carry. Falls back to a snapshot when the entries the
   * follower needs are compacted. Returns whether a message went out.
   */
  #sendAppend(to: ReplicaId, pr: Progress, sendIfEmpty: boolean): boolean {
    if (pr.isPaused()) return false
    const log = this.log
    if (pr.holdingNothing) {
      if (this.#sendSnapshot(to, pr)) return true
      // None fits yet: probe at the log's end, carrying nothing. It says again that it holds
      // nothing, or, if it got its state from another leader meanwhile, answers as any
      // follower (it would wait for a snapshot for ever otherwise: a simulation seed).
      if (!sendIfEmpty) return false
      pr.next = log.lastIndex() + 1
    }
    const prevIndex = pr.next - 1
    const prevTerm = log.term(prevIndex)
    if (prevTerm === TERM_UNKNOWN || pr.next < log.firstIndex()) return this.#sendSnapshot(to, pr)
    const hi = Math.min(log.lastIndex() + 1, pr.next + this.cfg.msgEntriesMax)
    const entries = log.slice(pr.next, hi, this.cfg.msgBytesMax)
    if (entries.length === 0 && !sendIfEmpty) return false
    let bytes = 0
    for (const e of entries) bytes += e.data.length
    this.#send(
      message({
        type: MessageType.App,
        from: this.id,
        to,
        term: this.term,
        index: prevIndex,
        logTerm: prevTerm,
        entries,
        commit: log.committed,
      }),
    )
    pr.sentEntries(entries.length, prevIndex + entries.length, bytes)
    return true
  }

  /**
   * The snapshot being sent to `to` cannot be used (its image is gone): stops sending it; the
   * next try sends the storage's snapshot as it is then. No-op unless a transfer is under way.
   */
  abortSnapshot(to: ReplicaId): void {
    const pr = this.progress.get(to)
    if (this.role !== Role.Leader || pr === undefined || pr.state !== ProgressState.Snapshot) return
    pr.abortSnapshot()
  }

  #sendSnapshot(to: ReplicaId, pr: Progress): boolean {
    if (!pr.recentActive) return false
    const snapshot = this.log.storage.snapshot()
    if (pr.holdingNothing) {
      // A follower that holds nothing takes only a snapshot listing it as a learner, and it
      // must be one taken since it was added this time: an older one may list an earlier
      // replica under its id as a learner (a simulation seed sent one, and the new replica
      // replayed the earlier one's promotion). Else an image is made at the applied index once
      // that is late enough, and sent at a later try (a heartbeat's reply).
      // And only while this leader's own configuration lists it as a learner: a leader cut off
      // since before the id's removal, which counts the earlier replica a voter, may still hold
      // an image from before its promotion (listing it as a learner), and replay the promotion
      // after it (the new replica then acknowledged that leader's entries).
      if (!this.conf.learners.includes(to)) return false
      // Index 0 is no snapshot (a log never compacted): a leader restarted from such a log counts
      // its founders members at its start (#addedAt 0), and took it for an image of a founding
      // learner's state, which threw out of step() (an audit).
      const added = Math.max(1, this.#addedAt(to))
      const fits = (index: number, conf: ConfState) => index >= added && conf.learners.includes(to)
      if (!fits(snapshot.meta.index, snapshot.meta.conf)) {
        if (fits(this.log.applied, this.confAt(this.log.applied))) this.snapshotWanted = true
        return false
      }
    }
    if (this.cfg.snapshotsOnDemand && snapshot.data.length === 0) {
      // Metadata only: an image is made for it, and sent at a later try (a heartbeat's reply).
      this.snapshotWanted = true
      return false
    }
    if (snapshot.meta.index === 0)
      throw new Error('invariant: entries are compacted but storage has no snapshot')
    pr.becomeSnapshot(snapshot)
    this.#sendSnapshotChunk(to, pr)
    return true
  }

  /** §7 InstallSnapshot in chunks: sends the chunk at the follower's acknowledged offset. */
  #sendSnapshotChunk(to: ReplicaId, pr: Progress): void {
    const snap = pr.snapshot
    if (snap === null) return
    const offset = pr.snapshotOffset
    const end = Math.min(offset + this.cfg.snapshotChunkBytes, snap.data.length)
    this.#send(
      message({
        type: MessageType.Snap,
        from: this.id,
        to,
        term: this.term,
        context: pr.joinNonce,
        snapshot: {
          meta: snap.meta,
          offset,
          totalBytes: snap.data.length,
          data: snap.data.subarray(offset, end),
        },
      }),
    )
  }

  #bcastHeartbeat(): void {
    const context = this.#pendingReads.at(-1)?.seq ?? 0
    for (const [id, pr] of this.progress) {
      if (id === this.id) continue
      this.#send(
        message({
          type: MessageType.Heartbeat,
          from: this.id,
          to: id,
          term: this.term,
          commit: Math.min(pr.match, this.log.committed),
          context,
        }),
      )
    }
  }

  /**
   * Sends what appends and commits since the last call owe the followers: the new entries
   * to every unpaused follower, and the new commit index to the others when nothing else went
   * to them (only with `commitBroadcast`, or `forceCommit`; else the next App or heartbeat
   * carries it). Deferred to here so that many proposals share one App per follower.
   */
  flushSends(forceCommit = false): void {
    if (this.role !== Role.Leader || (!this.#appendPending && !this.#commitPending)) return
    const commitPending = this.#commitPending && (this.cfg.commitBroadcast || forceCommit)
    this.#appendPending = false
    this.#commitPending = false
    for (const [id, pr] of this.progress) {
      if (id === this.id) continue
      let sent = false
      while (this.#sendAppend(id, pr, false)) sent = true
      if (!sent && commitPending) this.#sendAppend(id, pr, true)
    }
  }

  hasPendingSends(): boolean {
    return this.role === Role.Leader && (this.#appendPending || this.#commitPending)
  }

  /**
   * §5.3, §5.4.2: advances the commit index to the largest index stored on a quorum of
   * voters, but only if that entry is of the current term (Figure 8). Returns whether it moved.
   */
  #maybeCommit(): boolean {
    const voters = this.conf.voters
    if (voters.length === 0) return false
    const matches = voters.map((v) => this.progress.get(v)?.match ?? 0)
    matches.sort((a, b) => b - a)
    const index = matches[quorumSize(voters.length) - 1]!
    if (index <= this.log.committed || this.log.term(index) !== this.term) return false
    this.log.commitTo(index)
    this.#onLeaderCommit()
    return true
  }

  #onLeaderCommit(): void {
    this.#commitPending = true
    if (this.#waitingReads.length > 0 && this.log.term(this.log.committed) === this.term) {
      const waiting = this.#waitingReads
      this.#waitingReads = []
      for (const r of waiting) this.#handleReadIndex(r.requestCtx, r.from)
    }
    // A leader removed from the voters leads until the change commits, then steps down
    // (dissertation §4.2.2). It sends the new commit index first, so followers learn it.
    if (!this.conf.voters.includes(this.id) && this.lastConfIndex() <= this.log.committed) {
      this.flushSends(true)
      this.becomeFollower(this.term, '')
    }
  }

  /** The leader persisted its log up to `index`: count it toward commitment. */
  onPersisted(index: number): void {
    if (this.role !== Role.Leader) return
    const self = this.progress.get(this.id)
    if (self?.maybeUpdate(index)) this.#maybeCommit()
  }

  // ---- proposals --------------------------------------------------------------------------------

  #checkCanPropose(): void {
    if (this.role !== Role.Leader) throw new NotLeaderError(this.lead)
    if (this.leadTransferee !== '') {
      throw new ProposalDroppedError(
        `leadership is being transferred to ${this.leadTransferee}; retry on the new leader`,
      )
    }
  }

  /**
   * Appends `datas` as consecutive Normal entries stamped with the leader's clock. Returns
   * the index of the first. Throws NotLeaderError on a non-leader, ProposalDroppedError
   * during a transfer or when uncommittedEntriesMax would be passed, InvalidArgumentError
   * for an empty batch or empty data (empty data is reserved for the leader's no-op).
   */
  propose(datas: readonly Uint8Array[]): number {
    this.#checkCanPropose()
    if (datas.length === 0) throw new InvalidArgumentError('propose needs at least one entry')
    for (const d of datas) {
      if (!(d instanceof Uint8Array) || d.length === 0) {
        throw new InvalidArgumentError('a proposal must be a non-empty Uint8Array')
      }
    }
    if (this.log.lastIndex() - this.log.committed + datas.length > this.cfg.uncommittedEntriesMax) {
      throw new ProposalDroppedError(
        `more than ${this.cfg.uncommittedEntriesMax} entries would be uncommitted; retry when some have committed`,
      )
    }
    return this.#appendEntries(datas, EntryType.Normal)
  }

  /**
   * Proposes one membership change (dissertation §4.1). Throws NotLeaderError on a
   * non-leader; ProposalDroppedError while no entry of this term is committed yet or another
   * change is uncommitted (Ongaro's fix) or a transfer runs; InvalidConfigError when the
   * change would leave no voter.
   */
  proposeConfChange(change: ConfChange): number {
    this.#checkCanPropose()
    if (typeof change.id !== 'string' || change.id === '') {
      throw new InvalidArgumentError('a configuration change needs a non-empty replica id')
    }
    if (this.log.term(this.log.committed) !== this.term) {
      throw new ProposalDroppedError('the leader has not yet committed an entry of its term; retry shortly')
    }
    if (this.lastConfIndex() > this.log.committed) {
      throw new ProposalDroppedError('another configuration change is not yet committed; retry after it is')
    }
    if (
      this.cfg.joinBySnapshot &&
      change.type === ConfChangeType.AddVoter &&
      !this.conf.voters.includes(change.id) &&
      !this.conf.learners.includes(change.id)
    ) {
      // A replica added takes its first state only from a snapshot listing it as a learner:
      // added straight as a voter it would never join, and count towards every quorum.
      throw new InvalidConfigError(`add ${change.id} as a learner first, then promote it (joinBySnapshot)`)
    }
    const next = applyConfChange(this.conf, change)
    if (next.voters.length === 0) {
      throw new InvalidConfigError(`removing ${change.id} would leave the group without voters`)
    }
    return this.#appendEntries([encodeConfChange(change)], EntryType.ConfChange)
  }

  #appendEntries(datas: readonly Uint8Array[], type: EntryType): number {
    const first = this.log.lastIndex() + 1
    const stampMs = this.timelineMs()
    this.#logEndsWith(stampMs)
    const entries: Entry[] = new Array(datas.length)
    for (let i = 0; i < datas.length; i++) {
      entries[i] = { index: first + i, term: this.term, type, timestampMs: stampMs, data: datas[i]! }
    }
    this.log.truncateAndAppend(entries)
    if (type === EntryType.ConfChange) {
      for (const e of entries) this.#noteAppended(e)
      this.#setConf(this.#confLog.at(-1)?.conf ?? this.#baseConf)
    }
    this.#appendPending = true
    return first
  }

  // ---- membership (§6, dissertation §4) ---------------------------------------------------------

  /** Index of the latest configuration entry in the log (the snapshot's index when none). */
  lastConfIndex(): number {
    return this.#confLog.at(-1)?.index ?? 0
  }

  /** The configuration in force at `index` (for snapshot metadata). Requires index >= firstIndex()-1. */
  confAt(index: number): ConfState {
    let conf = this.#baseConf
    for (const c of this.#confLog) {
      if (c.index > index) break
      conf = c.conf
    }
    return conf
  }

  /**
   * The index of the configuration entry that made `id` a member most recently (0 when it was
   * a member at the log's start: any snapshot the log still has is at or after that).
   */
  #addedAt(id: ReplicaId): number {
    const member = (c: ConfState) => c.voters.includes(id) || c.learners.includes(id)
    for (let i = this.#confLog.length - 1; i >= 0; i--) {
      const before = i > 0 ? this.#confLog[i - 1]!.conf : this.#baseConf
      if (!member(before) && member(this.#confLog[i]!.conf)) return this.#confLog[i]!.index
    }
    return 0
  }

  /** Folds configuration entries that compaction passed into the base configuration. */
  pruneConfLog(): void {
    const floor = this.log.firstIndex() - 1
    while (this.#confLog.length > 0 && this.#confLog[0]!.index <= floor)
      this.#baseConf = this.#confLog.shift()!.conf
  }

  #noteAppended(e: Entry): void {
    if (e.timestampMs > this.#lastStampMs) this.#lastStampMs = e.timestampMs
    if (e.type !== EntryType.ConfChange) return
    const change = decodeConfChange(e.data)
    if (change === null) {
      this.stats.droppedMalformed++
      return
    }
    const prev = this.#confLog.at(-1)?.conf ?? this.#baseConf
    this.#confLog.push({ index: e.index, conf: applyConfChange(prev, change) })
  }

  #dropConfsFrom(index: number): void {
    while (this.#confLog.length > 0 && this.#confLog.at(-1)!.index >= index) this.#confLog.pop()
  }

  #setConf(conf: ConfState): void {
    this.conf = conf
    const members = new Set([...conf.voters, ...conf.learners])
    for (const id of [...this.progress.keys()]) if (!members.has(id)) this.progress.delete(id)
    const next = this.log.lastIndex() + 1
    for (const id of members) {
      if (this.progress.has(id)) continue
      const pr = new Progress(next, this.cfg.inflightMsgsMax, this.cfg.inflightBytesMax)
      pr.recentActive = true
      if (id === this.id) pr.match = this.log.unstableOffset - 1
      this.progress.set(id, pr)
      if (this.role === Role.Leader) this.#appendPending = true
    }
    if (this.leadTransferee !== '' && !conf.voters.includes(this.leadTransferee)) this.leadTransferee = ''
    // Removing a voter can shrink the quorum, so a leader may commit more now.
    if (this.role === Role.Leader) this.#maybeCommit()
  }

  // ---- leadership transfer (dissertation §3.10) -------------------------------------------------

  /**
   * Hands leadership to voter `to`: brings its log up to date, then sends TimeoutNow.
   * Proposals are refused until it finishes or an election timeout passes. Throws
   * NotLeaderError on a non-leader, InvalidArgumentError when `to` is not a voter.
   */
  transferLeader(to: ReplicaId): void {
    if (this.role !== Role.Leader) throw new NotLeaderError(this.lead)
    if (to === this.id) return
    if (!this.conf.voters.includes(to)) throw new InvalidArgumentError(`${to} is not a voter of this group`)
    if (this.leadTransferee === to) return
    this.leadTransferee = to
    this.electionElapsed = 0
    const pr = this.progress.get(to)!
    if (pr.match === this.log.lastIndex()) this.#sendTimeoutNow(to)
    else this.#sendAppend(to, pr, true)
  }

  /**
   * A follower forgets its leader (etcd's ForgetLeader) when a failure detector outside Raft
   * has strong reason to believe it is gone (its process's connections closed). It stays a
   * leaderless follower in the same term, without campaigning, and no longer honours the
   * leader lease, so it grants pre-votes at once: when a quorum of followers forgets a dead
   * leader, the first to campaign wins without waiting out an election timeout. A leader that
   * is in fact alive is learned again from its next message. Returns whether it forgot.
   */
  forgetLeader(): boolean {
    if (this.role !== Role.Follower || this.lead === '') return false
    this.lead = ''
    return true
  }

  #sendTimeoutNow(to: ReplicaId): void {
    this.#send(message({ type: MessageType.TimeoutNow, from: this.id, to, term: this.term }))
  }

  // ---- linearizable reads (§8) ------------------------------------------------------------------

  /**
   * Requests a read index for `requestCtx`; the answer arrives as a ReadState in a later
   * Ready. A follower forwards it to the leader. Throws NotLeaderError when no leader is known,
   * ProposalDroppedError when the read queue is full.
   */
  readIndex(requestCtx: string): void {
    if (this.role !== Role.Leader) {
      if (this.lead === '') throw new NotLeaderError('')
      this.#send(
        message({ type: MessageType.ReadIndex, from: this.id, to: this.lead, term: this.term, requestCtx }),
      )
      return
    }
    if (this.#pendingReads.length + this.#waitingReads.length >= this.cfg.readIndexQueueMax) {
      throw new ProposalDroppedError(
        `more than ${this.cfg.readIndexQueueMax} reads are pending; retry shortly`,
      )
    }
    this.#handleReadIndex(requestCtx, this.id)
  }

  #handleReadIndex(requestCtx: string, from: ReplicaId): void {
    const queued = this.#pendingReads.length + this.#waitingReads.length
    if (queued >= this.cfg.readIndexQueueMax) {
      this.stats.droppedStale++
      return
    }
    // §8: a new leader does not know the commit index until an entry of its term commits. A
    // lone voter neither: after a restart its stored commit index may be behind what it had
    // committed (and answered) before, which its no-op of the new term commits again.
    if (this.log.term(this.log.committed) !== this.term) {
      this.#waitingReads.push({ requestCtx, from })
      return
    }
    if (this.conf.voters.length === 1 && this.conf.voters[0] === this.id) {
      this.#answerRead(requestCtx, from, this.log.committed)
      return
    }
    const seq = ++this.#readSeq
    this.#pendingReads.push({ seq, index: this.log.committed, requestCtx, from })
    this.#bcastHeartbeat()
  }

  #ackRead(from: ReplicaId, seq: number): void {
    if (seq > (this.#readAcks.get(from) ?? 0)) this.#readAcks.set(from, seq)
    const voters = this.conf.voters
    const acks = voters.map((v) => (v === this.id ? this.#readSeq : (this.#readAcks.get(v) ?? 0)))
    acks.sort((a, b) => b - a)
    const confirmed = acks[quorumSize(voters.length) - 1] ?? 0
    let n = 0
    while (n < this.#pendingReads.length && this.#pendingReads[n]!.seq <= confirmed) {
      const r = this.#pendingReads[n]!
      this.#answerRead(r.requestCtx, r.from, r.index)
      n++
    }
    if (n > 0) this.#pendingReads = this.#pendingReads.slice(n)
  }

  #answerRead(requestCtx: string, from: ReplicaId, index: number): void {
    if (from === this.id) this.readStates.push({ index, requestCtx })
    else
      this.#send(
        message({
          type: MessageType.ReadIndexResp,
          from: this.id,
          to: from,
          term: this.term,
          index,
          requestCtx,
        }),
      )
  }

  #send(m: Message): void {
    if (this.msgs.length >= this.cfg.outboxMessagesMax) {
      this.stats.droppedOutbound++
      return
    }
    if (
      this.#leaderBase !== null &&
      (m.type === MessageType.App || m.type === MessageType.Heartbeat || m.type === MessageType.Snap)
    ) {
      this.msgs.push({ ...m, leaderTimeMs: this.timelineMs() })
      return
    }
    this.msgs.push(m)
  }
}

/** A clock value and the steady clock's reading when it held. */
/** How far above what a replica knows of the group clock its recorded offset may be (takeClockOffset). */
const CLOCK_OFFSET_ABOVE_MS = 5
/**
 * How far below it. Below is safe for the restarted replica's own leases, but another replica
 * that kept the true clock may lead next and continue from it: the group's time then jumps by
 * the difference (simulator seed 2840, with a bound of 1 s). A leader catching up with its wall
 * clock raises the offset by up to 10 ms a second: about one record a second while it does.
 */
const CLOCK_OFFSET_BELOW_MS = 10

interface ClockReading {
  readonly timeMs: number
  readonly monoMs: number
}

/** A leader's group clock: where it started, and what it caught up with its wall clock since. */
interface LeaderClock extends ClockReading {
  caughtUpMs: number
}

const EMPTY_CONF: ConfState = { voters: [], learners: [], votersOutgoing: [], learnersNext: [] }

/** The configuration entries that found a group: one per member, voters first, ids sorted. */
function bootstrapEntries(conf: ConfState): Entry[] {
  const changes: ConfChange[] = [
    ...[...conf.voters].sort().map((id) => ({ type: ConfChangeType.AddVoter, id })),
    ...[...conf.learners].sort().map((id) => ({ type: ConfChangeType.AddLearner, id })),
  ]
  return changes.map((c, i) => ({
    index: i + 1,
    term: 1,
    type: EntryType.ConfChange,
    timestampMs: 0,
    data: encodeConfChange(c),
  }))
}

/** The number of votes or acknowledgements that make a majority of `n` voters. */
export function quorumSize(n: number): number {
  return Math.floor(n / 2) + 1
}
