import type { BatchOp, KeyValue, KvReader } from '@mq/kv-storage'
import { compareKeys } from '@mq/kv-storage'
import { type KeySpan, PartitionKeys } from './keys'

/** The most entries one snapshot page holds. */
export const SNAPSHOT_PAGE_ENTRIES_MAX = 65_536

/** Every key of the partition under `prefix`: a snapshot is exactly this range. */
export function partitionKeySpan(prefix: Uint8Array): KeySpan {
  return new PartitionKeys(prefix).all()
}

/**
 * Reads the partition under `prefix` from `reader` (take an engine snapshot for a
 * consistent view) in pages of at most `pageEntries`, in key order.
 */
export async function* readPartitionSnapshot(
  reader: KvReader,
  prefix: Uint8Array,
  pageEntries = 4096,
): AsyncGenerator<KeyValue[]> {
  const limit = Math.max(1, Math.min(pageEntries, SNAPSHOT_PAGE_ENTRIES_MAX))
  const span = partitionKeySpan(prefix)
  let after: Uint8Array | undefined
  for (;;) {
    const page = await reader.range(
      after ? { gt: after, lt: span.lt, limit } : { gte: span.gte, lt: span.lt, limit },
    )
    if (page.length > 0) yield page
    if (page.length < limit) return
    after = (page[page.length - 1] as KeyValue)[0]
  }
}

/**
 * The ops that install one snapshot page under `prefix`: the first page also clears the
 * partition's whole range. Write all pages, then open a new QueuePartition on the engine.
 * Throws RangeError if an entry lies outside the partition.
 */
export function restorePartitionOps(
  prefix: Uint8Array,
  page: readonly KeyValue[],
  first: boolean,
): BatchOp[] {
  const span = partitionKeySpan(prefix)
  const ops: BatchOp[] = first ? [{ type: 'clear', gte: span.gte, lt: span.lt }] : []
  for (const [key, value] of page) {
    if (compareKeys(key, span.gte) < 0 || compareKeys(key, span.lt) >= 0) {
      throw new RangeError('snapshot entry outside the partition prefix; wrong prefix or a corrupt snapshot')
    }
    ops.push({ type: 'put', key, value })
  }
  return ops
}
