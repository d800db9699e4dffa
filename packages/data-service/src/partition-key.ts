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
