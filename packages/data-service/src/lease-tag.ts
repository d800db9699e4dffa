/**
 * Lease ids on the wire carry the partition they were leased from: `<queueId>.<partition>.`
 * before the partition's own `<messageId>.<delivery>` (from FORMAT_LEVEL_LEASE_TAGS). A
 * partition's message ids start at 1 in every incarnation of its queue, so without the tag an
 * ack sent after the queue was deleted and created again (the SDK follows the new route), or
 * sent to another partition, could settle another consumer's lease of the same id. A tagged id
 * settles only in the partition and incarnation that made it; an untagged one (leased below the
 * level) is taken as it is.
 */

/** The wire form of `leaseId` (a partition's `<messageId>.<delivery>`) of partition `partition` of queue incarnation `queueId`. */
export function tagLeaseId(leaseId: string, queueId: number, partition: number): string {
  return `${queueId}.${partition}.${leaseId}`
}

/**
 * The partition's own lease id of wire id `wireId`, settled in partition `partition` of queue
 * incarnation `queueId` (undefined: the stored name carries none, as in tests): an untagged id as
 * it is, a tagged one without its tag when the tag names this partition and incarnation, else
 * '' — which no partition knows (its status is unknown, nothing changes).
 */
export function untagLeaseId(wireId: string, queueId: number | undefined, partition: number): string {
  const first = wireId.indexOf('.')
  const second = first < 0 ? -1 : wireId.indexOf('.', first + 1)
  const third = second < 0 ? -1 : wireId.indexOf('.', second + 1)
  if (third < 0) return wireId // `<messageId>.<delivery>` (or malformed: the partition says unknown)
  const tag = wireId.slice(0, second)
  return queueId !== undefined && tag === `${queueId}.${partition}` ? wireId.slice(second + 1) : ''
}
