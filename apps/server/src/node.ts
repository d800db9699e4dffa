import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { type ChannelCredentials, Server } from '@grpc/grpc-js'
import {
  ChangeSignal,
  type DataCommand,
  DataGroupMachine,
  type DataGroupPort,
  type DataNodePort,
  encodeDataCommand,
  errorOf,
  type LongPollTally,
  parseStoredQueueName,
  partitionConfigOf,
  queueHandlers,
  queueNamesOf,
  storedQueueName,
} from '@mq/data-service'
import { DurabilityMark, LevelEngine, LogStore, WriteChain } from '@mq/kv-storage'
import {
  encodeMetaCommand,
  type MetaCommand,
  type MetaGroupPort,
  type MetaResult,
  metaHandlers,
  removedNodeMessage,
  routeOf,
  saysNodeRemoved,
  saysStoreReplaced,
} from '@mq/meta-service'
import {
  belowClusterLevelMessage,
  type FencePartitionsRequest,
  FORMAT_LEVEL,
  FORMAT_LEVEL_JOIN_BY_SNAPSHOT,
  FORMAT_LEVEL_MOVE_ABORT,
  FORMAT_LEVEL_RETIRE,
  formatLevelOf,
  type GetRoutesResponse,
  GROUP_CLOCK_CATCH_UP,
  HealthService,
  type HeartbeatRequest,
  type HeartbeatResponse,
  InternalError,
  InvalidArgumentError,
  MetaService,
  PeerService,
  type ProbeResponse,
  QUEUE_PARTITIONS_MAX,
  type QueueRoute,
  QueueService,
  StaleRouteError,
  saysBelowClusterLevel,
  UnavailableError,
  unaryHandler,
  NotLeaderError as WireNotLeader,
} from '@mq/protocol'
import { Prng, RaftHost, Role } from '@mq/raft-core'
import { notGrpc } from '@mq/router-client'
import { advertiseProblem } from './advertise-check'
import { AccessControl } from './auth/access'
import { authInterceptor } from './auth/auth-interceptor'
import { MetaTokenTable } from './auth/meta-tokens'
import { loadTokenFile, type TokenEntry } from './auth/token-file'
import type { ServerConfig } from './config'
import { grpcServerOptions } from './grpc-limits'
import { type GrpcListener, listenGrpc } from './grpc-listener'
import { HealthRegistry } from './health'
import { votersConf } from './host/conf'
import { Controller } from './host/controller'
import { appliedKeyOf, DataMachine, decodeIndex } from './host/data-machine'
import { DeadLetterForwarder } from './host/dead-letter-forwarder'
import { DeadLetterLog } from './host/dead-letter-log'
import { checkedEntry } from './host/entry-size'
import { EpochCeiling } from './host/epoch-ceiling'
import { FounderGate } from './host/founder-gate'
import { stopTransferTarget, transferWhenCaughtUp } from './host/leader-transfer'
import { MetaMachine } from './host/meta-machine'
import { MetaTermFence } from './host/meta-term-fence'
import { holdsNothing, NO_CLUSTER_ENTRY, NodeFacts } from './host/node-facts'
import { NodeImages } from './host/node-images'
import { OrphanSweeper } from './host/orphan-sweeper'
import { OwnClient } from './host/own-client'
import { PartitionMover } from './host/partition-mover'
import { PeerCalls, type UnaryCall } from './host/peer-calls'
import { changeReplicas } from './host/replica-changer'
import { RouteCache } from './host/route-cache'
import { RouteMisses } from './host/route-misses'
import { type RoutesAnswer, routesInParts } from './host/routes-in-parts'
import { steadyClock } from './host/steady-clock'
import { TtlTicker } from './host/ttl-ticker'
import { toWireError } from './host/wire-errors'
import type { HttpTls } from './http/http-server'
import { type Logger, silentLogger } from './log'
import { makeDirs } from './make-dirs'
import type { Member } from './members'
import { NodeMetrics } from './metrics/node-metrics'
import { observedStateMachine, observedTransport } from './metrics/raft-observer'
import { rpcInterceptor } from './metrics/rpc-interceptor'
import { type NodeView, type PartitionView, parsePartitionId } from './node-view'
import { type OpenCalls, openCallsInterceptor } from './open-calls'
import { PeerTransport } from './peer-transport'
import { RaftEventLog } from './raft-events'
import { NodeCredentials } from './tls'
import { UnsentAnswers, unsentAnswersInterceptor } from './unsent-answers'

const META_GROUP = 0
const MIB = 1024 * 1024
/** `bytes` in MiB, one decimal. */
const mib = (bytes: number): string => (bytes / MIB).toFixed(1)
const HEARTBEAT_MS = 500
const CONTROLLER_MS = 500
/** How often a data-group leader looks for partitions of deleted queues to drop. */
const ORPHAN_SWEEP_MS = 10_000
/** How often leaders look for messages that outlived their queue's TTL (TtlTicker). */
const TTL_ROUND_MS = 1_000
/** How often leaders move dead letters to their queue's dead-letter queue (DeadLetterForwarder). */
const DEAD_LETTER_ROUND_MS = 1_000
const META_CALL_MS = 3_000
/** A founder with an empty data dir asks the other founders this often whether the cluster is new. */
const FOUNDER_PROBE_MS = 500
/** How long heartbeats go unanswered before the node warns, and then how often. */
const HEARTBEAT_SILENCE_LOG_MS = 10_000
/** How long a stop waits for the data groups' applies under way before it closes the store. */
const STOP_SETTLE_MS = 5_000
/** While stopping, how often to look whether only peers' Raft streams are still open. */
const STOP_POLL_MS = 10

/** Waits for `all` to settle, however they end, for at most `ms`. */
async function settledWithin(all: readonly Promise<unknown>[], ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  await Promise.race([
    Promise.allSettled(all),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms)
    }),
  ])
  clearTimeout(timer)
}
/** The deadline of one Peer.Probe. */
const PROBE_CALL_MS = 1_000
/** How often group leadership changes are looked for (and logged). */
const RAFT_EVENTS_MS = 250

/** What a node is given besides its config. */
export interface NodeOptions {
  readonly log?: Logger
  /** The client tokens (from `--auth-file`); undefined = clients are not authenticated. */
  readonly tokens?: readonly TokenEntry[]
  /**
   * Called once when the node stops serving for good: a read found damaged data (the database
   * is quarantined), or the meta leader refused its heartbeat because the cluster removed it
   * (RemoveNode). mq-server then exits 1.
   */
  readonly onFailStop?: (error: Error) => void
}

interface LocalDataGroup {
  readonly port: DataGroupPort
  readonly machine: DataMachine
  /** Open and configure proposals under way, by purpose and partition (see groupFor). */
  readonly pending: Map<string, Promise<void>>
}

/**
 * One `mq-server` process: a multi-Raft host with one LevelDB, one gRPC port for clients and
 * peers, one tick loop, at most one meta replica (when the node is a founding meta member)
 * and any number of data-group replicas (as the meta leader assigns them).
 *
 * The meta leader's controller (host/controller.ts) registers nodes from their heartbeats,
 * creates and removes data groups, moves partitions and records each data group's leader.
 * Nodes pull their replica assignments from the heartbeat answers, create the replicas and
 * delete the removed ones; the partition mover (host/partition-mover.ts) carries out the
 * source and target sides of a move.
 */
export class MqNode {
  readonly config: ServerConfig
  readonly health = new HealthRegistry()
  readonly log: Logger
  readonly metrics: NodeMetrics
  /** Who may call what: the gRPC server's checks, shared with the console API. */
  readonly access: AccessControl
  readonly #credentials: NodeCredentials
  readonly #metaTokens = new MetaTokenTable()
  readonly #server: Server
  readonly #addresses = new Map<string, string>()
  /** The fingerprint of the node list the last heartbeat answer carried ('' = none yet). */
  #nodesFingerprint = ''
  readonly #dataGroups = new Map<number, LocalDataGroup>()
  readonly #addingGroups = new Map<number, Promise<void>>()
  readonly #removingGroups = new Map<number, Promise<void>>()
  /** Routes of queues data requests came for (host/route-cache.ts). */
  readonly #routes = new RouteCache<QueueRoute>()
  /** Route lookups for queues not in `#routes`: shared while under way, misses remembered briefly. */
  readonly #routeMisses = new RouteMisses<QueueRoute>()
  /** The highest route epoch known of the meta group: tells made-up request epochs (#route). */
  readonly #epochCeiling = new EpochCeiling(() => this.#fetchRoutes(['']).then((r) => r.routeEpoch))
  /** The meta terms replica change steps were taken from, per group led here (MetaTermFence). */
  readonly #metaTerms = new MetaTermFence()
  /** The node's own SDK client (dead letters it moves), once started. */
  #ownClient: OwnClient | undefined
  /** A refresh of the cached routes is under way (#refreshCachedRoutes). */
  #refreshingRoutes = false
  readonly #calls: PeerCalls
  readonly #controller: Controller
  readonly #mover: PartitionMover
  readonly #timers: ReturnType<typeof setInterval>[] = []
  readonly #prng: Prng
  #engine: LevelEngine | undefined
  #mark: DurabilityMark | undefined
  #store: LogStore | undefined
  #raft: RaftHost | undefined
  #transport: PeerTransport | undefined
  #images: NodeImages | undefined
  #meta: MetaMachine | undefined
  /** Hosting or dropping the meta replica, when under way (see #hostMeta, #leaveMeta). */
  #hostingMeta: Promise<void> | undefined
  /** Since when no meta leader has answered this node's heartbeats (undefined: one did last). */
  #heartbeatFailingSince: number | undefined
  #heartbeatSilenceLoggedMs = 0
  /** Holds a founder's meta replica back while its data dir was empty at its start (host/founder-gate.ts). */
  #founderGate: FounderGate | undefined
  #leavingMeta: Promise<void> | undefined
  #facts: NodeFacts | undefined
  /**
   * The founding members this node was started with: `--initial-meta`, or, when the start gives
   * neither it nor `--join`, the data dir's kept cluster entry (from start() on).
   */
  #initialMeta: readonly Member[]
  /** The join address this node was started with: `--join`, or the kept one as `#initialMeta`. */
  #join: string
  /** Notified whenever the meta replica applies entries or a snapshot. */
  readonly #metaApplied = new ChangeSignal()
  #metaLeaderId = ''
  /** The cluster's format level from the meta leader's last heartbeat answer (as kept on disk until then). */
  #formatLevel = 1
  #heartbeatSeed = 0
  #fatal: unknown
  readonly #onFailStop: ((error: Error) => void) | undefined
  #port = 0
  readonly #unsent: UnsentAnswers
  readonly #longPolls: LongPollTally = { open: 0 }
  readonly #openCalls: OpenCalls = { open: 0 }
  #listener: GrpcListener | undefined
  #serving = false
  /** Set when stop() begins. */
  #stopBegan = false

