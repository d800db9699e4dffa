import type { Engine } from '@mq/kv-storage'
import type { Command, CommandResult, DeadMessage, QueueStats, StoredMessage } from './commands'
import type { QueueConfig } from './config'
import { QueuePartition } from './partition'

/**
 * A partition that writes each command's ops straight to its engine (no Raft, no group
 * commit): for tests, benchmarks and single-node tools. Calls must not overlap.
 */
export class DirectPartition {
  private constructor(
    private readonly engine: Engine,
    readonly partition: QueuePartition,
    private readonly sync: boolean,
  ) {}

  /** Opens the partition under `prefix`; `sync` makes every write wait for fsync. */
  static async open(
    engine: Engine,
    prefix: Uint8Array,
    config: Partial<QueueConfig> = {},
    sync = false,
  ): Promise<DirectPartition> {
    return new DirectPartition(engine, await QueuePartition.open(engine, prefix, config), sync)
  }

  /** Applies `command` at `nowMs`, writes its ops, and returns its result. */
  async apply(command: Command, nowMs: number): Promise<CommandResult> {
    const applied = await this.partition.apply(command, nowMs)
    if (applied.ops.length > 0) await this.engine.write(applied.ops, { sync: this.sync })
    this.partition.release(applied.generation)
    return applied.result
  }

  /** The partition's config as applied. */
  get config(): QueueConfig {
    return this.partition.config
  }

  /** See QueuePartition.nextTimedMs. */
  nextTimedMs(): number {
    return this.partition.nextTimedMs()
  }

  /** See QueuePartition.leasableAtMost. */
  leasableAtMost(nowMs: number): number {
    return this.partition.leasableAtMost(nowMs)
  }

  /** See QueuePartition.ttlDue. */
  ttlDue(nowMs: number): Promise<boolean> {
    return this.partition.ttlDue(nowMs)
  }

  stats(nowMs: number): Promise<QueueStats> {
    return this.partition.stats(nowMs)
  }

  /** See QueuePartition.deadCount. */
  deadCount(): number {
    return this.partition.deadCount()
  }

  /** See QueuePartition.deadEnd. */
  deadEnd(): number {
    return this.partition.deadEnd()
  }

  listDead(max: number, cursor?: number): Promise<DeadMessage[]> {
    return this.partition.listDead(max, cursor)
  }

  listReady(max: number): Promise<StoredMessage[]> {
    return this.partition.listReady(max)
  }
}
