/**
 * The most partitions a queue may have: the meta service refuses more (its QUEUE_LIMITS), and
 * clients can refuse it before asking.
 */
export const QUEUE_PARTITIONS_MAX = 256