  constructor(config: ServerConfig, options: NodeOptions = {}) {
    this.config = config
    this.log = options.log ?? silentLogger()
    this.#onFailStop = options.onFailStop
    this.metrics = new NodeMetrics(config.nodeId)
    this.#credentials = new NodeCredentials(config)
    this.access = new AccessControl({
      peerToken: config.peerToken,
      peerIds: config.tlsPeerIds,
      tokens: options.tokens,
      metaTokens: () => {
        const meta = this.#metaVoter()
        return meta ? this.#metaTokens.fromRegistry(meta.state.tokens) : this.#metaTokens.current()
      },
    })
    this.#unsent = new UnsentAnswers(
      { connectionBytesMax: config.connectionUnsentMaxMb * MIB, totalBytesMax: config.unsentMaxMb * MIB },
      (reader) =>
        this.log.warn(
          { remote: reader.remote, unsentBytes: reader.unsentBytes },
          reader.limit === 'connection'
            ? `mq-server: closed the connection of ${reader.remote}: it left ${mib(reader.unsentBytes)} MiB of answers unread, more than --connection-unsent-max-mb ${config.connectionUnsentMaxMb} (a client that stopped reading; what it had leased is delivered again after its visibility timeout)`
            : `mq-server: closed the connection of ${reader.remote}: the node's unread answers passed --unsent-max-mb ${config.unsentMaxMb} and it held the most (${mib(reader.unsentBytes)} MiB; what it had leased is delivered again after its visibility timeout)`,
        ),
    )
    this.metrics.addSource('mq_grpc', 'gRPC port', () => ({
      connectionsRefused: this.#listener?.refused() ?? 0,
      slowReadersClosed: this.#unsent.closed,
    }))
    this.metrics.addGaugeSource(
      'mq_grpc_connections',
      'gRPC connections open (clients and peers)',
      () => this.#listener?.connections() ?? 0,
    )
    this.metrics.addGaugeSource(
      'mq_lease_polls_open',
      'Lease long polls this node holds open, waiting for messages',
      () => this.#longPolls.open,
    )
    this.metrics.addGaugeSource(
      'mq_grpc_calls_open',
      "gRPC calls this node is serving now (peers' Raft streams not counted)",
      () => this.#openCalls.open,
    )
    this.metrics.addGaugeSource(
      'mq_grpc_unsent_answer_bytes',
      'Bytes of answers written that clients have not read yet, as last measured',
      () => this.#unsent.unsentBytes,
    )
    this.#server = new Server({
      ...grpcServerOptions(),
      // Channelz stays on here: grpc-js 1.14's forceShutdown() destroys only the sessions its
      // channelz handler tracked, so without it open peer streams kept a stopped server alive.
      // Outermost first in effect last: the RPC interceptor times and logs what auth refuses too.
      // Innermost first (grpc-js wraps the call in them in order): the unsent-answers count
      // reads the HTTP/2 stream off the call it is given.
      interceptors: [
        unsentAnswersInterceptor(this.#unsent, () =>
          this.log.warn(
            'mq-server: this grpc-js does not show its HTTP/2 streams to interceptors: answers clients leave unread are not bounded (--connection-unsent-max-mb, --unsent-max-mb)',
          ),
        ),
        rpcInterceptor(this.metrics, this.log, config.nodeId),
        authInterceptor(this.access, this.log),
        openCallsInterceptor(this.#openCalls),
      ],
    })
    let seed = 0
    for (const c of config.nodeId) seed = (Math.imul(seed, 31) + c.charCodeAt(0)) >>> 0
    this.#prng = new Prng(seed ^ Date.now())
    this.#initialMeta = config.initialMeta
    this.#join = config.join
    for (const m of config.initialMeta) this.#addresses.set(m.nodeId, m.address)
    this.#addresses.set(config.nodeId, config.advertise)
    this.#calls = new PeerCalls(config.peerToken, 1_000, () => this.#credentials.peer())
    // Read when the controller asks: the founders may come from the data dir (start()).
    const founders = () => this.#initialMeta.length
    const steady = steadyClock()
    this.#controller = new Controller({
      // The meta group's clock (raft-core's group clock; the controller acts only while this node
      // leads the meta group): the times a meta leader records (a node's silence, markSilent) and
      // the next one compares with its own are then of one clock, however far apart the two
      // nodes' clocks are. Before the Raft host exists: a steady clock.
      nowMs: () => this.#raft?.groupClockMs(META_GROUP) ?? steady(),
      nodeId: config.nodeId,
      // A cluster founded by fewer nodes than the replication factor creates its groups on the
      // founders, then grows them as nodes join.
      get replicas() {
        return Math.min(config.replicationFactor, founders() > 0 ? founders() : config.replicationFactor)
      },
      replicationFactor: config.replicationFactor,
      dataGroups: config.dataGroups,
      replaceDeadAfterMs: config.replaceDeadAfterMs,
      replicaStallMs: config.replicaStallMs,
      calls: this.#calls,
      log: this.log,
      leaderState: () => (this.#isMetaLeader() ? this.#meta?.state : undefined),
      metaTerm: () => {
        try {
          return this.#raft?.status(META_GROUP).term ?? 0
        } catch {
          return 0 // no meta replica here (any more)
        }
      },
      propose: (command) => this.#proposeMeta(command),
      barrier: async () => {
        await this.#metaPort().read()
      },
      notLeader: () => this.#metaLeaderHint(),
      transferMetaLeader: (toNodeId) => {
        try {
          this.#raft?.transferLeader(META_GROUP, toNodeId)
        } catch (error) {
          throw toWireError(error, META_GROUP, (id) => this.#addresses.get(id))
        }
      },
      metaMembership: () => this.#metaMembership(),
      changeMetaMembers: async (change) => {
        if (!this.#raft) throw new UnavailableError('the node is starting')
        const leader = {
          assertLeader: () => {
            if (!this.#isMetaLeader()) throw this.#metaLeaderHint()
          },
        }
        return changeReplicas(this.#raft, leader, { groupId: META_GROUP, ...change }, (id) =>
          this.#addresses.get(id),
        )
      },
    })
    this.#mover = new PartitionMover(
      { port: (groupId) => this.#dataGroups.get(groupId)?.port, formatLevel: () => this.#formatLevel },
      this.#calls,
      config.nodeId,
      {},
      this.log,
    )
  }

  get port(): number {
    return this.#port
  }

  /** Credentials for calling this cluster as a client (TLS settings as for peers). */
  clientCredentials(): ChannelCredentials {
    return this.#credentials.peer()
  }

  /**
   * Reads the token file (`--auth-file`) and the TLS files again (mq-server reloads on
   * SIGHUP): calls and new connections from now on use them. All or nothing: a file that is
   * missing or invalid throws ConfigError naming it, and the node keeps what it had.
   */
  reload(): { readonly tls: boolean; readonly tokens: number | undefined } {
    const tokens = this.config.authFile ? loadTokenFile(this.config.authFile) : undefined
    const tls = this.#credentials.reload()
    if (tokens) this.access.replaceTokens(tokens)
    return { tls, tokens: tokens?.length }
  }

  /** The certificate for the HTTP port with `--http-tls` (the node's own, following reloads). */
  httpTls(): HttpTls | undefined {
    return this.#credentials.httpTls()
  }

  /** Opens storage, starts the Raft host and binds the gRPC server. Rejects naming what failed. */
  async start(): Promise<void> {
    const entryGiven = this.config.initialMeta.length > 0 || this.config.join !== ''
    // Nothing is created for a start that could not find a cluster (a mistyped --data-dir).
    if (!entryGiven && !existsSync(join(this.config.dataDir, 'db')))
      throw new Error(`data dir ${this.config.dataDir}: ${NO_CLUSTER_ENTRY}`)
    try {
      makeDirs(this.config.dataDir)
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      throw new Error(
        code === 'EEXIST' || code === 'ENOTDIR'
          ? `data dir ${this.config.dataDir} is not a directory (a file, or under one): give a directory, or a path to create`
          : `cannot create data dir ${this.config.dataDir}: ${(error as Error).message}`,
        { cause: error },
      )
    }
    this.#engine = await LevelEngine.open(join(this.config.dataDir, 'db'), {
      onCorruption: (error, quarantineFailure) => this.#damaged(error, quarantineFailure),
    })
    // A database holding nothing yet: a new node, or one whose data dir was wiped.
    const newDatabase = await holdsNothing(this.#engine)
    // Before anything writes: a write-ahead log that lost synced batches (cut short) fails here.
    const mark = await DurabilityMark.open(this.#engine, this.#engine.path)
    this.#mark = mark
    this.metrics.addSource('mq_durability_mark', 'Durability mark (MQ-DURABLE) of the database', () => ({
      ...mark.stats(),
    }))
    this.#store = new LogStore(this.#engine, { onBatch: this.metrics.onStorageBatch, mark: this.#mark })
    // Every data group's log is read back (and checked) before any group takes part in Raft:
    // a node with a damaged log refuses to start instead of voting in the groups read first.
    // A data group's removal a crash cut short is finished first (it is never opened half deleted).
    for (const groupId of await this.#store.finishRemovals())
      this.log.info(`mq-server: finished removing data group ${groupId} and its storage`)
    const groupsOnDisk = await this.#store.groupIdsOnDisk()
    const dataGroupsOnDisk = groupsOnDisk.filter((g) => g !== META_GROUP)
    for (const groupId of dataGroupsOnDisk) await this.#store.openGroup(groupId)
    const store = this.#store
    const engine = this.#engine
    try {
      this.#facts = await NodeFacts.open(
        {
          get: (key) => engine.get(key),
          write: (ops) => store.commit.write(ops),
        },
        newDatabase,
        this.config.nodeId,
        { initialMeta: this.config.initialMeta, join: this.config.join },
      )
    } catch (error) {
      throw new Error(`data dir ${this.config.dataDir}: ${(error as Error).message}`, { cause: error })
    }
    const kept = this.#facts.clusterEntry
    // A node the cluster it joined accepted is no founder: --initial-meta naming it bootstrapped
    // a meta group of its own on this data dir (its cluster down meanwhile: a second cluster).
    if (this.config.initialMeta.length > 0 && kept && kept.join !== '' && !this.#facts.fresh)
      throw new Error(
        `data dir ${this.config.dataDir}: it joined a cluster through ${kept.join}; --initial-meta founds a new one: start it without --initial-meta (it resumes its cluster), or give a new data dir to found a cluster`,
      )
    // Started with neither flag: as with the flag its data dir was first started with.
    if (!entryGiven && kept) {
      this.#initialMeta = kept.initialMeta
      this.#join = kept.join
      for (const m of kept.initialMeta)
        if (m.nodeId !== this.config.nodeId) this.#addresses.set(m.nodeId, m.address)
      this.log.info(
        kept.join !== ''
          ? `mq-server: node ${this.config.nodeId} resumes the cluster it joined through ${kept.join} (kept in its data dir)`
          : `mq-server: node ${this.config.nodeId} resumes the cluster founded by ${kept.initialMeta.map((m) => `${m.nodeId}=${m.address}`).join(',')} (kept in its data dir)`,
      )
    }
    // The cluster's level this data dir last heard of, above what this process runs (an older
    // version, or a lower --format-level): its logs may hold entries this version cannot read,
    // and the cluster refuses it anyway (a level never goes down). Stopped before any group
    // takes part in Raft or applies its log (the logs were only read back and checked above).
    const ownLevel = Math.min(FORMAT_LEVEL, this.config.formatLevel)
    if (this.#facts.formatLevel > ownLevel)
      throw new Error(
        `data dir ${this.config.dataDir}: ${belowClusterLevelMessage(this.config.nodeId, ownLevel, this.#facts.formatLevel)}`,
      )
    this.#formatLevel = this.#facts.formatLevel
    // The meta voters' last known addresses, newer than the configured ones: a meta replica
    // must reach the other voters before there is a meta leader to learn addresses from.
    for (const seed of this.#facts.metaSeeds)
      if (seed.nodeId !== this.config.nodeId) this.#addresses.set(seed.nodeId, seed.address)
    const images = new NodeImages({
      nodeId: this.config.nodeId,
      engine: this.#engine,
      write: (ops) => store.commit.write(ops),
      calls: this.#calls,
      addressOf: (id) => this.#addresses.get(id),
      raft: () => this.#raft,
      onFetchError: (groupId, error) =>
        this.log.warn(
          { group: groupId, err: error },
          `group ${groupId}: fetching a snapshot image, or deleting a staged one no longer needed, stopped (${(error as Error).message}); the leader's next try (or the next sweep, every 10 s) goes on`,
        ),
      onStaged: (groupId, s) =>
        this.log.info(
          { group: groupId, ...s },
          `group ${groupId}: staged snapshot image ${s.imageId} at index ${s.index} (${s.keys} keys, ${(s.bytes / 2 ** 20).toFixed(1)} MiB in ${s.ms} ms); installing it`,
        ),
    })
    this.#images = images
    this.metrics.addSource('mq_images_served', 'Snapshot images this node made for followers', () => ({
      ...images.store.stats,
    }))
    this.metrics.addSource('mq_images_staged', 'Snapshot images this node fetched from leaders', () => ({
      ...images.stager.stats,
    }))
    const transport = new PeerTransport(
      {
        nodeId: this.config.nodeId,
        token: this.config.peerToken,
        resolve: (id) => this.#addresses.get(id),
        // A peer whose connections close is most likely dead: the groups it led elect at once.
        onPeerDown: (id) => this.#raft?.leaderGone(id),
        credentials: (id) => this.#credentials.peerFor(id),
      },
      (groupId, message, fromNode) => {
        // A data group's Snap carrying an image handle waits until the image is staged (a
        // group not hosted here drops everything, so it stages nothing either).
        if (
          groupId !== META_GROUP &&
          (!this.#dataGroups.has(groupId) || !images.offer(groupId, message, fromNode))
        )
          return
        this.#raft?.receive(groupId, message)
      },
    )
    this.#transport = transport
    this.metrics.addSource('mq_peer', 'Peer transport (Raft messages)', () => ({ ...transport.stats }))
    this.metrics.addGaugeSource(
      'mq_peer_queued_bytes',
      'Bytes of Raft messages (entries, snapshot chunks) waiting to be written to peers',
      () => transport.queuedBytes,
    )
    this.#raft = new RaftHost({
      transport: observedTransport(transport, this.metrics),
      durability: this.#store.durability,
      // The steady clock lets a new leader continue its predecessor's group clock (raft-core
      // README, "Timestamps"; "Clocks" in this app's README).
      clock: { nowMs: () => Date.now(), monoMs: () => performance.now() },
      onFatal: (error) => this.#die(error),
      logBytesMax: this.config.logMemoryMb * 1024 * 1024,
      onSnapshotTooLarge: (groupId, error) =>
        this.log.warn(
          { group: groupId, err: error },
          `group ${groupId}: its state is too large for a snapshot; the log stays uncompacted (in memory and on disk) until a snapshot fits: ${error.message}`,
        ),
    })
    const raft = this.#raft
    this.metrics.addSource('mq_raft_host', 'Raft host of this node (all groups)', () => ({
      ...raft.stats,
    }))
    this.metrics.addGaugeSource(
      'mq_raft_host_proposal_bytes',
      'Bytes of proposals waiting to be applied in all groups of this node (bounded: 512 MiB)',
      () => raft.inflightBytes,
    )
    // A founder that never left bootstraps the meta group; a node added to it later finds
    // its replica on disk. A founder whose data dir was empty waits at its gate (it may have
    // lost its data: its vote must not count again) until the cluster is found new or the
    // meta leader accepts it.
    const founder = this.#initialMeta.some((m) => m.nodeId === this.config.nodeId) && !this.#facts.leftMeta
    if (groupsOnDisk.includes(META_GROUP) || (founder && !this.#facts.fresh)) await this.#hostMeta(founder)
    else if (founder) this.#founderGate = this.#newFounderGate()
    for (const groupId of dataGroupsOnDisk) await this.#addDataGroup(groupId, [], false)
    this.#server.addService(HealthService, this.health.handlers())
    this.#server.addService(PeerService, {
      raft: transport.handleRaft,
      probe: unaryHandler(async () => ({ nodeId: this.config.nodeId, metaPristine: this.#metaPristine() })),
      heartbeat: unaryHandler(async (req: HeartbeatRequest) => {
        const answer = await this.#controller.onHeartbeat(req)
        const tokens = this.#meta?.state.tokens
        if (!tokens) throw this.#metaLeaderHint()
        return { ...answer, ...this.#metaTokens.forHeartbeat(tokens, req.tokensFingerprint) }
      }),
      // Peer methods need the cluster secret: the auth interceptor checks it (auth/access.ts).
      movePartition: unaryHandler(async (req) => this.#mover.move(req)),
      importPartition: unaryHandler(async (req) => this.#mover.import(req)),
      fetchImage: unaryHandler(async (req) => images.fetch(req)),
      fencePartitions: unaryHandler(async (req: FencePartitionsRequest) => {
        if (!parseStoredQueueName(req.storedAs))
          throw new InvalidArgumentError(
            `${JSON.stringify(req.storedAs)} is not a stored queue name (name#id)`,
          )
        const partitions = [...new Set(req.partitions)]
        const outside = partitions.find((p) => !Number.isInteger(p) || p < 0 || p >= QUEUE_PARTITIONS_MAX)
        if (outside !== undefined) {
          throw new InvalidArgumentError(
            `partition ${outside} of ${req.storedAs} is outside 0-${QUEUE_PARTITIONS_MAX - 1}: nothing fenced`,
          )
        }
        const group = this.#dataGroups.get(req.groupId)?.port
        if (!group) throw new UnavailableError(`this node holds no replica of data group ${req.groupId}`)
        group.assertLeader()
        // An entry per partition, proposed together; a fence already applied changes nothing.
        // `retire` also drops the partition, and its fence is lifted once the group keeps
        // RETIRED_MAX later retirements and it is 10 min old; below its level (replicas that
        // cannot read it) a plain fence, kept for good.
        // From FORMAT_LEVEL_MOVE_ABORT a `final` one: a fence a move set stays, whatever the
        // move (an abort's `unfence` landing after it would serve the partition again).
        const level = this.#formatLevel
        const command = (partition: number): DataCommand =>
          level < FORMAT_LEVEL_RETIRE
            ? { type: 'fence', queue: req.storedAs, partition }
            : {
                type: 'retire',
                queue: req.storedAs,
                partition,
                ...(level >= FORMAT_LEVEL_MOVE_ABORT ? { final: true } : {}),
              }
        const results = await Promise.all(partitions.map((partition) => group.propose(command(partition))))
        const failed = results.find((r) => r.type !== 'fenced')
        if (failed) throw new InternalError(`fencing ${req.storedAs} in group ${req.groupId}: ${failed.type}`)
        return {}
      }),
      changeReplicas: unaryHandler(async (req) => {
        if (!this.#raft) throw new UnavailableError('the node is starting')
        const port = this.#dataGroups.get(req.groupId)?.port
        // A replica that does not lead answers NOT_LEADER (with its hint) before any meta read.
        port?.assertLeader()
        const refused =
          port && (await this.#metaTerms.refusal(req.groupId, req.metaTerm, () => this.#metaTermNow()))
        if (refused) throw new UnavailableError(refused, { groupId: req.groupId })
        return changeReplicas(
          this.#raft,
          port,
          req,
          (id) => this.#addresses.get(id),
          (groupId, id) => this.#images?.pagesServed(groupId, id) ?? 0,
          (groupId, id) => this.#images?.wholeImageServed(groupId, id),
        )
      }),
    })
    this.#server.addService(
      MetaService,
      metaHandlers(this.#metaPort(), this.#controller.port(), {
        queueScope: (ctx) => this.access.queueScope(ctx.metadata),
        // Two tokens of one name would be one caller in the audit log, with two sets of roles.
        tokenNameTaken: (name) =>
          this.access.hasFileToken(name)
            ? `token name ${name} is taken by a token of this node's --auth-file: pick another name`
            : undefined,
      }),
    )
    this.#server.addService(
      QueueService,
      queueHandlers(this.#dataNodePort(), {}, { longPolls: this.#longPolls }),
    )
    this.#listener = await listenGrpc(
      this.#server,
      this.#credentials.server(),
      this.config.listen,
      { connectionsMax: this.config.connectionsMax, perAddressMax: this.config.connectionsPerAddressMax },
      (refused, last) =>
        this.log.warn(
          { refused, last },
          `mq-server: refused ${refused} connection(s) (the last ${last}); at most --connections-max ${this.config.connectionsMax} are open at once, ${Math.min(this.config.connectionsPerAddressMax, this.config.connectionsMax)} from one address (--connections-per-address-max), and the process's open-file limit (ulimit -n) must allow them`,
        ),
    )
    this.#port = this.#listener.port
    // Asked once it serves: a wrong --advertise (another node's, or one nobody reaches) only
    // showed as replica changes to this node that never ended.
    void advertiseProblem(
      this.config.nodeId,
      this.config.advertise,
      (address) =>
        this.#calls.call<ProbeResponse>(
          address,
          (c, md, opts, cb) => c.peer.probe({ nodeId: this.config.nodeId }, md, opts, cb),
          PROBE_CALL_MS,
        ),
      // Not on once a stop began (its peer clients are closed: a try would open another).
      { wanted: () => !this.#stopBegan && this.#fatal === undefined },
    ).then((problem) => {
      if (problem) this.log.warn(`mq-server: ${problem}`)
    })
    this.#timers.push(setInterval(() => this.#tick(), this.config.tickMs))
    this.#timers.push(setInterval(() => void this.#heartbeat(), HEARTBEAT_MS))
    const gate = this.#founderGate
    if (gate) {
      this.#timers.push(setInterval(() => void gate.round(Date.now()), FOUNDER_PROBE_MS))
      void gate.round(Date.now())
    }
    this.#timers.push(setInterval(() => void this.#controller.round(), CONTROLLER_MS))
    const sweeper = new OrphanSweeper({
      groups: () => this.#dataGroupPorts(),
      liveQueues: async (names) => {
        // Fresh routes for the cache too (#fetchRoutes).
        const { routes } = await this.#fetchRoutes(names)
        return new Map(routes.map((r) => [r.queue, r.queueId]))
      },
      formatLevel: () => this.#formatLevel,
    })
    const sweep = async () => {
      for (const { groupId, partition, importing } of await sweeper.sweep()) {
        const name = `${parseStoredQueueName(partition.queue)?.queue ?? partition.queue}/${partition.index}`
        this.log.info(
          importing
            ? `mq-server: data group ${groupId} dropped the unfinished import of ${name} (its queue was deleted)`
            : `mq-server: data group ${groupId} dropped partition ${name} of a deleted queue`,
        )
      }
    }
    this.#timers.push(setInterval(() => void sweep(), ORPHAN_SWEEP_MS))
    const ttl = new TtlTicker({ groups: () => this.#dataGroupPorts(), formatLevel: () => this.#formatLevel })
    this.#timers.push(setInterval(() => void ttl.round(), TTL_ROUND_MS))
    this.#startDeadLetterForwarder()
    const raftEvents = new RaftEventLog(this.log)
    this.#timers.push(setInterval(() => raftEvents.observe(this.view().groups()), RAFT_EVENTS_MS))
    this.health.set('', true)
    this.#serving = true
  }

  /**
   * Moves dead letters to the dead-letter queues their queues name (host/dead-letter-forwarder.ts),
   * through this node's own client; counts them in mq_dead_letters_*_total and logs what stays.
   */
  #startDeadLetterForwarder(): void {
    const own = new OwnClient({
      advertise: this.config.advertise,
      credentials: this.#credentials.peer(),
      peerToken: this.config.peerToken,
    })
    this.#ownClient = own
    const forwarder = new DeadLetterForwarder({
      groups: () => this.#dataGroupPorts(),
      formatLevel: () => this.#formatLevel,
      deadLetterQueueOf: async (queue, queueId) => {
        const route = await this.#route(queue, 0).catch(() => undefined)
        return route?.queueId === queueId ? (route.config?.deadLetterQueue ?? '') : ''
      },
      placedIn: async (queue, queueId, partition, groupId) => {
        const placed = (route: QueueRoute | undefined) =>
          route?.queueId === queueId &&
          route.partitions.some((p) => p.partition === partition && p.groupId === groupId)
        const route = await this.#route(queue, 0).catch(() => undefined)
        if (placed(route) || this.#metaVoter()) return placed(route)
        // A cached route is not refreshed by a move: one into this group is checked afresh.
        const fresh = await this.#fetchRoutes([queue]).catch(() => undefined)
        return placed(fresh?.routes.find((r) => r.queue === queue))
      },
      forward: (target, messages) => own.send(target, messages),
    })
    const log = new DeadLetterLog(this.log)
    this.metrics.addSource(
      'mq_dead_letters',
      "Dead-lettered messages moved to their queue's dead-letter queue",
      () => ({
        ...log.counts,
      }),
    )
    this.#timers.push(
      setInterval(() => void forwarder.round().then((r) => log.note(r)), DEAD_LETTER_ROUND_MS),
    )
  }

  /**
   * Shuts down gracefully: hands the leadership of every group it leads to another voter
   * (waiting up to `transferMs`, while ticks still run), then stops the gRPC server (running
   * calls get `graceMs`), flushes and closes storage.
   */
  async stop(graceMs = 3_000, transferMs = 2_000): Promise<void> {
    this.#stopBegan = true
    this.#serving = false
    this.health.set('', false)
    await this.#transferLeadershipAway(transferMs)
    this.health.close()
    for (const t of this.#timers) clearInterval(t)
    this.#listener?.close()
    await new Promise<void>((resolve) => {
      // Peers end their Raft streams only when they stop too, and grpc-js waits for every open
      // call: those are ended once no other call is open (a call still running may wait on
      // what peers send, a follower's read on its leader's answer).
      const peersEnded = setInterval(() => {
        if (this.#openCalls.open > 0) return
        clearInterval(peersEnded)
        this.#transport?.endInbound()
      }, STOP_POLL_MS)
      const timer = setTimeout(() => {
        clearInterval(peersEnded)
        this.#server.forceShutdown()
        resolve()
      }, graceMs)
      this.#server.tryShutdown(() => {
        clearInterval(peersEnded)
        clearTimeout(timer)
        resolve()
      })
    })
    // What grpc-js left half-closed: a paused peer's connection kept the process alive for good.
    this.#listener?.destroyAll()
    await this.#ownClient?.close()
    this.#transport?.close()
    this.#calls.close()
    // Before the store closes: Raft messages still arriving on open peer streams are dropped.
    await this.#raft?.stop()
    // Applies still running write to the store: closed under them, they failed and a clean stop
    // logged a fatal error (nothing lost: the entries apply again at the next start).
    await settledWithin(
      [...this.#dataGroups.values()].map((local) => local.machine.settled()),
      STOP_SETTLE_MS,
    )
    await this.#images?.close()
    // Dropped partitions' sweeps stop after their page (their tombstones carry on at restart).
    await Promise.all([...this.#dataGroups.values()].map((local) => local.machine.machine.close()))
    await this.#store?.close().catch(() => {})
    await this.#mark?.close().catch(() => {})
    await this.#engine?.close().catch(() => {})
  }

  async #transferLeadershipAway(timeoutMs: number): Promise<void> {
    const raft = this.#raft
    if (!raft || this.#fatal !== undefined) return
    const led = (): number[] => raft.groupIds().filter((g) => raft.status(g).role === Role.Leader)
    const handOver = (groups: readonly number[]): void => {
      for (const groupId of groups) {
        // One under way is left to finish (switching targets would start it over).
        if (raft.status(groupId).leadTransferee !== '') continue
        const to = stopTransferTarget(raft, groupId)
        if (!to) continue
        try {
          raft.transferLeader(groupId, to)
        } catch {
          // Lost the leadership meanwhile: nothing to do.
        }
      }
    }
    const leading = led()
    // A monotonic clock: a wall clock stepped back while the node stops held it here that long.
    const startMs = performance.now()
    const deadline = startMs + timeoutMs
    for (let now = leading; now.length > 0 && performance.now() < deadline; now = led()) {
      // Each pass: one led again (the meta leader's balancing handed it back meanwhile) is
      // handed over again, once its earlier transfer ended.
      handOver(now)
      await new Promise((r) => setTimeout(r, 20))
    }
    if (leading.length > 0) {
      const still = led().length
      // What it led and leads no more: a node with no other voter to hand to (one node) said it
      // handed all of them away, "(N still led)" beside it.
      const handedOver = Math.max(0, leading.length - still)
      this.log.info(
        { handedOver, stillLed: still, ms: Math.round(performance.now() - startMs) },
        `mq-server: node ${this.config.nodeId} handed the leadership of ${handedOver} group(s) away (${still} still led)`,
      )
    }
  }

  /**
   * A replica's Raft options. Data groups leave a new commit index to the next App or
   * heartbeat (`commitBroadcast` false): their followers serve nothing, and under a closed
   * loop most commits would otherwise cost an empty App and its reply per follower. The meta
   * group broadcasts, since its followers answer reads (ReadIndex waits for their commit).
   * A replica created with nothing joins by a snapshot listing it as a learner
   * (`joinBySnapshot`) once every node knows to send one (format level 31): it may be this
   * node's replica of a group it hosted before, under the same id.
   */
  #raftOptions(group: 'meta' | 'data') {
    return {
      id: this.config.nodeId,
      prng: new Prng(this.#prng.nextU32()),
      electionTicks: this.config.electionTicks,
      heartbeatTicks: this.config.heartbeatTicks,
      commitBroadcast: group === 'meta',
      stampCatchUp: GROUP_CLOCK_CATCH_UP,
      joinBySnapshot: this.#formatLevel >= FORMAT_LEVEL_JOIN_BY_SNAPSHOT,
    }
  }

  #tick(): void {
    if (this.#fatal !== undefined) return
    try {
      this.#raft?.tick()
    } catch (error) {
      this.#die(error)
    }
  }

  /** A read found damaged data; the database is quarantined by now. Stops serving from it. */
  #damaged(error: Error, quarantineFailure?: Error): void {
    // Without the marker (the disk refused it) a restart would serve from the damaged data.
    const quarantined =
      quarantineFailure === undefined
        ? 'its database is quarantined'
        : `its database could NOT be quarantined (${quarantineFailure.message}): do not start it again on this data dir`
    this.#die(
      error,
      `mq-server: node ${this.config.nodeId} found damaged data (${error.message}); ${quarantined} and the node stops: replace it under a new node id (README, "Damaged data files")`,
    )
    this.#onFailStop?.(error)
  }

  /**
   * Stops serving for good, logging one fatal line: `why`, else that it stopped after `error`.
   * A reason given after the node stopped is still logged (damaged data found meanwhile).
   */
  #die(error: unknown, why?: string): void {
    if (this.#fatal !== undefined) {
      if (why !== undefined) this.log.fatal({ err: error }, why)
      return
    }
    this.#fatal = error
    this.#serving = false
    this.log.fatal(
      { err: error },
      why ?? `mq-server: node ${this.config.nodeId} stopped serving after a fatal error`,
    )
    this.health.set('', false)
    // Fail-stop in Raft too: a replica whose state machine failed must not vote, acknowledge
    // appends or take over a leadership handed to it (the host calls back here; already dead).
    this.#raft?.halt(error)
  }

  // ---- the meta group -------------------------------------------------------------------

  /**
   * Hosts a replica of the meta group (idempotent). A founder's starts with the founding
   * voters (the first entries of every founder's log); any other replica starts empty and
   * learns the state and the membership from the meta leader's log or a snapshot.
   */
  #hostMeta(founder: boolean): Promise<void> {
    this.#hostingMeta ??= (async () => {
      const raft = this.#raft
      const store = this.#store
      if (!raft || !store || this.#meta) return
      const meta = new MetaMachine()
      meta.onApplied = () => this.#metaApplied.notify()
      // The founders it was first opened with, whatever --initial-meta says now: they are the
      // replica's membership until its first snapshot (a changed list changed the voters).
      let founderIds = founder ? this.#initialMeta.map((m) => m.nodeId) : undefined
      const kept = this.#facts?.metaFounders
      if (founderIds && kept === undefined) await this.#facts?.keepMetaFounders(founderIds)
      else if (founderIds && kept) {
        // Only for a list given now (a kept cluster entry may predate the founders kept).
        if (this.config.initialMeta.length > 0 && [...founderIds].sort().join() !== [...kept].sort().join())
          this.log.warn(
            `mq-server: --initial-meta names ${founderIds.join(', ')}, but the meta group this data dir holds was founded by ${kept.join(', ')}: those are kept (--initial-meta counts at a cluster's first start only; mq cluster meta-voters sets the meta group's size)`,
          )
        founderIds = [...kept]
      }
      const founders = founderIds ? votersConf(founderIds) : undefined
      // A leave still under way (#leaveMeta) need not be awaited: it stages the old replica's
      // range clear in the same synchronous step that unsets #meta, and openGroup makes what
      // is staged durable before it reads, so this replica starts from an empty log (and the
      // Readies of the removed one still in the Raft host's pipeline reach neither this replica
      // nor its peers: the host tells replicas apart, not only group ids).
      raft.addGroup({
        groupId: META_GROUP,
        raft: this.#raftOptions('meta'),
        storage: await store.openGroup(META_GROUP, founders),
        stateMachine: observedStateMachine(META_GROUP, meta, this.metrics),
      })
      this.#meta = meta
      if (!founder) this.log.info(`mq-server: node ${this.config.nodeId} hosts a replica of the meta group`)
    })().finally(() => {
      this.#hostingMeta = undefined
    })
    return this.#hostingMeta
  }

  /** The gate of a founder that started with an empty data dir: it opens by hosting the founder's meta replica. */
  #newFounderGate(): FounderGate {
    const self = this.config.nodeId
    return new FounderGate({
      self,
      founders: this.#initialMeta,
      probe: (f) =>
        this.#calls.call<ProbeResponse>(
          f.address,
          (c, md, opts, cb) => c.peer.probe({ nodeId: self }, md, opts, cb),
          PROBE_CALL_MS,
        ),
      open: () => {
        this.log.info(
          `mq-server: node ${self}, a founding member that started with an empty data dir, hosts its meta replica (the cluster is new, or the meta leader accepted this node)`,
        )
        this.#hostMeta(true).catch((error: unknown) =>
          this.log.error({ err: error }, 'cannot host a replica of the meta group'),
        )
      },
      waiting: (message) => this.log.warn(`mq-server: ${message}`),
    })
  }

  /**
   * Whether this node's meta replica holds no entry beyond the founding ones (Peer.Probe): it
   * never left a meta replica, and hosts none (a founder still at its gate, or a node never
   * added) or one whose log ends at the founding members' configuration entries (one per
   * founder, term 1: no leader's entry reached it, so nothing the meta group committed since
   * is missing from it).
   */
  #metaPristine(): boolean {
    if (this.#facts?.leftMeta !== false) return false
    if (!this.#meta) return this.#hostingMeta === undefined
    const lastIndex = this.#raft?.status(META_GROUP).lastIndex
    return lastIndex !== undefined && lastIndex <= this.#initialMeta.length
  }

  /**
   * Drops this node's meta replica, which the meta group removed (a committed change), and
   * deletes its storage. It first records (durably) that the node left, so a founder never
   * bootstraps the meta group again, even after a crash in between.
   */
  #leaveMeta(): Promise<void> {
    this.#leavingMeta ??= (async () => {
      await this.#hostingMeta
      const raft = this.#raft
      const store = this.#store
      if (!this.#meta || !raft || !store || !this.#facts) return
      await this.#facts.markLeftMeta()
      raft.removeGroup(META_GROUP)
      this.#meta = undefined
      await store.removeGroup(META_GROUP)
      this.log.info(`mq-server: node ${this.config.nodeId} left the meta group and deleted its replica`)
    })()
      .catch((error: unknown) => this.log.error({ err: error }, 'cannot drop the meta replica'))
      .finally(() => {
        this.#leavingMeta = undefined
      })
    return this.#leavingMeta
  }

  /** The ports of the data groups hosted here (leaders' background work looks at the led ones). */
  #dataGroupPorts(): DataGroupPort[] {
    return [...this.#dataGroups.values()].map((g) => g.port)
  }

  /**
   * This node's meta replica once it is a voter: what the node may answer from (tokens,
   * routes). A replica being added is a learner until it caught up, and empty before that.
   */
  #metaVoter(): MetaMachine | undefined {
    const meta = this.#meta
    return meta && this.#raft?.status(META_GROUP).conf.voters.includes(this.config.nodeId) ? meta : undefined
  }

  #metaMembership(): { voters: readonly string[]; learners: readonly string[] } {
    if (!this.#meta || !this.#raft) return { voters: [], learners: [] }
    const { voters, learners } = this.#raft.status(META_GROUP).conf
    return { voters, learners }
  }

  #isMetaLeader(): boolean {
    return this.#meta !== undefined && this.#raft?.status(META_GROUP).role === Role.Leader
  }

  #metaLeaderHint(): WireNotLeader {
    const leaderId = this.#meta
      ? this.#raft?.status(META_GROUP).lead || this.#metaLeaderId
      : this.#metaLeaderId
    const leaderAddress = leaderId ? (this.#addresses.get(leaderId) ?? '') : ''
    return new WireNotLeader(
      leaderId
        ? `not the meta leader; it is ${leaderId} at ${leaderAddress}`
        : 'no meta leader is known yet; retry shortly',
      { leaderId, leaderAddress, groupId: META_GROUP },
    )
  }

  async #proposeMeta(command: MetaCommand): Promise<MetaResult> {
    if (!this.#meta || !this.#raft) throw this.#metaLeaderHint()
    try {
      return (
        await this.metrics.timeAppend(
          META_GROUP,
          this.#raft.propose(META_GROUP, checkedEntry(META_GROUP, encodeMetaCommand(command))),
        )
      ).result as MetaResult
    } catch (error) {
      throw toWireError(error, META_GROUP, (id) => this.#addresses.get(id))
    }
  }

  #metaPort(): MetaGroupPort {
    return {
      propose: (command) => this.#proposeMeta(command),
      read: async () => {
        if (!this.#meta || !this.#raft) throw this.#metaLeaderHint()
        try {
          await this.#raft.readIndex(META_GROUP)
        } catch (error) {
          throw toWireError(error, META_GROUP, (id) => this.#addresses.get(id))
        }
        return this.#meta.state
      },
      term: () => (this.#meta ? (this.#raft?.status(META_GROUP).term ?? 0) : 0),
      leaderId: () => (this.#meta ? this.#raft?.status(META_GROUP).lead : this.#metaLeaderId) ?? '',
      membership: () => this.#metaMembership(),
      liveness: () => {
        // Liveness is the meta leader's soft state: a follower sends the caller to the leader.
        if (!this.#isMetaLeader()) throw this.#metaLeaderHint()
        return this.#controller.liveness()
      },
    }
  }

  // ---- the node's side of the heartbeat -----------------------------------------------------

  /**
   * Where to send a meta request: the known meta leader, else the next seed: the meta voters
   * the meta leader last named (kept on disk), then the founding members or the join address.
   */
  #metaAddress(): string {
    const leader = this.#metaLeaderId ? this.#addresses.get(this.#metaLeaderId) : undefined
    if (leader) return leader
    const configured = this.#initialMeta.length > 0 ? this.#initialMeta.map((m) => m.address) : [this.#join]
    const kept = this.#facts?.metaSeeds.map((m) => m.address) ?? []
    const seeds = [...new Set([...kept, ...configured])]
    return seeds[this.#heartbeatSeed++ % seeds.length] as string
  }

  #notePossibleLeader(error: unknown): void {
    const facts = (error as { facts?: { leaderId?: string; leaderAddress?: string } }).facts
    this.#metaLeaderId = facts?.leaderId ?? ''
    if (
      facts?.leaderId &&
      facts.leaderAddress &&
      this.#addresses.get(facts.leaderId) !== facts.leaderAddress
    ) {
      this.#addresses.set(facts.leaderId, facts.leaderAddress)
      // A hint may be older than the meta state's list (a replica behind): the next heartbeat
      // answer carries the list again, as every answer did before fingerprints.
      this.#nodesFingerprint = ''
    }
  }

  async #heartbeat(): Promise<void> {
    if (this.#fatal !== undefined || !this.#raft) return
    const raft = this.#raft
    const groups = [...this.#dataGroups.keys()].map((groupId) => {
      const s = raft.status(groupId)
      return { groupId, leaderId: s.lead, term: s.term, commitIndex: s.commit, appliedIndex: s.applied }
    })
    // A meta voter holds the tokens already: its fingerprint spares it the list.
    const metaVoter = this.#metaVoter()
    if (metaVoter) this.#metaTokens.fromRegistry(metaVoter.state.tokens)
    const request: HeartbeatRequest = {
      nodeId: this.config.nodeId,
      address: this.config.advertise,
      groups,
      tokensFingerprint: this.#metaTokens.fingerprint,
      hostsMeta: this.#meta !== undefined,
      formatLevel: this.config.formatLevel,
      storeId: this.#facts?.storeId ?? '',
      freshStore: this.#facts?.fresh ?? false,
      nodesFingerprint: this.#nodesFingerprint,
    }
    try {
      const response = await this.#call<HeartbeatResponse>((c, md, opts, cb) =>
        c.peer.heartbeat(request, md, opts, cb),
      )
      this.#metaLeaderId = response.metaLeaderId
      this.#heartbeatFailingSince = undefined
      // The meta leader accepted this node's store: a founder at its gate hosts its replica,
      // and the store is no longer new to the cluster (a new cluster registers its nodes
      // before it reaches the level that records stores: they then adopt theirs).
      this.#founderGate?.open()
      this.#facts
        ?.markAccepted()
        .catch((error: unknown) => this.log.warn({ err: error }, 'cannot keep that the node was accepted'))
      this.#formatLevel = formatLevelOf(response.formatLevel)
      this.#facts
        ?.setFormatLevel(this.#formatLevel)
        .catch((error: unknown) => this.log.warn({ err: error }, 'cannot keep the format level'))
      if (!this.#metaVoter()) {
        this.#metaTokens.fromHeartbeat(response.tokens, response.tokensFingerprint)
        this.#routes.forgetBefore(response.growEpoch)
        this.#refreshCachedRoutes(response.changedEpoch)
      } else this.#forgetDeletedRoutes(response.changedEpoch)
      // An empty list: the meta leader's is the one this node received last (it never shrinks here).
      for (const n of response.nodes) this.#addresses.set(n.nodeId, n.address)
      if (response.nodes.length > 0) this.#nodesFingerprint = response.nodesFingerprint
      if (response.hostMeta)
        this.#hostMeta(false).catch((error: unknown) =>
          this.log.error({ err: error }, 'cannot host a replica of the meta group'),
        )
      if (response.leaveMeta) void this.#leaveMeta()
      this.#facts
        ?.setMetaSeeds(response.metaMembers)
        .catch((error: unknown) => this.log.warn({ err: error }, 'cannot keep the meta seeds'))
      for (const g of response.groups) void this.#addDataGroup(g.groupId, g.replicas)
      for (const groupId of response.removedGroupIds) void this.#removeDataGroup(groupId)
      for (const t of response.transfers) {
        if (this.#transport?.isDown(t.toNodeId)) continue // it would hold proposals for nothing
        if (this.#dataGroups.has(t.groupId)) transferWhenCaughtUp(raft, t.groupId, t.toNodeId)
      }
    } catch (error) {
      if (error instanceof Error && saysNodeRemoved(error.message))
        this.#refused(error, removedNodeMessage(this.config.nodeId))
      else if (
        error instanceof Error &&
        (saysStoreReplaced(error.message) || saysBelowClusterLevel(error.message))
      )
        this.#refused(error, error.message)
      else {
        this.#notePossibleLeader(error)
        this.#heartbeatFailed(error)
      }
    }
  }

  /**
   * Says (a warning every HEARTBEAT_SILENCE_LOG_MS) that no meta leader has answered this
   * node's heartbeats for a while, and what the last try said: a wrong --join or
   * --initial-meta address, or a meta group without a leader, was silent at info level.
   */
  #heartbeatFailed(error: unknown): void {
    const now = Date.now()
    this.#heartbeatFailingSince ??= now
    if (now - this.#heartbeatFailingSince < HEARTBEAT_SILENCE_LOG_MS) return
    if (now - this.#heartbeatSilenceLoggedMs < HEARTBEAT_SILENCE_LOG_MS) return
    this.#heartbeatSilenceLoggedMs = now
    // An answer that is not HTTP/2: an HTTP port (a node's --http-listen).
    const httpPort = notGrpc(error)
      ? ": the address answers, but not in gRPC: is it a node's HTTP port (--http-listen) instead of its --listen address?"
      : ''
    this.log.warn(
      `mq-server: no meta leader has answered node ${this.config.nodeId}'s heartbeats for ${Math.round((now - this.#heartbeatFailingSince) / 1000)} s (the last try: ${(error as Error).message}); check the --join or --initial-meta addresses${httpPort}, and that a majority of the meta group is up`,
    )
  }

  /**
   * The cluster refuses this node: it forgot it (RemoveNode), or knows its id from another
   * store (a wiped data dir, a second process under the id). It stops, as with damaged data.
   */
  #refused(error: Error, why: string): void {
    if (this.#fatal !== undefined) return
    this.#die(error, `mq-server: ${why}; it stops`)
    this.#onFailStop?.(error)
  }

  /**
   * The meta group's term now: a linearizable read on a meta replica — this node's own when it
   * holds one (a follower's read goes to its leader), else the meta leader's (GetRoutes of no
   * queue; 0 from a version that does not say). Rejects with UNAVAILABLE when the read fails;
   * a NOT_LEADER hint, or none, moves the node's next meta calls on, as a heartbeat's failure does.
   */
  async #metaTermNow(): Promise<number> {
    try {
      if (this.#meta) {
        const port = this.#metaPort()
        await port.read()
        return port.term()
      }
      try {
        const r = await this.#call<GetRoutesResponse>((c, md, opts, cb) =>
          c.meta.getRoutes({ queues: [''] }, md, opts, cb),
        )
        return r.metaTerm
      } catch (error) {
        this.#notePossibleLeader(error)
        throw error
      }
    } catch (error) {
      throw new UnavailableError(
        `could not ask the meta group its term, which a replica change step is checked against: ${(error as Error).message}; retry shortly`,
      )
    }
  }

  /** One call to the meta leader (or a seed), with a deadline and the peer token. */
  #call<T>(fn: UnaryCall<T>): Promise<T> {
    return this.#calls.call(this.#metaAddress(), fn, META_CALL_MS)
  }

  // ---- data groups ----------------------------------------------------------------------

  /**
   * Hosts a replica of data group `groupId` (founding voters `replicas`); idempotent. Logs it
   * unless `announce` is false (a replica found on disk at start).
   */
  #addDataGroup(groupId: number, replicas: readonly string[], announce = true): Promise<void> {
    if (this.#dataGroups.has(groupId) || this.#removingGroups.has(groupId)) return Promise.resolve()
    let adding = this.#addingGroups.get(groupId)
    if (!adding) {
      adding = this.#openDataGroup(groupId, replicas)
        .then(() => {
          if (announce)
            this.log.info(`mq-server: node ${this.config.nodeId} hosts a replica of data group ${groupId}`)
        })
        .finally(() => this.#addingGroups.delete(groupId))
      adding.catch((error: unknown) =>
        this.log.error({ err: error, group: groupId }, `cannot host data group ${groupId}`),
      )
      this.#addingGroups.set(groupId, adding)
    }
    return adding
  }

  /**
   * Stops hosting data group `groupId` (the cluster removed it) and deletes its storage: its
   * log, its state machine's keys, its applied index. Idempotent.
   */
  #removeDataGroup(groupId: number): Promise<void> {
    let removing = this.#removingGroups.get(groupId)
    if (!removing) {
      removing = (async () => {
        await this.#addingGroups.get(groupId)?.catch(() => {})
        const local = this.#dataGroups.get(groupId)
        this.#raft?.removeGroup(groupId)
        this.#dataGroups.delete(groupId)
        // Its image fetch stops now, not after the waits below (minutes while partitions are
        // swept, and it went on fetching a whole image for the group being removed).
        const fetchStopped = this.#images?.stager.forget(groupId)
        // The apply chain may still be writing, and dropped partitions (those just moved out)
        // being swept: let both finish before the keys are deleted.
        await local?.machine.settled().catch(() => {})
        await local?.machine.machine.swept()
        await local?.machine.machine.close()
        // A page write of the fetch waiting for room in the group commit lands before the
        // range clear, not after it (the group came back on disk at the next start).
        await fetchStopped
        await this.#images?.forget(groupId)
        // A page of keys per write (a replica replaced with its backlog holds millions), under
        // a marker that has the next start finish a removal a crash cut short.
        await this.#store?.removeGroupInPages(groupId)
        this.log.info(
          { group: groupId },
          `mq-server: node ${this.config.nodeId} removed data group ${groupId} and its storage`,
        )
      })()
        .catch((error: unknown) =>
          this.log.error({ err: error, group: groupId }, `mq-server: cannot remove data group ${groupId}`),
        )
        .finally(() => this.#removingGroups.delete(groupId))
      this.#removingGroups.set(groupId, removing)
    }
    return removing
  }

  async #openDataGroup(groupId: number, replicas: readonly string[]): Promise<void> {
    const engine = this.#engine
    const store = this.#store
    const raft = this.#raft
    const images = this.#images
    if (!engine || !store || !raft || !images) return
    // A group found on disk knows its membership from its log; a new one starts with its founders.
    const log = await store.openGroup(groupId, replicas.length > 0 ? votersConf(replicas) : undefined)
    const machine = await DataGroupMachine.open(groupId, engine)
    const applied = decodeIndex(await engine.get(appliedKeyOf(groupId)))
    // The group's writes form a chain: once one fails (gave up waiting for room), none after it
    // is stored (the applied index would pass the entry whose writes are missing).
    const chain = new WriteChain()
    const dm = new DataMachine(
      machine,
      { write: (ops) => store.commit.write(ops, chain) },
      engine,
      images.port(),
      applied,
      (e) => this.#die(e),
    )
    dm.onBacklogDown = () => this.#raft?.backlogDown(groupId)
    // A snapshot installed just before a crash may be newer than the state machine's keys:
    // install it again (asynchronously) before the runtime takes over.
    const stored = log.snapshot()
    let appliedIndex = applied
    if (stored.meta.index > applied) {
      // A compaction's record (metadata, no image) is written only once the state it stands
      // for is durable, so it is never ahead of the applied index unless data was lost.
      if (stored.data.length === 0) {
        throw new Error(
          `data group ${groupId}: the log is compacted up to ${stored.meta.index} but the state machine's applied index is ${applied}; its data is damaged`,
        )
      }
      await dm.restore(stored)
      appliedIndex = stored.meta.index
    }
    // Images staged for an install that did not happen (the fetch starts over if still needed).
    await images.stager.discard(groupId)
    const addressOf = (id: string) => this.#addresses.get(id)
    const port: DataGroupPort = {
      groupId,
      machine,
      propose: async (command) => {
        try {
          return (await (
            await this.metrics.timeAppend(
              groupId,
              raft.propose(groupId, checkedEntry(groupId, encodeDataCommand(command))),
            )
          ).result) as Awaited<ReturnType<DataGroupPort['propose']>>
        } catch (error) {
          throw toWireError(error, groupId, addressOf)
        }
      },
      assertLeader: () => {
        const s = raft.status(groupId)
        if (s.role !== Role.Leader) {
          const leaderAddress = s.lead ? (addressOf(s.lead) ?? '') : ''
          throw new WireNotLeader(
            s.lead
              ? `not the leader of group ${groupId}; it is ${s.lead} at ${leaderAddress}`
              : `group ${groupId} has no leader yet; retry shortly`,
            { leaderId: s.lead, leaderAddress, groupId },
          )
        }
        return s.term
      },
      settled: () => dm.settled(),
      readBarrier: async () => {
        try {
          await raft.readIndex(groupId)
        } catch (error) {
          throw toWireError(error, groupId, addressOf)
        }
        // The read index is handed to the machine; its apply chain may still be running it.
        await dm.caughtUp()
      },
      // The group's clock, which the leader stamps entries with (behind its wall clock while it
      // catches up with it after a leader change: raft-core README, "Timestamps").
      nowMs: () => raft.groupClockMs(groupId),
    }
    raft.addGroup({
      groupId,
      raft: this.#raftOptions('data'),
      storage: log,
      stateMachine: observedStateMachine(groupId, dm, this.metrics),
      appliedIndex,
      limits: {
        compactEntries: this.config.snapshotEntries,
        compactKeepEntries: Math.max(1, Math.floor(this.config.snapshotEntries / 10)),
      },
      snapshotsOnDemand: true,
    })
    this.#dataGroups.set(groupId, { port, machine: dm, pending: new Map() })
  }

  /** A read-only view for the metrics and health endpoints. */
  view(): NodeView {
    return {
      nodeId: this.config.nodeId,
      serving: () => this.#serving && this.#fatal === undefined,
      failed: () => this.#fatal !== undefined,
      groups: () => {
        const raft = this.#raft
        if (!raft) return []
        return raft.groupIds().map((groupId) => {
          const machine = this.#dataGroups.get(groupId)?.port.machine
          return {
            groupId,
            status: raft.status(groupId),
            imports: machine?.importIds().length ?? 0,
            sweeping: machine?.garbageRanges().length ?? 0,
            logTail: this.#store?.group(groupId)?.tailStats() ?? { entries: 0, bytes: 0 },
          }
        })
      },
      ledPartitions: () => {
        const raft = this.#raft
        const led: PartitionView[] = []
        for (const [groupId, g] of this.#dataGroups) {
          if (raft?.status(groupId).role !== Role.Leader) continue
          // Not the fenced ones: moved (or moving) away, their counters are the target group's
          // once imported (both groups reported them until the source's drop).
          for (const id of g.port.machine.servedPartitionIds()) {
            const { storedAs, queue, partition } = parsePartitionId(id)
            led.push({
              groupId,
              queue,
              partition,
              stats: () => g.port.machine.stats(storedAs, partition, g.port.nowMs()),
            })
          }
        }
        return led
      },
      metaLeaderId: () => (this.#meta ? (this.#raft?.status(META_GROUP).lead ?? '') : this.#metaLeaderId),
    }
  }

  /**
   * A queue's route for a data request: from this node's own meta replica when it has applied
   * route epoch `minEpoch` (no call to the meta leader, which may be the node that just fell
   * silent), else cached, else asked of the meta leader. A replica that lags gives an older
   * route, as a cached one would: a partition that moved away is fenced in its old group, so a
   * stale route earns STALE_ROUTE, never a second copy of the partition.
   */
  async #route(queue: string, minEpoch: number): Promise<QueueRoute | undefined> {
    const local = this.#localRoute(queue, minEpoch)
    if (local) return local
    if (local === null) {
      // Deleted: a cached route would serve a queue that is gone (or its old incarnation).
      this.#routes.delete(queue)
      // A client that sends no epoch may know of a queue this replica has not applied yet:
      // the meta leader is asked (below), not the cache.
      if (minEpoch > 0) return undefined
    }
    const cached = local === null ? undefined : this.#routes.get(queue)
    if (cached && cached.routeEpoch >= minEpoch) return cached
    // An epoch above the meta group's, read after the request came, is none of this cluster's
    // (made up, or from a cluster started again at this address): told to refresh its route,
    // without a lookup of its own (two GetRoutes calls each before). When the meta group cannot
    // be read, the request fails as the lookup would (the same meta leader), retriable. Not on
    // a meta follower: one that lags races the meta leader below, which may be the node that
    // just fell silent (the meta leader knows its own epoch).
    const metaVoter = this.#metaVoter()
    const metaLeader = metaVoter !== undefined && this.#raft?.status(META_GROUP).role === Role.Leader
    if (metaLeader) this.#epochCeiling.observe(metaVoter.state.routeEpoch)
    if (metaVoter === undefined || metaLeader) {
      const ceiling = await this.#epochCeiling
        .reach(minEpoch)
        .catch((error: unknown) => this.#routeLookupFailed(queue, error))
      if (ceiling < minEpoch) {
        throw new StaleRouteError(
          `route epoch ${minEpoch} is ahead of this cluster's (${ceiling}): the route is not this cluster's; refresh the route`,
          { epoch: ceiling },
        )
      }
    }
    const remote = this.#routeMisses.lookup(queue, minEpoch, () =>
      this.#fetchRoutes([queue]).then(
        (response) => ({ epoch: response.routeEpoch, route: response.routes.find((r) => r.queue === queue) }),
        (error: unknown) => this.#routeLookupFailed(queue, error),
      ),
    )
    const voter = this.#metaVoter() // read again: the ceiling's read took time
    if (!voter || voter.state.routeEpoch >= minEpoch) return remote
    // This node's meta replica lags the request (it restarted, say): the route comes from the
    // meta leader or from the replica once it catches up, whichever is first, since the meta
    // leader may be the node that just fell silent.
    const ended = new AbortController()
    const caughtUp = (async () => {
      const until = Date.now() + META_CALL_MS
      for (;;) {
        const since = this.#metaApplied.count
        const route = this.#localRoute(queue, minEpoch)
        if (route) return route
        if (route === null && minEpoch > 0) return undefined
        const left = until - Date.now()
        // The remote answer decides.
        if (left <= 0 || ended.signal.aborted) throw new Error('the meta replica did not catch up')
        await this.#metaApplied.changed(left, ended.signal, since)
      }
    })()
    try {
      return await Promise.any([remote, caughtUp])
    } catch {
      return await remote
    } finally {
      ended.abort()
    }
  }

  /**
   * Throws what a data request gets when the meta group did not answer `queue`'s route: a meta
   * NOT_LEADER becomes UNAVAILABLE (retriable), since its hint names the meta leader, which is
   * no leader of the partition's group (a client followed it there, and took it for the
   * partition's leader); the node's next meta call goes to the hinted leader.
   */
  #routeLookupFailed(queue: string, error: unknown): never {
    this.#notePossibleLeader(error)
    if (!(error instanceof WireNotLeader)) throw error
    throw new UnavailableError(
      `could not look up the route of ${queue}: the meta group answered "${error.message}"; retry shortly`,
      {},
      { cause: error },
    )
  }

  /**
   * The route from this node's meta replica, when it has one that has applied `minEpoch`;
   * null when that replica has no such queue; undefined when there is no such replica.
   */
  #localRoute(queue: string, minEpoch: number): QueueRoute | null | undefined {
    const state = this.#metaVoter()?.state
    if (!state || state.routeEpoch < minEpoch) return undefined
    // Every route change bumps the epoch: a route cached at this epoch is this one (its data
    // group leaders aside, which data requests do not use). No rebuild on every request.
    const cached = this.#routes.get(queue)
    if (cached?.routeEpoch === state.routeEpoch) return cached
    const q = state.queue(queue)
    if (!q) return null
    const route = routeOf(state, q)
    this.#routes.put(route)
    return route
  }

  /**
   * Brings the cached routes, and those of the queues this node's data groups hold, up to
   * `changedEpoch` (the latest epoch at which a queue's settings changed or a queue was deleted;
   * a node without a meta replica hears it in heartbeats), in one GetRoutes (per 1,000 names):
   * their leaders then apply new settings (a pause) and stop serving a deleted queue, or the
   * deleted incarnation of a name created again, within a heartbeat, though the clients'
   * requests still carry the route epoch they were routed with. Routes are replaced, not
   * forgotten, so requests go on meanwhile and a late answer older than the refresh cannot
   * replace it; the route of a queue the answer lacks (deleted) is forgotten, so the next
   * request for it asks the meta group. Until 2026-12-02 only the hosted queues were asked
   * about, and a deleted queue's partitions leave their groups at once (retired): its route
   * stayed cached for good — memory growing with every queue ever deleted, and once the
   * retirement was lifted (10 min on), a request routed before the deletion was served by the
   * cached route, opening the deleted partition again and acknowledging messages the orphan
   * sweeper then dropped. One refresh at a time; an answer from a meta leader that has not
   * applied the change yet (one just elected), or none, is tried again at the next heartbeat.
   */
  #refreshCachedRoutes(changedEpoch: number): void {
    if (this.#refreshingRoutes) return
    const hosted = queueNamesOf([...this.#dataGroups.values()].flatMap((g) => g.port.machine.partitionIds()))
    const names = this.#routes.namesToRefresh(changedEpoch, hosted)
    if (!names) return
    if (names.size === 0) {
      this.#routes.refreshed(changedEpoch)
      return
    }
    this.#refreshingRoutes = true
    this.#fetchRoutes([...names])
      .then((response) => {
        if (response.routeEpoch >= changedEpoch) this.#routes.refreshed(changedEpoch)
      })
      .catch((error: unknown) => this.log.debug({ err: error }, 'cannot refresh the cached routes'))
      .finally(() => {
        this.#refreshingRoutes = false
      })
  }

  /**
   * On a node with a meta replica: forgets the cached routes of queues the replica no longer
   * has (deleted, or created again as another incarnation) once it has applied `changedEpoch`
   * (the latest deletion or settings change, heard in heartbeats). Such a node takes routes from
   * its replica; the cache stands in only while the replica lags, and kept a deleted queue's
   * route until a request for that very queue came.
   */
  #forgetDeletedRoutes(changedEpoch: number): void {
    const state = this.#metaVoter()?.state
    if (!state || state.routeEpoch < changedEpoch) return
    this.#routes.forgetDeleted(changedEpoch, (name) => state.queue(name)?.queueId)
  }

  /**
   * The routes of `queues` from the meta leader, cached; the cached route of a queue the answer
   * lacks (deleted) is forgotten, unless newer than the answer.
   */
  #fetchRoutes(queues: readonly string[]): Promise<RoutesAnswer> {
    return routesInParts(queues, async (part) => {
      const response = await this.#call<RoutesAnswer>((c, md, opts, cb) =>
        c.meta.getRoutes({ queues: [...part] }, md, opts, cb),
      )
      this.#routes.answered(part, response.routeEpoch, response.routes)
      this.#epochCeiling.observe(response.routeEpoch)
      return response
    })
  }

  #dataNodePort(): DataNodePort {
    return {
      knownRoute: (queue) => this.#routes.get(queue),
      groupFor: async (queue, partition, routeEpoch) => {
        const route = await this.#route(queue, routeEpoch)
        if (route && route.routeEpoch < routeEpoch) {
          // The meta group, read after the request came, is behind the request's epoch: no
          // route of this cluster carries it (#route; on a meta follower, found by its lookup).
          throw new StaleRouteError(
            `route epoch ${routeEpoch} is ahead of this cluster's (${route.routeEpoch}): the route is not this cluster's; refresh the route`,
            { epoch: route.routeEpoch },
          )
        }
        const p = route?.partitions.find((x) => x.partition === partition)
        if (route && p && routeEpoch > 0 && routeEpoch < route.partitionsEpoch) {
          // Partitions were added since the client's route: it learns of them in one hop (the
          // group named: the partition is still where the client sent it, no replica to try).
          // Epoch 0 is a client that sends none: it is served as before.
          throw new StaleRouteError(
            `${queue} has ${route.partitions.length} partitions since route epoch ${route.partitionsEpoch}; refresh the route (epoch ${route.routeEpoch})`,
            { epoch: route.routeEpoch, groupId: p.groupId },
          )
        }
        const local = p ? this.#dataGroups.get(p.groupId) : undefined
        if (!route || !p || !local) return undefined
        const storedAs = storedQueueName(queue, route.queueId)
        const moved = () =>
          new StaleRouteError(
            `${queue}/${partition} is moving or moved away from group ${p.groupId}; refresh the route (epoch ${route.routeEpoch})`,
            { epoch: route.routeEpoch, groupId: p.groupId },
          )
        if (local.port.machine.fenced(storedAs, partition)) {
          // The next request with a newer epoch fetches the route again.
          throw moved()
        }
        const id = `${storedAs}/${partition}`
        // One proposal per partition and purpose at a time; concurrent requests share it.
        const once = (purpose: string, command: DataCommand): Promise<void> => {
          const key = `${purpose} ${id}`
          let pending = local.pending.get(key)
          if (!pending) {
            pending = local.port
              .propose(command)
              .then((r) => {
                if (r.type === 'refused') throw moved()
                if (r.type === 'applied' && r.result.type === 'rejected') throw errorOf(r.result.error)
              })
              .finally(() => local.pending.delete(key))
            local.pending.set(key, pending)
          }
          return pending
        }
        const config = partitionConfigFor(route, this.#formatLevel)
        if (!local.port.machine.holds(storedAs, partition)) {
          local.port.assertLeader()
          await once('open', { type: 'open', queue: storedAs, partition, config: config ?? {} })
        } else if (config && local.port.machine.needsConfig(storedAs, partition, config)) {
          // The queue's settings changed (UpdateQueue): the leader applies them as an entry.
          local.port.assertLeader()
          await once('configure', {
            type: 'apply',
            queue: storedAs,
            partition,
            command: { type: 'configure', config },
          })
        }
        return { group: local.port, storedAs, config: route.config }
      },
      routeEpoch: () => this.#routes.highestEpoch,
      formatLevel: () => this.#formatLevel,
    }
  }
}

/**
 * The partition config each route implies at a format level, computed once per route object
 * (routes are cached) and level.
 */
const partitionConfigs = new WeakMap<
  QueueRoute,
  { level: number; config: ReturnType<typeof partitionConfigOf> }
>()

function partitionConfigFor(
  route: QueueRoute,
  level: number,
): ReturnType<typeof partitionConfigOf> | undefined {
  if (!route.config) return undefined
  let cached = partitionConfigs.get(route)
  if (cached?.level !== level) {
    cached = { level, config: partitionConfigOf(route.config, level, route.routeEpoch) }
    partitionConfigs.set(route, cached)
  }
  return cached.config
}
