import { randomBytes } from 'node:crypto'
import { type BatchOp, type KvReader, nodeKey } from '@mq/kv-storage'
import { isStoreId } from '@mq/meta-service'

/** A meta voter's id and address, as a node keeps it to find the meta group again. */
export interface MetaSeed {
  readonly nodeId: string
  readonly address: string
}

/**
 * How a data dir was first started: the `--initial-meta` it founded a cluster with, or the
 * `--join` address it joined one through (one of the two given, the other empty).
 */
export interface ClusterEntry {
  readonly initialMeta: readonly MetaSeed[]
  readonly join: string
}

/**
 * Why a start with neither `--initial-meta` nor `--join` is refused on a data dir that keeps no
 * cluster entry (a new one, or one last started before entries were kept).
 */
export const NO_CLUSTER_ENTRY =
  'it records no cluster to resume (a new data dir, or one last started by a version before 2026-12-06): give --initial-meta to bootstrap a cluster or --join ADDRESS to join one (the data dir then keeps it, and a restart needs neither)'

/** What node facts read from and write to: the node's database. */
export interface NodeFactsStore {
  get(key: Uint8Array): Promise<Uint8Array | undefined>
  /** Resolves once `ops` are durable. */
  write(ops: readonly BatchOp[]): Promise<void>
}

/**
 * Whether the node's database holds nothing at all: a data dir that was empty (new, or wiped),
 * or one whose first start died before anything was written (the facts are the first write).
 * Read right after the database opens, before any write. (The presence of LevelDB's `CURRENT`
 * file told this before: it is created by the open itself, so a wiped founder whose first
 * start failed after it — a full disk, a kill — came back as an old store, skipped its founder
 * gate and bootstrapped the meta group with a forgotten vote.)
 */
export async function holdsNothing(engine: Pick<KvReader, 'keys'>): Promise<boolean> {
  return (await engine.keys({ limit: 1 })).length === 0
}

/** At most this many meta seeds are kept (the meta group has at most 7 voters). */
const SEEDS_MAX = 16

const LEFT_META = nodeKey('left-meta')
const META_SEEDS = nodeKey('meta-seeds')
const FORMAT_LEVEL = nodeKey('format-level')
const STORE_ID = nodeKey('store-id')
const STORE_FRESH = nodeKey('store-fresh')
const NODE_ID = nodeKey('node-id')
const META_FOUNDERS = nodeKey('meta-founders')
const CLUSTER_ENTRY = nodeKey('cluster-entry')
const encoder = new TextEncoder()
const decoder = new TextDecoder('utf-8', { ignoreBOM: true })

/**
 * Facts a node keeps about itself in its database, outside every group (removing a group's
 * storage leaves them):
 *
 * - **left the meta group**: set (durably) before a removed meta replica's storage is
 *   deleted, so a founding member that left never bootstraps the meta group with the
 *   founding membership again (its `--initial-meta` still names it);
 * - **meta seeds**: the meta group's voters with their addresses, from the meta leader's
 *   heartbeat answers, so a node restarted after the founders were replaced still finds the
 *   meta group (its configured seeds may all be gone);
 * - **the cluster's format level** as the meta leader last answered it, so a restarted leader
 *   does not hold pipelining producers to one batch until its first heartbeat answer (a new
 *   node: 1);
 * - **the store id**: 16 random bytes (32 hex digits) made when the database is first opened
 *   by a version that keeps one, which the node sends in its heartbeats: the meta state
 *   records it and refuses the node id from another store (meta-service's node-store.ts);
 * - **the store is fresh**: the database was created with the store id (not an older one
 *   given an id), and no meta leader has accepted the node since — kept across restarts, so a
 *   wiped founder restarted by a supervisor after its refusal still waits at its gate;
 * - **the cluster entry**: the `--initial-meta` or `--join` of the data dir's first start, so
 *   that a restart without either resumes as a start with it (a founder keeps founding, its
 *   gate included; a joined node seeks the meta group at its join address, after its seeds).
 */
export class NodeFacts {
  readonly #store: NodeFactsStore
  #leftMeta: boolean
  #seeds: readonly MetaSeed[]
  #formatLevel: number
  /** The store id (32 lowercase hex digits). */
  readonly storeId: string
  #fresh: boolean
  #metaFounders: readonly string[] | undefined
  /** The cluster entry kept (undefined: none, in a store opened without one). */
  readonly clusterEntry: ClusterEntry | undefined

