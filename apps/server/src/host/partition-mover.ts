import {
  configAtLevel,
  type DataGroupPort,
  type DataResult,
  decodeDataCommand,
  encodeDataCommand,
  type ImportChunk,
  type KeyPair,
  partitionNowMs,
  staleMove,
} from '@mq/data-service'
import {
  FORMAT_LEVEL_FENCE_ORDER,
  FORMAT_LEVEL_MOVE_ABORT,
  FORMAT_LEVEL_MOVE_IDS,
  FORMAT_LEVEL_MOVE_ORDER,
  FORMAT_LEVEL_PARTITION_CLOCK,
  type ImportPartitionRequest,
  type ImportPartitionResponse,
  InternalError,
  InvalidArgumentError,
  type MovePartitionRequest,
  type MovePartitionResponse,
  UnavailableError,
} from '@mq/protocol'
import { type Logger, silentLogger } from '../log'
import type { PeerCalls } from './peer-calls'

/** Bytes of partition state per import chunk (one Raft entry of the target group). */
export const IMPORT_CHUNK_BYTES = 1024 * 1024
/** One ImportPartition call's deadline (the chunk is committed and applied within it). */
const IMPORT_CALL_MS = 10_000
/**
 * Keys a copy notes as written while it reads the partition (~100 bytes each); when more are,
 * the partition is copied whole again after the fence.
 */
export const DIRTY_KEYS_MAX = 200_000
/**
 * Keys handed to one read-back of the correction rounds (`readKeys`, which reads their values
 * as they fit in what is left of the chunk, and answers the first of them).
 */
const KEYS_PER_READ = 256
/**
 * Rounds of correction a copy makes while the partition still serves, each sending the keys
 * written during the one before, until at most SETTLED_KEYS are left for the fenced window.
 */
const PRECOPY_ROUNDS_MAX = 3
const SETTLED_KEYS = 2_000
/** Keys (puts and deletions) per import chunk after the fence. */
const KEYS_PER_CHUNK = 16_384

/** The data groups hosted on this node, as the mover needs them. */
export interface LocalDataGroups {
  /** The local replica of data group `groupId`, if this node hosts one. */
  port(groupId: number): DataGroupPort | undefined
  /**
   * The cluster's format level: from FORMAT_LEVEL_MOVE_IDS a move's fence and drop name it and
   * its chunks ask for `fresh` (absent: level 1).
   */
  formatLevel?(): number
}

