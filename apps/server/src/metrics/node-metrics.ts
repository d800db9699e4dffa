import type { GroupCommitBatch } from '@mq/kv-storage'
import { Role } from '@mq/raft-core'
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client'
import type { NodeView, PartitionView } from '../node-view'
import { readiness } from '../node-view'
import { escapeLabel, type PartitionSample, renderPartitionSeries, samplePartition } from './partition-series'
import { QUEUE_OVERFLOW } from './queue-overflow'
import { scopeExposition } from './scope-exposition'

/** Seconds; from 100 µs (an fsync on a fast disk) to 10 s (a stuck call). */
const LATENCY_BUCKETS_S = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10,
]
const OPS_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16_384, 65_536]
const BYTES_BUCKETS = [256, 1024, 4096, 16_384, 65_536, 262_144, 1_048_576, 4_194_304, 16_777_216, 67_108_864]
const ROLES = [Role.Follower, Role.PreCandidate, Role.Candidate, Role.Leader] as const
const MISNAMED_DEFAULT_METRICS = [
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
]
/** Bound on the partitions whose depth one scrape reports (the scrape stays cheap). */
export const SCRAPE_PARTITIONS_MAX = 1_000
export { QUEUE_OVERFLOW }

/** Bounds on the queue names that the operation counters (`mq_queue_*_total`) carry. */
export interface QueueSeriesLimits {
  /**
   * Queue names with series of their own, at most; operations on any other queue are counted
   * under QUEUE_OVERFLOW until a name is removed. 6 counters per name: 2,000 names is 12,000
   * series (OpenTelemetry's default cardinality limit per metric is 2,000 too).
   */
  readonly queueSeriesMax: number
  /**
   * A queue's series are removed at the first scrape at which this node has led none of its
   * partitions, nor counted an operation on it, for this long: a queue deleted (or whose
   * partitions are led elsewhere now) leaves the scrape, and a leader election that ends
   * back here within it does not reset the counters.
   */
  readonly queueSeriesIdleMs: number
}

export const DEFAULT_QUEUE_SERIES_LIMITS: QueueSeriesLimits = {
  queueSeriesMax: 2_000,
  queueSeriesIdleMs: 5 * 60_000,
}

/**
 * Every Prometheus metric of one node, in its own registry (never prom-client's global one,
 * so several nodes can live in one process). Counters and histograms are fed as things
 * happen (by the observers in this folder); gauges are refreshed from a NodeView when
 * scraped (`render`).
 */
export class NodeMetrics {
  readonly registry = new Registry()
  /** The collection under way, if any (see `render`). */
  #collecting: Promise<readonly PartitionSample[]> | undefined
  /** The labels every sample ends with (prom-client's default labels). */
  readonly #labelsAfter: string
  readonly #limits: QueueSeriesLimits
  readonly #now: () => number
  /**
   * The queues with operation series, and when this node last led one of their partitions
   * or counted an operation on them (ms). Invariant: size <= queueSeriesMax.
   */
  readonly #queueSeenMs = new Map<string, number>()