  private constructor(
    store: NodeFactsStore,
    leftMeta: boolean,
    seeds: readonly MetaSeed[],
    formatLevel: number,
    storeId: string,
    fresh: boolean,
    metaFounders: readonly string[] | undefined,
    clusterEntry: ClusterEntry | undefined,
  ) {
    this.#store = store
    this.#leftMeta = leftMeta
    this.#seeds = seeds
    this.#formatLevel = formatLevel
    this.storeId = storeId
    this.#fresh = fresh
    this.#metaFounders = metaFounders
    this.clusterEntry = clusterEntry
  }

  /**
   * Reads the facts; makes the store id (durably) when the database has none yet — fresh too
   * when `newDatabase` (it did not exist before this open), not for an older database.
   * With `nodeId`, refuses a database kept by another node id (a mistyped `--node-id` with
   * another node's `--data-dir`: its store id and replicas would be taken for this node's,
   * and the replicas deleted) and keeps the id in one that has none yet.
   * With `entry` (the start's `--initial-meta` or `--join`, both empty when neither is given),
   * keeps it when none is kept yet (the first start's stays); throws NO_CLUSTER_ENTRY, before
   * it writes anything, when neither is given nor kept.
   */
  static async open(
    store: NodeFactsStore,
    newDatabase = false,
    nodeId?: string,
    entry?: ClusterEntry,
  ): Promise<NodeFacts> {
    const owner = await store.get(NODE_ID)
    const ownerId = owner ? decoder.decode(owner) : ''
    if (nodeId !== undefined && ownerId !== '' && ownerId !== nodeId)
      throw new Error(
        `it belongs to node ${ownerId}, not ${nodeId}: start ${ownerId} with it, or give ${nodeId} a data dir of its own (an empty one for a new node)`,
      )
    let clusterEntry = parseEntry(await store.get(CLUSTER_ENTRY))
    const given = entry && (entry.initialMeta.length > 0 || entry.join !== '') ? entry : undefined
    if (entry && !given && !clusterEntry) throw new Error(NO_CLUSTER_ENTRY)
    // Written with the store id when that is made (one batch: a first start that dies between
    // two writes must not leave a new database looking older than it is, nor one that cannot
    // start again as it was first started), else on their own.
    const ownerOps: BatchOp[] =
      nodeId !== undefined && ownerId === ''
        ? [{ type: 'put', key: NODE_ID, value: encoder.encode(nodeId) }]
        : []
    if (given && !clusterEntry) {
      clusterEntry = {
        initialMeta: given.initialMeta.map((m) => ({ nodeId: m.nodeId, address: m.address })),
        join: given.join,
      }
      ownerOps.push({ type: 'put', key: CLUSTER_ENTRY, value: encoder.encode(JSON.stringify(clusterEntry)) })
    }
    const left = await store.get(LEFT_META)
    const level = await store.get(FORMAT_LEVEL)
    const kept = await store.get(STORE_ID)
    let storeId = kept ? decoder.decode(kept) : ''
    let fresh = (await store.get(STORE_FRESH)) !== undefined
    if (!isStoreId(storeId)) {
      storeId = randomBytes(16).toString('hex')
      fresh = newDatabase
      await store.write([
        { type: 'put', key: STORE_ID, value: encoder.encode(storeId) },
        newDatabase
          ? { type: 'put', key: STORE_FRESH, value: Uint8Array.of(1) }
          : { type: 'del', key: STORE_FRESH },
        ...ownerOps,
      ])
    } else if (ownerOps.length > 0) await store.write(ownerOps)
    return new NodeFacts(
      store,
      left !== undefined,
      parseSeeds(await store.get(META_SEEDS)),
      level?.length === 1 && (level[0] as number) >= 1 ? (level[0] as number) : 1,
      storeId,
      fresh,
      parseIds(await store.get(META_FOUNDERS)),
      clusterEntry,
    )
  }

  /** The store is fresh: its database was created with it, and no meta leader accepted the node since. */
  get fresh(): boolean {
    return this.#fresh
  }

