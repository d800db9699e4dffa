/**
 * Bounds on what one client request may carry, checked on its bytes before it is decoded
 * (request-guard.ts): a request over one is answered INVALID_ARGUMENT and never becomes
 * objects. Without them a 64 MiB request (the server's receive limit, needed for peer traffic)
 * of empty repeated messages decoded into ~33 M objects (~10 GiB) and the process died.
 */

/** Messages one Produce may carry (the SDK's batchMax is at most this). */
export const PRODUCE_MESSAGES_MAX = 1_000

/** Lease ids one Ack, Nack or Extend may carry (the SDK settles in batches of at most this). */
export const LEASE_IDS_MAX = 1_000

/**
 * Headers one produced message may carry. weighted-queue counts their bytes towards the
 * queue's message size limit but sets no count; this bounds the objects a request makes
 * (with REQUEST_FIELDS_MAX). Far above any real use: the dead-letter forwarder adds two
 * headers to a copy, and a message stored with many must still be copied (64 was the first
 * bound, which refused the copy of a message stored with 63).
 */
export const HEADERS_PER_MESSAGE_MAX = 1_000

/**
 * The longest key or dedup key of a produced message, in UTF-8 bytes: every partition's own bound
 * on them (weighted-queue's NAME_BYTES_MAX, which data-service's checkProduce applies), whatever
 * the queue's settings. Clients check it before sending: a message past it refuses its whole
 * batch at the partition, the valid messages sent with it too.
 */
export const MESSAGE_KEY_BYTES_MAX = 256

/**
 * The longest consumer id of a Lease, in UTF-8 bytes: every partition's own bound (weighted-queue's
 * NAME_BYTES_MAX, which data-service's checkLease applies). The SDK checks it when a consumer is
 * made: a longer one had every lease of the consumer refused.
 */
export const CONSUMER_ID_BYTES_MAX = 256

/**
 * The headers the dead-letter forwarder (mq-server) adds to the copy of a dead message that it
 * moves to the queue's dead-letter queue: where the message died, and after how many
 * deliveries. A produced message may carry at most HEADERS_PER_MESSAGE_MAX − 2 others
 * (data-service's checkProduce), so that its copy still fits HEADERS_PER_MESSAGE_MAX: one
 * stored with 999 or 1,000 stayed in its dead-letter list for good, refused by the target.
 */
export const DEAD_LETTER_SOURCE_HEADER = 'mq-dead-letter-source'
export const DEAD_LETTER_DELIVERIES_HEADER = 'mq-dead-letter-deliveries'

/**
 * The longest a Lease long-polls (its `wait_ms`): the server answers a longer wait after this,
 * empty if nothing came (data-service's QueueLimits.leaseWaitMsMax, which mq-server keeps). The
 * SDK's consumer asks for at most this, so that it times its polls as the server does: until
 * 2026-12-07 a consumer with `waitMs` above twice this took each empty answer for an early one
 * and backed off, and a silent leader's long poll was noticed only after the whole `waitMs`.
 */
export const LONG_POLL_MS_MAX = 30_000

/**
 * Queue names one GetRoutes may ask for: the meta group's queue limit (meta-service
 * META_LIMITS.queuesMax), since a node asks for the routes of every queue it hosts at once.
 */
export const GET_ROUTES_QUEUES_MAX = 100_000

/**
 * Roles one CreateToken may carry, as a bound on memory only: the meta service itself allows
 * fewer (ROLES_PER_TOKEN_MAX) and says so.
 */
export const CREATE_TOKEN_ROLES_MAX = 1_000

/**
 * Fields one request may hold, counted at every depth (a header is three: its entry, name and
 * value). The largest request the other limits allow, a Produce of PRODUCE_MESSAGES_MAX
 * messages of HEADERS_PER_MESSAGE_MAX headers with every field set, holds 3,006,007. Until
 * 2026-12-07 the bound was 1,000,000 (said to be 5 times that largest request): the SDK's
 * default batch of 512 messages with 998 headers each was refused, every message of it valid,
 * and the refusal named one of them, which the SDK failed as invalid. This bounds the work on
 * a request that sends a singular or unknown field over and over, which the decoder decodes
 * each time and keeps the last of (16 M producer_ids: 1.2 s).
 */
export const REQUEST_FIELDS_MAX = 3_100_000
