import {
  bytesField,
  type MessageRule,
  mapField,
  messageField,
  messageRule,
  repeated,
  stringField,
  targetField,
  uint64Field,
  varintField,
} from './request-guard'
import {
  CREATE_TOKEN_ROLES_MAX,
  GET_ROUTES_QUEUES_MAX,
  HEADERS_PER_MESSAGE_MAX,
  LEASE_IDS_MAX,
  PRODUCE_MESSAGES_MAX,
} from './request-limits'

// The rules request-guard checks the requests of the client-facing services by: every field of
// each request message, as in proto/mq/v1/queue.proto and meta.proto (a test compares them with
// the compiled descriptors, so a field added there and not here fails it).

const PARTITION_TARGET = messageRule('PartitionTarget', {
  1: stringField('queue'),
  2: varintField('partition'),
  3: uint64Field('route_epoch'),
})

const target = targetField('target', PARTITION_TARGET)

const PRODUCE_MESSAGE = messageRule('ProduceMessage', {
  1: bytesField('body'),
  2: varintField('weight'),
  3: mapField('ProduceMessage', 'headers', { max: HEADERS_PER_MESSAGE_MAX, what: 'headers' }),
  4: stringField('key'),
  5: uint64Field('delay_ms'),
  6: stringField('dedup_key'),
})

const leaseIds = repeated(stringField('lease_ids'), {
  max: LEASE_IDS_MAX,
  what: 'lease ids',
  advice: 'settle in smaller batches',
})

/** A lease's acks (LeaseRequest.ack_lease_ids), bounded as an Ack's lease ids. */
const ackLeaseIds = repeated(stringField('ack_lease_ids'), {
  max: LEASE_IDS_MAX,
  what: 'lease ids to ack',
  advice: 'settle in smaller batches',
})

/** The rule of each Queue method's request. */
export const QUEUE_REQUEST_RULES = {
  produce: messageRule('ProduceRequest', {
    1: target,
    2: stringField('producer_id'),
    3: uint64Field('sequence'),
    4: repeated(messageField('messages', PRODUCE_MESSAGE), {
      max: PRODUCE_MESSAGES_MAX,
      what: 'messages',
      advice: 'send smaller batches',
      messageIndex: true,
    }),
    5: uint64Field('sequence_base'),
  }),
  lease: messageRule('LeaseRequest', {
    1: target,
    2: stringField('consumer_id'),
    3: varintField('max'),
    4: uint64Field('visibility_ms'),
    5: varintField('wait_ms'),
    6: stringField('attempt'),
    7: varintField('attempt_repeat'),
    8: ackLeaseIds,
  }),
  ack: messageRule('AckRequest', { 1: target, 2: leaseIds }),
  nack: messageRule('NackRequest', {
    1: target,
    2: leaseIds,
    3: uint64Field('delay_ms'),
    4: varintField('release'),
  }),
  extend: messageRule('ExtendRequest', { 1: target, 2: leaseIds, 3: uint64Field('extend_ms') }),
  purge: messageRule('PurgeRequest', { 1: target }),
  listDead: messageRule('ListDeadRequest', {
    1: target,
    2: varintField('limit'),
    3: uint64Field('after_id'),
  }),
  listReady: messageRule('ListReadyRequest', { 1: target, 2: varintField('limit') }),
  redrive: messageRule('RedriveRequest', {
    1: target,
    2: varintField('max'),
    3: uint64Field('through_place'),
    4: varintField('place_only'),
  }),
  purgeDead: messageRule('PurgeRequest', { 1: target }),
  stats: messageRule('StatsRequest', { 1: target }),
} as const satisfies Record<string, MessageRule>

const QUEUE_CONFIG = messageRule('QueueConfig', {
  1: varintField('partitions'),
  2: uint64Field('visibility_timeout_ms'),
  3: varintField('max_deliveries'),
  4: stringField('dead_letter_queue'),
  5: varintField('message_bytes_max'),
  6: uint64Field('queue_length_max'),
  7: varintField('strict_priority'),
  8: uint64Field('dedup_window_ms'),
  9: stringField('engine'),
  10: uint64Field('message_ttl_ms'),
  11: varintField('paused'),
  12: varintField('ordered_keys'),
  13: varintField('delivery_rate'),
  14: uint64Field('retry_backoff_min_ms'),
  15: uint64Field('retry_backoff_max_ms'),
})

const QUEUE_CONFIG_UPDATE = messageRule('QueueConfigUpdate', {
  1: uint64Field('visibility_timeout_ms'),
  2: varintField('max_deliveries'),
  3: stringField('dead_letter_queue'),
  4: varintField('message_bytes_max'),
  5: uint64Field('queue_length_max'),
  6: varintField('strict_priority'),
  7: uint64Field('dedup_window_ms'),
  8: uint64Field('message_ttl_ms'),
  9: varintField('partitions'),
  10: varintField('paused'),
  11: varintField('delivery_rate'),
  12: uint64Field('retry_backoff_min_ms'),
  13: uint64Field('retry_backoff_max_ms'),
})

const named = (message: string) => messageRule(message, { 1: stringField('name') })
const nodeNamed = (message: string) => messageRule(message, { 1: stringField('node_id') })

/** The rule of each Meta method's request. */
export const META_REQUEST_RULES = {
  getRoutes: messageRule('GetRoutesRequest', {
    1: repeated(stringField('queues'), { max: GET_ROUTES_QUEUES_MAX, what: 'queue names' }),
  }),
  createQueue: messageRule('CreateQueueRequest', {
    1: stringField('name'),
    2: messageField('config', QUEUE_CONFIG),
  }),
  updateQueue: messageRule('UpdateQueueRequest', {
    1: stringField('name'),
    2: messageField('update', QUEUE_CONFIG_UPDATE),
  }),
  deleteQueue: named('DeleteQueueRequest'),
  listQueues: messageRule('ListQueuesRequest', {
    1: stringField('prefix'),
    2: varintField('limit'),
    3: stringField('page_token'),
  }),
  describeQueue: named('DescribeQueueRequest'),
  clusterStatus: messageRule('ClusterStatusRequest', {}),
  scaleDataGroups: messageRule('ScaleDataGroupsRequest', { 1: varintField('groups') }),
  transferLeader: messageRule('TransferLeaderRequest', {
    1: uint64Field('group_id'),
    2: stringField('to_node_id'),
  }),
  drainNode: nodeNamed('DrainNodeRequest'),
  undrainNode: nodeNamed('UndrainNodeRequest'),
  setMetaVoters: messageRule('SetMetaVotersRequest', { 1: varintField('voters') }),
  setReplicationFactor: messageRule('SetReplicationFactorRequest', { 1: varintField('factor') }),
  createToken: messageRule('CreateTokenRequest', {
    1: stringField('name'),
    2: repeated(stringField('roles'), { max: CREATE_TOKEN_ROLES_MAX, what: 'roles' }),
    3: uint64Field('ttl_ms'),
  }),
  deleteToken: named('DeleteTokenRequest'),
  listTokens: messageRule('ListTokensRequest', {}),
  removeNode: nodeNamed('RemoveNodeRequest'),
} as const satisfies Record<string, MessageRule>
