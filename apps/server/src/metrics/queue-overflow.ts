/**
 * The `queue` label of operations on a queue that found no room among the queue series
 * (`queueSeriesMax` taken): no queue name starts with `_` (queue-name.ts).
 */
export const QUEUE_OVERFLOW = '_overflow'
