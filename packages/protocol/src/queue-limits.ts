/**
 * The most partitions a queue may have: the meta service refuses more (its QUEUE_LIMITS), and
 * clients can refuse it before asking.
 */
export const QUEUE_PARTITIONS_MAX = 256

/**
 * A queue's visibility timeout when its config leaves it 0 (the meta service's default), and
 * what a node or a client leases for when it has no config of the queue at hand.
 */
export const QUEUE_VISIBILITY_TIMEOUT_DEFAULT_MS = 30_000

/** The most deliveries a queue may allow before it dead-letters a message (`max_deliveries`). */
export const QUEUE_MAX_DELIVERIES_MAX = 1000
