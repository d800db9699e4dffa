/**
 * A node's store: the data dir it keeps its Raft logs and votes in, named by a random id made
 * when the data dir was created. From FORMAT_LEVEL_STORE_ID the meta state records each
 * node's store id, and a node id may then only register again with that store: a node that
 * lost its data dir (wiped, a new disk) or a second process started under the same id would
 * otherwise take part as the node it claims to be — a replica that forgot its log and its
 * vote can vote twice in a term, or for a candidate missing entries it acknowledged.
 */

/** A store id: 32 lowercase hex digits (16 random bytes). */
const STORE_ID = /^[0-9a-f]{32}$/

const STORE_PHRASE = 'is registered with another data dir'

/** Whether `id` is a store id (32 lowercase hex digits). */
export function isStoreId(id: unknown): id is string {
  return typeof id === 'string' && STORE_ID.test(id)
}

/** What a registration says about the registering process's store. */
export interface StoreClaim {
  /** The store id of the process's data dir. */
  readonly storeId: string
  /** The data dir was empty when the process started. */
  readonly fresh: boolean
}

/**
 * A node registered before store ids were recorded, with no store id yet, is refused a data
 * dir created at its process's start only once its registration is this old: a new cluster
 * registers its founders before it reaches the level that records stores, and a founder whose
 * first answers were lost still sends `fresh` when the level arrives seconds later.
 */
export const FRESH_STORE_GRACE_MS = 60_000

/** A registered node as the store rule needs it. */
export interface RegisteredStore {
  readonly storeId?: string
  readonly registeredAtMs: number
}

/**
 * Why a node registered as `known` (undefined: not registered) may not register with `claim`
 * at `nowMs`; undefined when it may. Refused: another store than the recorded one; and, for a
 * node registered more than FRESH_STORE_GRACE_MS before without a store id (before store ids
 * were recorded), a store created at this process's start (it lost its data).
 */
export function storeConflict(
  nodeId: string,
  known: RegisteredStore | undefined,
  claim: StoreClaim,
  nowMs: number,
): string | undefined {
  if (!known) return undefined
  if (known.storeId !== undefined)
    return known.storeId === claim.storeId ? undefined : storeReplacedMessage(nodeId)
  return claim.fresh && nowMs - known.registeredAtMs > FRESH_STORE_GRACE_MS
    ? storeReplacedMessage(nodeId)
    : undefined
}

/** The refusal of a registration from another store; the node stops on it (saysStoreReplaced). */
export function storeReplacedMessage(nodeId: string): string {
  return `node ${nodeId} ${STORE_PHRASE} than this process's: its data dir was wiped or replaced, or another process runs under the same id. A node that lost its data must not take part under its old id (it could vote twice in a term, or for a candidate missing acknowledged writes): start it with a new --node-id and an empty --data-dir; the cluster replaces the old id's replicas after --replace-dead-after-ms`
}

/** Whether an error's message is storeReplacedMessage's (as a heartbeat's refusal carries it). */
export function saysStoreReplaced(message: string): boolean {
  return message.includes(STORE_PHRASE)
}
