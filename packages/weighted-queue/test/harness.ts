/**
 * Test harnesses: the engines the conformance suites run on, and a partition driver that
 * flushes its ops to the engine only every `flushEvery` applies (so reads must go through the
 * pending-write overlay, as under data-service's group commit).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type BatchOp, type Engine, LevelEngine, MemoryEngine } from '@mq/kv-storage'
import {
  type Command,
  type CommandResult,
  type Lease,
  type QueueConfig,
  QueuePartition,
  readPartitionSnapshot,
  restorePartitionOps,
} from '../src/index'

export interface EngineCase {
  readonly name: string
  readonly open: () => Promise<{ engine: Engine; dispose: () => Promise<void> }>
}

/** The conformance engines: MemoryEngine and LevelEngine (a real LevelDB in a temp dir). */
export const ENGINES: readonly EngineCase[] = [
  {
    name: 'memory',
    open: async () => {
      const engine = new MemoryEngine()
      return { engine, dispose: () => engine.close() }
    },
  },
  {
    name: 'leveldb',
    open: async () => {
      const dir = mkdtempSync(join(tmpdir(), 'wq-test-'))
      const engine = await LevelEngine.open(dir)
      return {
        engine,
        dispose: async () => {
          await engine.close()
          rmSync(dir, { recursive: true, force: true })
        },
      }
    },
  },
]

/** Drives a QueuePartition, writing its ops to the engine every `flushEvery` applies. */
export class LaggedQueue {
  private pendingOps: BatchOp[] = []
  private pendingGeneration = 0
  private unflushed = 0
  /** The ops of the last apply, as it returned them. */
  lastOps: readonly BatchOp[] = []

  private constructor(
    readonly engine: Engine,
    readonly prefix: Uint8Array,
    public partition: QueuePartition,
    private readonly flushEvery: number,
    private readonly config: Partial<QueueConfig>,
  ) {}

  static async open(engine: Engine, prefix: Uint8Array, config: Partial<QueueConfig>, flushEvery: number) {
    return new LaggedQueue(
      engine,
      prefix,
      await QueuePartition.open(engine, prefix, config),
      flushEvery,
      config,
    )
  }

  async apply(cmd: Command, nowMs: number): Promise<CommandResult> {
    const a = await this.partition.apply(cmd, nowMs)
    this.lastOps = a.ops
    this.pendingOps.push(...a.ops)
    this.pendingGeneration = a.generation
    if (++this.unflushed >= this.flushEvery) await this.flush()
    return a.result
  }

  async flush(): Promise<void> {
    if (this.pendingOps.length > 0) await this.engine.write(this.pendingOps, { sync: false })
    this.partition.release(this.pendingGeneration)
    this.pendingOps = []
    this.unflushed = 0
  }

  /**
   * Flushes, then reopens the partition from the engine alone (as after a restart: caches and
   * in-memory bounds gone). The config it was opened with applies only if none is stored yet.
   */
  async reopen(): Promise<void> {
    await this.flush()
    this.partition = await QueuePartition.open(this.engine, this.prefix, this.config)
  }
}

/** Results with errors reduced to their code, for comparison with the model. */
export function comparable(r: CommandResult): unknown {
  if (r.type === 'rejected') return { type: 'rejected', code: r.error.code }
  return r
}

/** The leases of a lease result; throws on any other result. */
export function leasesOf(r: CommandResult): readonly Lease[] {
  if (r.type !== 'lease') throw new Error(`expected a lease result, got ${JSON.stringify(r)}`)
  return r.leases
}

/**
 * Installs a snapshot of `from`'s partition under `prefix` into `to`, `pageKeys` keys a page,
 * clearing `to`'s partition first (as a replica installs a leader's image).
 */
export async function installSnapshot(
  from: Engine,
  to: Engine,
  prefix: Uint8Array,
  pageKeys: number,
): Promise<void> {
  const snap = await from.snapshot()
  let first = true
  for await (const page of readPartitionSnapshot(snap, prefix, pageKeys)) {
    await to.write(restorePartitionOps(prefix, page, first), { sync: false })
    first = false
  }
  await snap.close()
  if (first) await to.write(restorePartitionOps(prefix, [], true), { sync: false })
}
