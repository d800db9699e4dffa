/**
 * The most replicas a data group may have: the replication factor's bound (meta-service's
 * META_LIMITS and setReplicationFactor, mq-server's `"replicationFactor"`, `mq cluster
 * replication`, the web console). Every replica applies every command, and a group's
 * majority grows with it: more buys no more safety than most clusters need.
 */
export const REPLICAS_PER_GROUP_MAX = 7

/**
 * The sizes the meta group may keep (`mq cluster meta-voters`): odd, since an even count
 * tolerates no more failures than the odd one below it, and at most REPLICAS_PER_GROUP_MAX.
 */
export const META_VOTER_COUNTS: readonly number[] = [1, 3, 5, 7]

/**
 * The longest lifetime a token may be given (`mq token create --expires-in`, the Meta
 * CreateToken call): 10 years. Here so that the CLI refuses a longer one itself, naming its
 * flag (until 2026-12-07 only meta-service knew it, and the server's refusal named neither).
 */
export const TOKEN_TTL_MS_MAX = 10 * 365 * 24 * 3_600_000
