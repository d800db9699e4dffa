import {
  type DataGroupPort,
  type DataResult,
  decodeDataCommand,
  encodeDataCommand,
  type ImportChunk,
  type KeyPair,
} from '@mq/data-service'
import {
  type ImportPartitionRequest,
  type ImportPartitionResponse,
  InternalError,
  InvalidArgumentError,
  type MovePartitionRequest,
  type MovePartitionResponse,
  UnavailableError,
} from '@mq/protocol'
import type { PeerCalls } from './peer-calls'

/** Bytes of partition state per import chunk (one Raft entry of the target group). */
export const IMPORT_CHUNK_BYTES = 1024 * 1024
/** One ImportPartition call's deadline (the chunk is committed and applied within it). */
const IMPORT_CALL_MS = 10_000

/** The data groups hosted on this node, as the mover needs them. */
export interface LocalDataGroups {
  /** The local replica of data group `groupId`, if this node hosts one. */
  port(groupId: number): DataGroupPort | undefined
}

/**
 * A node's part in live partition moves (a fenced hand-off):
 *
 * - on the leader of the source group, `move` carries out one phase the meta leader's
 *   controller asks for: "copy" commits a `fence` entry (from then on the partition answers
 *   STALE_ROUTE there, and its keys are frozen on every replica), then reads the partition's
 *   keys in chunks of `IMPORT_CHUNK_BYTES` and ships them to the target group's leader, then
 *   a last chunk; "drop" commits a `drop` entry (the fence stays);
 * - on the leader of the target group, `import` proposes one chunk into the group's log.
 *
 * Every step is idempotent and restartable: a repeated fence is a no-op, a new import
 * session clears what an earlier one left, an import of a move already completed answers
 * complete at once. One copy per move runs at a time on a node; a repeated request joins it.
 */
export class PartitionMover {
  readonly #groups: LocalDataGroups
  readonly #calls: PeerCalls
  readonly #nodeId: string
  readonly #running = new Map<string, Promise<MovePartitionResponse>>()
  #sessions = 0

  constructor(groups: LocalDataGroups, calls: PeerCalls, nodeId: string) {
    this.#groups = groups
    this.#calls = calls
    this.#nodeId = nodeId
  }

  /** Peer.MovePartition: one phase of a move, on the source group's leader. */
  move(req: MovePartitionRequest): Promise<MovePartitionResponse> {
    const port = this.#local(req.fromGroup)
    port.assertLeader()
    if (req.phase !== 'copy' && req.phase !== 'drop')
      throw new InvalidArgumentError(`move phase must be copy or drop, got ${JSON.stringify(req.phase)}`)
    const key = `${req.moveId}/${req.phase}`
    let running = this.#running.get(key)
    if (!running) {
      running = (req.phase === 'copy' ? this.#copy(port, req) : this.#drop(port, req)).finally(() =>
        this.#running.delete(key),
      )
      this.#running.set(key, running)
    }
    return running
  }

  /** Peer.ImportPartition: proposes one chunk into the local target group (its leader only). */
  async import(req: ImportPartitionRequest): Promise<ImportPartitionResponse> {
    const port = this.#local(req.groupId)
    port.assertLeader()
    let command: ReturnType<typeof decodeDataCommand>
    try {
      command = decodeDataCommand(req.command)
    } catch (error) {
      throw new InvalidArgumentError(`not a data-group entry: ${(error as Error).message}`)
    }
    if (command.type !== 'import')
      throw new InvalidArgumentError(`expected an import entry, got ${command.type}`)
    const r = await port.propose(command)
    if (r.type === 'imported') return { complete: r.complete }
    throw refusal(r, `import into group ${req.groupId}`)
  }

  async #copy(port: DataGroupPort, req: MovePartitionRequest): Promise<MovePartitionResponse> {
    const { storedAs: queue, partition } = req
    const fenced = await port.propose({ type: 'fence', queue, partition })
    if (fenced.type !== 'fenced') throw refusal(fenced, `fence of ${queue}/${partition}`)
    // The session carries the term this node leads in: a successor's session (a newer term)
    // cannot be restarted by this one, and this one stops once it is no longer the leader.
    const sourceTerm = port.assertLeader()
    const config = port.machine.configOf(queue, partition) ?? parseConfig(req.configJson)
    const session = `${this.#nodeId}:${req.moveId}:${++this.#sessions}`
    let seq = 0
    let bytes = 0
    let after: Uint8Array | undefined
    const ship = async (pairs: readonly KeyPair[], last: boolean): Promise<boolean> => {
      if (port.assertLeader() !== sourceTerm) {
        throw new UnavailableError(
          `group ${req.fromGroup} changed leader during the copy of ${queue}/${partition}; its new leader copies`,
          { groupId: req.fromGroup },
        )
      }
      const chunk: ImportChunk = { moveId: req.moveId, session, seq: seq++, last, config, pairs, sourceTerm }
      const command = encodeDataCommand({ type: 'import', queue, partition, ...chunk })
      bytes += command.length
      const r = await this.#calls.callLeader<ImportPartitionResponse>(
        req.targetReplicas,
        (c, md, opts, cb) => c.peer.importPartition({ groupId: req.toGroup, command }, md, opts, cb),
        IMPORT_CALL_MS,
      )
      return r.complete
    }
    // The keys are frozen since the fence: paging through them by key is consistent.
    for (;;) {
      const { pairs, done } = await port.machine.exportChunk(queue, partition, after, IMPORT_CHUNK_BYTES)
      if (await ship(pairs, false)) return { chunks: seq, bytes }
      if (pairs.length > 0) after = (pairs[pairs.length - 1] as KeyPair)[0]
      if (done) break
    }
    if (!(await ship([], true)))
      throw new InternalError(`the import of ${queue}/${partition} did not complete`)
    return { chunks: seq, bytes }
  }

  async #drop(port: DataGroupPort, req: MovePartitionRequest): Promise<MovePartitionResponse> {
    const r = await port.propose({ type: 'drop', queue: req.storedAs, partition: req.partition })
    if (r.type !== 'dropped') throw refusal(r, `drop of ${req.storedAs}/${req.partition}`)
    return { chunks: 0, bytes: 0 }
  }

  #local(groupId: number): DataGroupPort {
    const port = this.#groups.port(groupId)
    if (!port) throw new UnavailableError(`this node hosts no replica of data group ${groupId}`, { groupId })
    return port
  }
}

function refusal(r: DataResult, what: string): Error {
  return r.type === 'refused'
    ? new InvalidArgumentError(`${what} was refused (${r.reason}): ${r.message}`)
    : new InternalError(`${what}: unexpected result ${r.type}`)
}

function parseConfig(json: string): Record<string, unknown> {
  try {
    const value = JSON.parse(json || '{}') as unknown
    if (typeof value === 'object' && value !== null) return value as Record<string, unknown>
  } catch {
    // Falls through to the error below.
  }
  throw new InvalidArgumentError(`config_json is not a JSON object: ${json.slice(0, 100)}`)
}
