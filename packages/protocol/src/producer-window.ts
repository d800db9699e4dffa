/**
 * The most batches an idempotent producer may have in flight to one partition: a broker
 * remembers this many of each producer's latest batches per partition, so a retry of any
 * batch in flight is recognised (weighted-queue's PRODUCER_BATCHES_KEPT; data-service's tests
 * check that the two agree).
 */
export const IDEMPOTENT_BATCHES_IN_FLIGHT_MAX = 5