  /** A meta leader accepted the node (a heartbeat answer): the store is fresh no more; resolves once durable. */
  async markAccepted(): Promise<void> {
    if (!this.#fresh) return
    // Kept in memory once durable: set before, a write that failed (a full group commit gave
    // up) left the store fresh on disk, and every later answer, finding it accepted, wrote
    // nothing (here and in the setters below).
    await this.#store.write([{ type: 'del', key: STORE_FRESH }])
    this.#fresh = false
  }

  /** The cluster's format level as last kept (1 when none was). */
  get formatLevel(): number {
    return this.#formatLevel
  }

  /** Keeps the cluster's format level when it changed (1 to 255); resolves once durable. */
  async setFormatLevel(level: number): Promise<void> {
    if (level === this.#formatLevel || !Number.isInteger(level) || level < 1 || level > 255) return
    await this.#store.write([{ type: 'put', key: FORMAT_LEVEL, value: Uint8Array.of(level) }])
    this.#formatLevel = level
  }

  get leftMeta(): boolean {
    return this.#leftMeta
  }

  /**
   * The founders this node's meta replica was first opened with (its `--initial-meta` then),
   * when kept: the replica's membership until its first snapshot, which a changed flag at a
   * later start must not change (a 3-node cluster restarted with 5 founders named counted 5
   * voters, 2 of them never there, and stopped at the first node down).
   */
  get metaFounders(): readonly string[] | undefined {
    return this.#metaFounders
  }

  /** Keeps `ids` as the meta replica's founders unless some are kept already; resolves once durable. */
  async keepMetaFounders(ids: readonly string[]): Promise<void> {
    if (this.#metaFounders !== undefined) return
    await this.#store.write([{ type: 'put', key: META_FOUNDERS, value: encoder.encode(JSON.stringify(ids)) }])
    this.#metaFounders = [...ids]
  }

  get metaSeeds(): readonly MetaSeed[] {
    return this.#seeds
  }

  /** Records that this node's meta replica was removed; resolves once durable. */
  async markLeftMeta(): Promise<void> {
    if (this.#leftMeta) return
    await this.#store.write([{ type: 'put', key: LEFT_META, value: Uint8Array.of(1) }])
    this.#leftMeta = true
  }

  /** Keeps `seeds` (sorted, bounded) when they differ from the kept ones; resolves once durable. */
  async setMetaSeeds(seeds: readonly MetaSeed[]): Promise<void> {
    const next = [...seeds]
      .filter((s) => s.nodeId !== '' && s.address !== '')
      .sort((a, b) => (a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : 0))
      .slice(0, SEEDS_MAX)
      .map((s) => ({ nodeId: s.nodeId, address: s.address }))
    if (next.length === 0 || JSON.stringify(next) === JSON.stringify(this.#seeds)) return
    await this.#store.write([{ type: 'put', key: META_SEEDS, value: encoder.encode(JSON.stringify(next)) }])
    this.#seeds = next
  }
}

/** The kept node ids; undefined when absent or unreadable. */
function parseIds(bytes: Uint8Array | undefined): string[] | undefined {
  if (!bytes) return undefined
  try {
    const value: unknown = JSON.parse(decoder.decode(bytes))
    return Array.isArray(value) && value.length > 0 && value.every((id) => typeof id === 'string')
      ? value
      : undefined
  } catch {
    return undefined
  }
}

/** The kept cluster entry; undefined when absent or unreadable (the start then needs a flag again). */
function parseEntry(bytes: Uint8Array | undefined): ClusterEntry | undefined {
  if (!bytes) return undefined
  try {
    const value = JSON.parse(decoder.decode(bytes)) as { initialMeta?: unknown; join?: unknown }
    const initialMeta = seedsOf(value.initialMeta)
    const join = typeof value.join === 'string' ? value.join : ''
    return initialMeta.length > 0 || join !== '' ? { initialMeta, join } : undefined
  } catch {
    return undefined
  }
}

/** The kept seeds; none when absent or unreadable (they are a hint: the configured seeds remain). */
function parseSeeds(bytes: Uint8Array | undefined): MetaSeed[] {
  if (!bytes) return []
  try {
    return seedsOf(JSON.parse(decoder.decode(bytes)))
  } catch {
    return []
  }
}

/** The well-formed seeds of a parsed value (at most SEEDS_MAX); none when it is no array. */
function seedsOf(value: unknown): MetaSeed[] {
  if (!Array.isArray(value)) return []
  return value
    .filter(
      (s): s is MetaSeed =>
        typeof s === 'object' &&
        s !== null &&
        typeof (s as MetaSeed).nodeId === 'string' &&
        typeof (s as MetaSeed).address === 'string',
    )
    .slice(0, SEEDS_MAX)
}