  // Raft, per group
  readonly raftTerm = this.#gauge('mq_raft_term', 'Current Raft term of this replica', ['group'])
  readonly raftRole = this.#gauge(
    'mq_raft_role',
    'Raft role of this replica: 1 for the current role, 0 for the others',
    ['group', 'role'],
  )
  readonly raftCommitIndex = this.#gauge('mq_raft_commit_index', 'Highest log index known committed', [
    'group',
  ])
  readonly raftAppliedIndex = this.#gauge(
    'mq_raft_applied_index',
    'Highest log index applied to the state machine',
    ['group'],
  )
  readonly raftLastIndex = this.#gauge('mq_raft_last_index', 'Last index of the local Raft log', ['group'])
  readonly raftLogTailEntries = this.#gauge(
    'mq_raft_log_tail_entries',
    'Raft log entries held in memory: those since the last compaction (each snapshot compacts the log behind it)',
    ['group'],
  )
  readonly raftLogTailBytes = this.#gauge(
    'mq_raft_log_tail_bytes',
    'Bytes of the Raft log entries held in memory (their data plus an estimate of 64 bytes each)',
    ['group'],
  )
  readonly dataImports = this.#gauge(
    'mq_data_imports',
    'Partitions being imported into this data group replica, their copies partly written (a move under way, or one abandoned when its queue was deleted, until the orphan sweeper drops it)',
    ['group'],
  )
  readonly dataSweeps = this.#gauge(
    'mq_data_sweeps',
    'Dropped partitions (and unfinished imports) whose keys this data-group replica is still deleting in the background',
    ['group'],
  )
  readonly raftElections = this.#counter(
    'mq_raft_elections_total',
    'Elections this replica started (RequestVote sent for a new term)',
    ['group'],
  )
  readonly raftSnapshotSends = this.#counter(
    'mq_raft_snapshot_sends_total',
    'Snapshots this replica started sending to a follower (first InstallSnapshot chunk)',
    ['group'],
  )
  readonly raftAppendSeconds = this.#histogram(
    'mq_raft_append_seconds',
    'From proposing an entry on the leader until it is committed (replicated and fsynced on a majority) and applied',
    ['group'],
    LATENCY_BUCKETS_S,
  )
  readonly raftApplySeconds = this.#histogram(
    'mq_raft_apply_seconds',
    'Time the state machine took to apply one batch of committed entries',
    ['group'],
    LATENCY_BUCKETS_S,
  )

  // Storage (the group commit: one fsync for every group's writes of a cycle)
  readonly fsyncSeconds = this.#histogram(
    'mq_storage_fsync_seconds',
    'Time of one synced group-commit batch write',
    [],
    LATENCY_BUCKETS_S,
  )
  readonly batchOps = this.#histogram(
    'mq_storage_batch_ops',
    'Operations per group-commit batch',
    [],
    OPS_BUCKETS,
  )
  readonly batchBytes = this.#histogram(
    'mq_storage_batch_bytes',
    'Key and value bytes per group-commit batch',
    [],
    BYTES_BUCKETS,
  )

  // Queues: operation counts. The depth of the partitions this node leads is rendered per
  // scrape by partition-series.ts.
  readonly enqueued = this.#counter(
    'mq_queue_enqueued_total',
    'Messages enqueued (new, not idempotent retries)',
    ['queue'],
  )
  readonly leased = this.#counter('mq_queue_leased_total', 'Messages leased to consumers', ['queue'])
  readonly redelivered = this.#counter(
    'mq_queue_redelivered_total',
    'Leases of a message delivered before (after a nack or an expired lease)',
    ['queue'],
  )
  readonly acked = this.#counter('mq_queue_acked_total', 'Leases acked', ['queue'])
  readonly nacked = this.#counter('mq_queue_nacked_total', 'Leases nacked', ['queue'])
  readonly expired = this.#counter(
    'mq_queue_expired_total',
    'Ack, nack or extend of a lease that had already expired (the message was or will be delivered again)',
    ['queue'],
  )

  // RPCs
  readonly rpcSeconds = this.#histogram(
    'mq_rpc_duration_seconds',
    'Server-side duration of a gRPC call, by method and status code',
    ['method', 'code'],
    LATENCY_BUCKETS_S,
  )

  // The node
  readonly ready = this.#gauge('mq_node_ready', '1 when the node is ready (see /readyz)', [])
  readonly metaLeaderKnown = this.#gauge(
    'mq_meta_leader_known',
    '1 when this node knows the meta group leader',
    [],
  )

  /** `now`: the clock of the queue series' idle time (ms; tests give their own). */
  constructor(nodeId: string, options: Partial<QueueSeriesLimits> & { readonly now?: () => number } = {}) {
    const { now = Date.now, ...limits } = options
    this.#limits = { ...DEFAULT_QUEUE_SERIES_LIMITS, ...limits }
    this.#now = now
    this.registry.setDefaultLabels({ node: nodeId })
    this.#labelsAfter = `,node="${escapeLabel(nodeId)}"`
    collectDefaultMetrics({ register: this.registry })
    // Gauges that prom-client names like counters (`_total`), which `promtool check metrics` rejects.
    for (const name of MISNAMED_DEFAULT_METRICS) this.registry.removeSingleMetric(name)
  }

  /** Feeds one group-commit batch (the kv-storage `onBatch` hook). */
  readonly onStorageBatch = (batch: GroupCommitBatch): void => {
    this.fsyncSeconds.observe(batch.fsyncMs / 1000)
    this.batchOps.observe(batch.ops)
    this.batchBytes.observe(batch.bytes)
  }

  /**
   * Exports monotonic counts kept elsewhere (e.g. the peer transport's stats) as counters
   * named `prefix_<key in snake case>_total`, read at each scrape.
   */
  addSource(prefix: string, help: string, read: () => Record<string, number>): void {
    for (const key of Object.keys(read())) {
      const name = `${prefix}_${key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}_total`
      new Counter({
        name,
        help: `${help}: ${key}`,
        registers: [this.registry],
        collect() {
          this.reset()
          this.inc(read()[key] ?? 0)
        },
      })
    }
  }

  /** Exports a value kept elsewhere that goes up and down (e.g. bytes queued) as gauge `name`, read at each scrape. */
  addGaugeSource(name: string, help: string, read: () => number): void {
    new Gauge({
      name,
      help,
      registers: [this.registry],
      collect() {
        this.set(read())
      },
    })
  }

  /**
   * The labels to count an operation on `queue` under (countQueueOps): `{ queue }` while the
   * queue has series or there is room for them (`queueSeriesMax`), else QUEUE_OVERFLOW. Marks
   * the queue as seen now (its series are kept for `queueSeriesIdleMs` at least).
   */
  queueLabels(queue: string): { queue: string } {
    if (!this.#queueSeenMs.has(queue) && this.#queueSeenMs.size >= this.#limits.queueSeriesMax)
      return { queue: QUEUE_OVERFLOW }
    this.#queueSeenMs.set(queue, this.#now())
    return { queue }
  }

  /** Times `applied` (a proposal's promise) into mq_raft_append_seconds; returns it unchanged. */
  timeAppend<T>(groupId: number, applied: Promise<T>): Promise<T> {
    const end = this.raftAppendSeconds.startTimer({ group: String(groupId) })
    applied.then(
      () => end(),
      () => {},
    )
    return applied
  }

  /**
   * Refreshes the gauges from `view` and returns the Prometheus text exposition: all of it, or
   * with `sees` the series that name no queue and those of the queues it accepts. Calls while
   * a collection is under way share it (the node's one view): two collections at once reset
   * each other's gauges, and a scrape lost the series the other reset.
   */
  render(view: NodeView, sees?: (queue: string) => boolean): Promise<string> {
    if (!this.#collecting) {
      this.#collecting = this.#refresh(view).finally(() => {
        this.#collecting = undefined
      })
    }
    return this.#collecting.then(async (partitions) => {
      const registered = await this.registry.metrics()
      const own = sees ? scopeExposition(registered, sees) : registered
      const separator = own.endsWith('\n') ? '' : '\n'
      return own + separator + (await renderPartitionSeries(partitions, this.#labelsAfter, sees))
    })
  }

  get contentType(): string {
    return this.registry.contentType
  }

  /** Sets the gauges from `view`; returns what the scrape shows of the partitions it leads. */
  async #refresh(view: NodeView): Promise<readonly PartitionSample[]> {
    for (const g of [
      this.raftTerm,
      this.raftRole,
      this.raftCommitIndex,
      this.raftAppliedIndex,
      this.raftLastIndex,
      this.raftLogTailEntries,
      this.raftLogTailBytes,
      this.dataImports,
      this.dataSweeps,
    ])
      g.reset()
    // Stopped after a fatal error: its Raft host halted, the statuses it reads froze (a leader
    // stayed `leader` beside the one elected since, its partitions' depth beside theirs).
    const failed = view.failed()
    for (const { groupId, status, imports, sweeping, logTail } of view.groups()) {
      const group = String(groupId)
      this.raftTerm.set({ group }, status.term)
      for (const role of ROLES) this.raftRole.set({ group, role }, !failed && status.role === role ? 1 : 0)
      this.raftCommitIndex.set({ group }, status.commit)
      this.raftAppliedIndex.set({ group }, status.applied)
      this.raftLastIndex.set({ group }, status.lastIndex)
      this.raftLogTailEntries.set({ group }, logTail.entries)
      this.raftLogTailBytes.set({ group }, logTail.bytes)
      this.dataImports.set({ group }, imports)
      this.dataSweeps.set({ group }, sweeping)
    }
    await this.#retireGroupSeries(view)
    const led = failed ? [] : view.ledPartitions()
    this.#retireQueueSeries(led)
    // Asked all at once: each read waits behind its group's applies queued before it, so one
    // after the other a scrape under load took the sum of those waits (2.4-5.4 s for ~15
    // partitions under 4 producers: an audit), past a scraper's timeout with a few hundred. A
    // partition dropped or moved meanwhile is left out of this scrape, not the whole scrape.
    const parts = led.slice(0, SCRAPE_PARTITIONS_MAX)
    const stats = await Promise.all(
      parts.map((p) =>
        Promise.resolve()
          .then(() => p.stats())
          .catch(() => undefined),
      ),
    )
    const read: PartitionSample[] = []
    parts.forEach((p, i) => {
      const s = stats[i]
      if (s) read.push(samplePartition(p.queue, p.partition, s))
    })
    this.ready.set(readiness(view).ready ? 1 : 0)
    this.metaLeaderKnown.set(view.metaLeaderId() === '' ? 0 : 1)
    return read
  }

  /**
   * Marks the queues of `led` (every partition this node leads, not only those a scrape
   * reports) as seen now, and removes the operation series of the queues not seen for
   * `queueSeriesIdleMs`: a queue used once and deleted leaves no series for the life of the
   * process. The series of a queue led here are never removed, so its counters never reset.
   */
  #retireQueueSeries(led: readonly PartitionView[]): void {
    const nowMs = this.#now()
    for (const p of led) if (this.#queueSeenMs.has(p.queue)) this.#queueSeenMs.set(p.queue, nowMs)
    for (const [queue, seenMs] of this.#queueSeenMs) {
      if (nowMs - seenMs < this.#limits.queueSeriesIdleMs) continue
      this.#queueSeenMs.delete(queue)
      for (const counter of this.#queueCounters()) counter.remove({ queue })
    }
  }

  /**
   * Removes the series of the groups `view` no longer hosts (removed from the cluster, or their
   * replica moved to another node) from the metrics fed as things happen: group ids are never
   * used again, so they stayed in every scrape for the life of the process, some 40 lines each.
   */
  async #retireGroupSeries(view: NodeView): Promise<void> {
    const metrics = this.#groupFed()
    const fed = new Set<string>()
    for (const metric of metrics) for (const v of (await metric.get()).values) fed.add(String(v.labels.group))
    // Read after the awaits: a group added meanwhile keeps its series.
    const hosted = new Set(view.groups().map((g) => String(g.groupId)))
    for (const group of fed) if (!hosted.has(group)) for (const metric of metrics) metric.remove({ group })
  }

  /** The metrics labelled by group alone that are fed as things happen (the gauges are set per scrape). */
  #groupFed(): readonly (Counter<'group'> | Histogram<'group'>)[] {
    return [this.raftElections, this.raftSnapshotSends, this.raftAppendSeconds, this.raftApplySeconds]
  }

  /** The counters labelled by queue alone (those of countQueueOps). */
  #queueCounters(): readonly Counter<'queue'>[] {
    return [this.enqueued, this.leased, this.redelivered, this.acked, this.nacked, this.expired]
  }

  #gauge<L extends string>(name: string, help: string, labelNames: readonly L[]): Gauge<L> {
    return new Gauge({ name, help, labelNames, registers: [this.registry] })
  }

  #counter<L extends string>(name: string, help: string, labelNames: readonly L[]): Counter<L> {
    return new Counter({ name, help, labelNames, registers: [this.registry] })
  }

  #histogram<L extends string>(
    name: string,
    help: string,
    labelNames: readonly L[],
    buckets: number[],
  ): Histogram<L> {
    return new Histogram({ name, help, labelNames, buckets, registers: [this.registry] })
  }
}
