/**
 * A partition's identity inside a data group: the queue it belongs to and its index.
 * `partitionId` renders it as the stable string used in logs, metrics and storage
 * addresses: `<queue>/<index>`.
 */
export interface PartitionRef {
  readonly queue: string
  readonly index: number
}

/** Renders a partition reference as `<queue>/<index>`. Requires a non-negative integer index. */
export function partitionId(ref: PartitionRef): string {
  if (!Number.isInteger(ref.index) || ref.index < 0) {
    throw new RangeError(`partition index must be a non-negative integer, got ${ref.index}`)
  }
  return `${ref.queue}/${ref.index}`
}

/** Parses `<queue>/<index>`; returns undefined when `id` is not of that form. */
export function parsePartitionId(id: string): PartitionRef | undefined {
  const slash = id.lastIndexOf('/')
  if (slash <= 0) return undefined
  const digits = id.slice(slash + 1)
  if (!/^(0|[1-9][0-9]*)$/.test(digits)) return undefined
  return { queue: id.slice(0, slash), index: Number(digits) }
}

/**
 * The name a queue's partitions are stored under in data groups: the queue's name and its
 * incarnation (`name#queueId`), so that a queue deleted and created again never sees the old
 * one's messages, even in the same groups.
 */
export function storedQueueName(queue: string, queueId: number): string {
  return `${queue}#${queueId}`
}

/** Splits a stored queue name (`name#queueId`) into its parts; undefined when it is not one. */
export function parseStoredQueueName(stored: string): { queue: string; queueId: number } | undefined {
  const hash = stored.lastIndexOf('#')
  if (hash <= 0) return undefined
  const digits = stored.slice(hash + 1)
  if (!/^[1-9][0-9]*$/.test(digits)) return undefined
  return { queue: stored.slice(0, hash), queueId: Number(digits) }
}

/** The names of the queues (not their stored names) that partition ids `ids` belong to. */
export function queueNamesOf(ids: Iterable<string>): Set<string> {
  const names = new Set<string>()
  for (const id of ids) {
    const stored = parseStoredQueueName(parsePartitionId(id)?.queue ?? '')
    if (stored) names.add(stored.queue)
  }
  return names
}

/**
 * The partitions among `held` (partition ids as `<stored queue name>/<index>`) whose queue
 * incarnation is gone: `live` maps each queue that exists to its current incarnation, so a
 * partition of a deleted queue, or of an earlier incarnation of a queue created again, is an
 * orphan. A partition moving between groups keeps its incarnation, so it is never one. Ids
 * that are not stored-queue partition ids are left alone.
 */
export function orphanPartitions(held: readonly string[], live: ReadonlyMap<string, number>): PartitionRef[] {
  const orphans: PartitionRef[] = []
  for (const id of held) {
    const ref = parsePartitionId(id)
    const stored = ref && parseStoredQueueName(ref.queue)
    if (!ref || !stored) continue
    if (live.get(stored.queue) !== stored.queueId) orphans.push(ref)
  }
  return orphans
}
