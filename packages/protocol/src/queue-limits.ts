/**
 * The most partitions a queue may have: the meta service refuses more (its QUEUE_LIMITS), and
 * clients can refuse it before asking.
 */
export const QUEUE_PARTITIONS_MAX = 256

/** The most deliveries a queue may allow before it dead-letters a message (`max_deliveries`). */
export const QUEUE_MAX_DELIVERIES_MAX = 1000
