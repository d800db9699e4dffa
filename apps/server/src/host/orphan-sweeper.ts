import {
  type DataGroupMachine,
  type DataGroupPort,
  orphanPartitions,
  type PartitionRef,
  queueNamesOf,
} from '@mq/data-service'
import { FORMAT_LEVEL_DROP_IMPORT } from '@mq/protocol'
import { ledGroups } from './led-groups'

/** Partitions one sweep drops at most (each drop is one Raft entry deleting a key range). */
export const ORPHAN_DROPS_PER_SWEEP_MAX = 16

/** A partition a sweep dropped: held by the group, or an unfinished import into it. */
export interface DroppedOrphan {
  readonly groupId: number
  readonly partition: PartitionRef
  readonly importing: boolean
}

export interface OrphanSweeperHost {
  /** The data groups hosted here (only those this node leads are swept). */
  groups(): Iterable<DataGroupPort>
  /**
   * The current incarnation (queue id) of each of `names` that exists, read linearizably from
   * the meta group; a name missing from the answer is a queue that does not exist.
   */
  liveQueues(names: readonly string[]): Promise<ReadonlyMap<string, number>>
  /** The cluster's format level as this node last heard it (protocol FORMAT_LEVEL). */
  formatLevel(): number
}

/**
 * Frees the storage of deleted queues. A data group keeps a queue's partitions under the
 * queue's incarnation (`name#queueId`); deleting the queue in the meta group does not touch
 * the data groups, so each group's leader looks, now and then, for partitions whose
 * incarnation the meta group no longer has (deleted, or created again with a new id) and
 * proposes `drop` for them: the registry entry and every key of the partition go in one entry,
 * on every replica. A partition being moved keeps its incarnation and is never swept; an
 * unfinished import of a deleted queue's partition (its move abandoned with the queue) is,
 * from format level FORMAT_LEVEL_DROP_IMPORT (a replica of an earlier version would refuse
 * that drop and keep the partial copy).
 */
export class OrphanSweeper {
  readonly #host: OrphanSweeperHost
  #busy = false

  constructor(host: OrphanSweeperHost) {
    this.#host = host
  }

  /**
   * One sweep; resolves with what it dropped. A failure (no meta leader, lost leadership)
   * ends the sweep quietly: the next one tries again.
   */
  async sweep(): Promise<DroppedOrphan[]> {
    if (this.#busy) return []
    this.#busy = true
    const dropped: DroppedOrphan[] = []
    try {
      const leading = ledGroups(this.#host.groups())
      const imports = this.#host.formatLevel() >= FORMAT_LEVEL_DROP_IMPORT
      const candidates = (machine: DataGroupMachine): string[] =>
        imports ? [...machine.partitionIds(), ...machine.importIds()] : machine.partitionIds()
      // Taken once, before the meta read: a partition opened or imported while it runs (a new
      // queue's, a move's) was not asked about, and its queue would look deleted.
      const held = leading.map((port) => ({ port, ids: candidates(port.machine) }))
      const names = queueNamesOf(held.flatMap((h) => h.ids))
      if (names.size === 0) return dropped
      const live = await this.#host.liveQueues([...names])
      for (const { port, ids } of held) {
        for (const partition of orphanPartitions(ids, live)) {
          if (dropped.length >= ORPHAN_DROPS_PER_SWEEP_MAX) return dropped
          const importing = !port.machine.holds(partition.queue, partition.index)
          const r = await port.propose({ type: 'drop', queue: partition.queue, partition: partition.index })
          if (r.type === 'dropped') dropped.push({ groupId: port.groupId, partition, importing })
        }
      }
      return dropped
    } catch {
      return dropped
    } finally {
      this.#busy = false
    }
  }
}