/**
 * A node's part in live partition moves (a fenced hand-off):
 *
 * - on the leader of the source group, `move` carries out one phase the meta leader's
 *   controller asks for: "copy" commits a `fence` entry (from then on the partition answers
 *   STALE_ROUTE there, and its keys are frozen on every replica), then reads the partition's
 *   keys in chunks of `IMPORT_CHUNK_BYTES` and ships them to the target group's leader, then
 *   a last chunk with the partition's clock (FORMAT_LEVEL_PARTITION_CLOCK), from which the
 *   target's clock for it goes on; "drop" commits a `drop` entry (the fence stays); "abort"
 *   (FORMAT_LEVEL_MOVE_ABORT: the meta state gave the move up in its copy phase) commits an
 *   `unfence` entry: the partition serves here again, and a fence or copy of the move still
 *   under way is refused from then on;
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
  readonly #log: Logger
  readonly #dirtyKeysMax: number
  readonly #settledKeys: number
  readonly #running = new Map<string, Promise<MovePartitionResponse>>()
  #sessions = 0

  constructor(
    groups: LocalDataGroups,
    calls: PeerCalls,
    nodeId: string,
    bounds: { readonly dirtyKeysMax?: number; readonly settledKeys?: number } = {},
    // The node's logger (default: nowhere): a copy's line went to console.log, a plain-text
    // line among the JSON ones on stdout.
    log: Logger = silentLogger(),
  ) {
    this.#groups = groups
    this.#calls = calls
    this.#nodeId = nodeId
    this.#log = log
    this.#dirtyKeysMax = bounds.dirtyKeysMax ?? DIRTY_KEYS_MAX
    this.#settledKeys = bounds.settledKeys ?? SETTLED_KEYS
  }

  /** Peer.MovePartition: one phase of a move, on the source group's leader. */
  move(req: MovePartitionRequest): Promise<MovePartitionResponse> {
    const port = this.#local(req.fromGroup)
    port.assertLeader()
    if (req.phase !== 'copy' && req.phase !== 'drop' && req.phase !== 'abort')
      throw new InvalidArgumentError(
        `move phase must be copy, drop or abort, got ${JSON.stringify(req.phase)}`,
      )
    // A replica of an earlier version would not know the entry (it would keep the fence).
    if (req.phase === 'abort' && this.#level() < FORMAT_LEVEL_MOVE_ABORT)
      throw new InvalidArgumentError(
        `a move is aborted from format level ${FORMAT_LEVEL_MOVE_ABORT}; the cluster is at ${this.#level()}`,
      )
    const key = `${req.moveId}/${req.phase}`
    let running = this.#running.get(key)
    if (!running) {
      const phase = req.phase === 'copy' ? this.#copy : req.phase === 'drop' ? this.#drop : this.#abort
      running = phase.call(this, port, req).finally(() => this.#running.delete(key))
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
    // A chunk of a move older than one this group took part in since for the partition (a
    // deposed meta leader's copy, delivered late): refused before it could clear what the
    // group holds now.
    const stale = staleMove(
      command.moveId,
      port.machine.movesOf(command.queue, command.partition),
      'import into',
    )
    if (stale) throw new InvalidArgumentError(stale)
    const r = await port.propose(command)
    if (r.type === 'imported') return { complete: r.complete }
    throw refusal(r, `import into group ${req.groupId}`)
  }

  /**
   * The copy phase. While the partition still serves, its keys are read (a fuzzy read) and
   * shipped, and every key the partition's entries write from then on is noted (a write
   * watch); then the `fence` entry freezes it and only the noted keys are read again and
   * sent (their values, or their deletion), so the partition is unavailable for the
   * correction alone, not the whole copy. Corrections go in rounds while the partition
   * serves (the keys written during the round before) until `settledKeys` or fewer are left
   * or PRECOPY_ROUNDS_MAX rounds passed. When more than `dirtyKeysMax` keys were written
   * during a round, the partition is copied whole after the fence (a new session).
   */
  async #copy(port: DataGroupPort, req: MovePartitionRequest): Promise<MovePartitionResponse> {
    const { storedAs: queue, partition } = req
    // The session carries the term this node leads in: a successor's session (a newer term)
    // cannot be restarted by this one, and this one stops once it is no longer the leader.
    const sourceTerm = port.assertLeader()
    // A copy of a move older than one this group took part in since for the partition (a
    // deposed meta leader's request, delivered late) would ship what the group holds now — or
    // nothing — over the partition's current home, and fence it here for the wrong move.
    const stale = staleMove(req.moveId, port.machine.movesOf(queue, partition), 'copy from')
    if (stale) throw new InvalidArgumentError(stale)
    let config = port.machine.configOf(queue, partition) ?? parseConfig(req.configJson)
    // A partition never used here was never opened (a group opens one at its first request).
    // Fenced as it is, an abort could not lift the fence (`unfence` lifts only that of a
    // partition the group holds): refused here for good (STALE_ROUTE, its route unchanged), and
    // every later move's copy from here stale (fenced by another move). Opened first, an entry
    // every replica applies as before, it is held like any other. Refused (fenced, being
    // imported), the copy goes on as it did.
    if (!port.machine.holds(queue, partition) && !port.machine.fenced(queue, partition))
      await port.propose({ type: 'open', queue, partition, config })
    // Named with the term too: `#sessions` starts again when the process does, and a chunk of
    // a session this node began before it restarted, arriving late, would be taken for one of a
    // new session of the same name (the target continues a session by its name and seq).
    const newSession = () => `${this.#nodeId}:${sourceTerm}:${req.moveId}:${++this.#sessions}`
    let session = newSession()
    let seq = 0
    /** Chunks shipped by this call, over every session (`seq` starts again with a new one). */
    let chunks = 0
    let bytes = 0
    const leadingStill = (): boolean => {
      try {
        return port.assertLeader() === sourceTerm
      } catch {
        return false
      }
    }
    /** Why this move may no longer be completed here (it was aborted), or undefined. */
    const abortedHere = () => staleMove(req.moveId, port.machine.movesOf(queue, partition), 'copy from')
    const ship = async (pairs: readonly KeyPair[], last: boolean, dels?: Uint8Array[]): Promise<boolean> => {
      if (port.assertLeader() !== sourceTerm) {
        throw new UnavailableError(
          `group ${req.fromGroup} changed leader during the copy of ${queue}/${partition}; its new leader copies`,
          { groupId: req.fromGroup },
        )
      }
      const chunkSeq = seq++
      const chunk: ImportChunk = {
        moveId: req.moveId,
        session,
        seq: chunkSeq,
        last,
        // The partition's own config is resolved (every field, 0s too): shipped as is, a
        // replica of an older version in the target group would refuse the fields it does not
        // know while the others open the partition (the upgrade audit).
        config: configAtLevel(config, this.#level()),
        pairs,
        sourceTerm,
        ...(dels && dels.length > 0 ? { dels } : {}),
        ...(this.#namesMoves() ? { fresh: true as const } : {}),
        ...this.#ordered(),
        // A copy an aborted move left there is cleared, not refused (every replica knows the rule).
        ...(chunkSeq === 0 && this.#level() >= FORMAT_LEVEL_MOVE_ABORT ? { replaces: true as const } : {}),
        // Read once the fence applied (the last chunk comes after it): no entry of the partition
        // applied here at a later time, and the target's clock for it goes on from this.
        ...(last && this.#level() >= FORMAT_LEVEL_PARTITION_CLOCK
          ? { clockMs: partitionNowMs(port, queue, partition) }
          : {}),
      }
      const command = encodeDataCommand({ type: 'import', queue, partition, ...chunk })
      chunks++
      bytes += command.length
      const r = await this.#calls.callLeader<ImportPartitionResponse>(
        req.targetReplicas,
        (c, md, opts, cb) => c.peer.importPartition({ groupId: req.toGroup, command }, md, opts, cb),
        IMPORT_CALL_MS,
        // A chunk is not sent again once this node lost the lead it copies under, nor the last
        // one once the move was aborted here (it would make the target hold the partition).
        {
          stillWanted: () => leadingStill() && !(last && abortedHere()),
        },
      )
      return r.complete
    }
    /** Ships every key of the partition as it reads them; true: an earlier copy completed the move. */
    const shipAll = async (): Promise<boolean> => {
      let after: Uint8Array | undefined
      for (;;) {
        const { pairs, done } = await port.machine.exportChunk(queue, partition, after, IMPORT_CHUNK_BYTES)
        if (await ship(pairs, false)) return true
        if (pairs.length > 0) after = (pairs[pairs.length - 1] as KeyPair)[0]
        if (done) return false
      }
    }

    /** Ships `keys` as the engine holds them now (absent: a deletion); true: the move was done. */
    const shipKeys = async (keys: readonly Uint8Array[]): Promise<boolean> => {
      let puts: KeyPair[] = []
      let dels: Uint8Array[] = []
      let chunkBytes = 0
      for (let i = 0; i < keys.length; ) {
        const some = keys.slice(i, i + KEYS_PER_READ)
        // The values of the first keys, about what the chunk has room for (a read of all of
        // them held 256 values at once: 1 GiB of 4-MiB messages).
        const values = await port.machine.readKeys(queue, partition, some, IMPORT_CHUNK_BYTES - chunkBytes)
        i += values.length
        for (const [j, value] of values.entries()) {
          const key = some[j] as Uint8Array
          if (value === undefined) dels.push(key)
          else puts.push([key, value])
          chunkBytes += key.length + (value?.length ?? 0)
          // Chunks of about IMPORT_CHUNK_BYTES at most (or one key), KEYS_PER_CHUNK keys at most.
          if (chunkBytes >= IMPORT_CHUNK_BYTES || puts.length + dels.length >= KEYS_PER_CHUNK) {
            if (await ship(puts, false, dels)) return true
            puts = []
            dels = []
            chunkBytes = 0
          }
        }
      }
      return puts.length + dels.length > 0 && ship(puts, false, dels)
    }
    /** A write watch on the partition, begun once every entry applied before it is stored. */
    const watchFromNow = async () => {
      const w = port.machine.watchWrites(queue, partition, this.#dirtyKeysMax)
      try {
        await port.settled()
      } catch (error) {
        w.close()
        throw error
      }
      return w
    }

    // 1. While the partition serves: everything, as read; then, in up to PRECOPY_ROUNDS_MAX
    // rounds, the keys written during the round before, until few are left. Each round's
    // watch begins before the previous round's keys are read, so no write falls between.
    let watch = await watchFromNow()
    let rounds = 0
    let fencedAtMs: number
    let dirty: Uint8Array[] | undefined
    try {
      if (await shipAll()) return { chunks, bytes }
      while (rounds < PRECOPY_ROUNDS_MAX) {
        const next = await watchFromNow()
        const written = watch.keys()
        if (written === undefined) {
          // Overflowed: it stays the watch read after the fence, which then sends all again.
          next.close()
          break
        }
        watch.close()
        watch = next
        rounds++
        if (await shipKeys(written)) return { chunks, bytes }
        if (written.length <= this.#settledKeys) break
      }
      // 2. The fence: from its entry on, the partition answers STALE_ROUTE and is frozen.
      fencedAtMs = Date.now()
      const fenced = await port.propose({
        type: 'fence',
        queue,
        partition,
        ...this.#moveIdOf(req),
        // Refused where a later move of the partition has been since (a late fence of an aborted move).
        ...(this.#namesMoves() && this.#level() >= FORMAT_LEVEL_FENCE_ORDER
          ? { ordered: true as const }
          : {}),
      })
      if (fenced.type !== 'fenced') throw refusal(fenced, `fence of ${queue}/${partition}`)
      dirty = watch.keys()
    } finally {
      watch.close()
    }
    config = port.machine.configOf(queue, partition) ?? config
    const precopy = { chunks, bytes }
    if (dirty === undefined) {
      // 3a. Too much changed to track: everything again, in a new session.
      session = newSession()
      seq = 0
      if (await shipAll()) return { chunks, bytes }
    } else if (await shipKeys(dirty)) {
      // 3b. The keys written since the last round began, as they are now.
      return { chunks, bytes }
    }
    // The last chunk makes the target hold the partition: not once the move was aborted here
    // (its fence lifted meanwhile, the partition serving again).
    const aborted = abortedHere()
    if (aborted) throw new InvalidArgumentError(aborted)
    if (!(await ship([], true)))
      throw new InternalError(`the import of ${queue}/${partition} did not complete`)
    this.#log.info(
      `mq-server: copied ${queue}/${partition} to group ${req.toGroup}: ${precopy.chunks} chunks (${precopy.bytes} bytes) while serving (${rounds} correction rounds), then ${dirty === undefined ? 'all again' : `${dirty.length} keys written meanwhile`}: ${chunks - precopy.chunks} chunks (${bytes - precopy.bytes} bytes), fenced for ${Date.now() - fencedAtMs} ms`,
    )
    return { chunks, bytes }
  }

  async #drop(port: DataGroupPort, req: MovePartitionRequest): Promise<MovePartitionResponse> {
    const r = await port.propose({
      type: 'drop',
      queue: req.storedAs,
      partition: req.partition,
      ...this.#moveIdOf(req),
      ...this.#ordered(),
    })
    if (r.type !== 'dropped') throw refusal(r, `drop of ${req.storedAs}/${req.partition}`)
    return { chunks: 0, bytes: 0 }
  }

  /** The abort phase: the move's fence lifted (or refused from now on, when it is still to come). */
  async #abort(port: DataGroupPort, req: MovePartitionRequest): Promise<MovePartitionResponse> {
    const r = await port.propose({
      type: 'unfence',
      queue: req.storedAs,
      partition: req.partition,
      moveId: req.moveId,
    })
    if (r.type !== 'unfenced') throw refusal(r, `unfence of ${req.storedAs}/${req.partition}`)
    return { chunks: 0, bytes: 0 }
  }

  /** Whether every replica reads a move's id in its fence and drop, and `fresh` chunks. */
  #namesMoves(): boolean {
    return this.#level() >= FORMAT_LEVEL_MOVE_IDS
  }

  /**
   * `ordered` for a move's chunks and drop, once every replica refuses a stale one of them
   * (FORMAT_LEVEL_MOVE_ORDER): the target leader's own check races with the later move's entries.
   */
  #ordered(): { ordered?: true } {
    return this.#level() >= FORMAT_LEVEL_MOVE_ORDER ? { ordered: true } : {}
  }

  /** The cluster's format level (1 when unknown). */
  #level(): number {
    return this.#groups.formatLevel?.() ?? 1
  }

  /** The move's id for its fence and drop entries, once every replica reads it. */
  #moveIdOf(req: MovePartitionRequest): { moveId?: number } {
    return this.#namesMoves() ? { moveId: req.moveId } : {}
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
