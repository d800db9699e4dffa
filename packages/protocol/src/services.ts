import { BinaryReader, type BinaryWriter } from '@bufbuild/protobuf/wire'
import { makeGenericClientConstructor } from '@grpc/grpc-js'
import {
  HealthService as GeneratedHealthService,
  HealthCheckRequest,
} from './generated/grpc/health/v1/health'
import {
  ClusterStatusRequest,
  CreateQueueRequest,
  CreateTokenRequest,
  DeleteQueueRequest,
  DeleteTokenRequest,
  DescribeQueueRequest,
  DrainNodeRequest,
  MetaService as GeneratedMetaService,
  GetRoutesRequest,
  ListQueuesRequest,
  ListTokensRequest,
  RemoveNodeRequest,
  ScaleDataGroupsRequest,
  SetMetaVotersRequest,
  SetReplicationFactorRequest,
  TransferLeaderRequest,
  UndrainNodeRequest,
  UpdateQueueRequest,
} from './generated/mq/v1/meta'
import {
  ChangeReplicasRequest,
  ChangeReplicasResponse,
  FencePartitionsRequest,
  FencePartitionsResponse,
  FetchImageRequest,
  FetchImageResponse,
  type PeerClient as GeneratedPeerClient,
  PeerService as GeneratedPeerService,
  HeartbeatRequest,
  HeartbeatResponse,
  ImportPartitionRequest,
  ImportPartitionResponse,
  MovePartitionRequest,
  MovePartitionResponse,
  ProbeRequest,
  ProbeResponse,
  RaftBatch,
  RaftStreamEnd,
} from './generated/mq/v1/peer'
import {
  AckRequest,
  ExtendRequest,
  type QueueClient as GeneratedQueueClient,
  QueueService as GeneratedQueueService,
  LeasedMessage_HeadersEntry,
  LeaseRequest,
  LeaseResponse,
  LeaseResultsResponse,
  ListDeadRequest,
  ListReadyRequest,
  NackRequest,
  PartitionStats,
  ProduceRequest,
  ProduceResponse,
  PurgeRequest,
  PurgeResponse,
  RedriveRequest,
  RedriveResponse,
  StatsRequest,
} from './generated/mq/v1/queue'
import {
  type Decoder,
  decodingDeserializer,
  defineProtoKey,
  guardedDeserializer,
  type MessageRule,
} from './request-guard'
import { META_REQUEST_RULES, QUEUE_REQUEST_RULES } from './request-rules'
import { WireWriter } from './wire-writer'

/**
 * A generated message codec. Written with property (not method) signatures so that `T` is
 * checked both ways: a table entry with the wrong message type does not compile.
 */
interface Codec<T> {
  readonly encode: (message: T, writer?: BinaryWriter) => BinaryWriter
  readonly decode: (input: BinaryReader | Uint8Array, length?: number) => T
}

interface MethodShape {
  readonly requestSerialize: (value: never) => Buffer
  readonly responseSerialize: (value: never) => Buffer
}

type RequestOf<M> = M extends { requestSerialize: (value: infer T) => Buffer } ? T : never
type ResponseOf<M> = M extends { responseSerialize: (value: infer T) => Buffer } ? T : never

/** The request and response codec of every method of a service. */
type CodecTable<S> = { readonly [K in keyof S]: readonly [Codec<RequestOf<S[K]>>, Codec<ResponseOf<S[K]>>] }

/** The request decoder of every method of a service. */
type DecoderTable<S> = { readonly [K in keyof S]: Decoder<RequestOf<S[K]>> }

/** The guard rule of every method's request. */
type RuleTable<S> = { readonly [K in keyof S]: MessageRule }

/** `message` encoded by its generated codec through a WireWriter. */
export function encodeWire<T>(codec: Codec<T>, message: T): Buffer {
  const writer = new WireWriter()
  try {
    codec.encode(message, writer as unknown as BinaryWriter)
    return writer.finish()
  } finally {
    writer.release()
  }
}

/**
 * Decodes a response's strings as they were sent: a leading U+FEFF kept (protobuf-es's
 * default decoder drops it, so a message key or header value starting with a byte-order mark
 * reached consumers without it). Not fatal: a server's strings are valid UTF-8.
 */
const utf8Kept = new TextDecoder('utf-8', { ignoreBOM: true })
const decodeUtf8Kept = (bytes: Uint8Array): string => utf8Kept.decode(bytes)

const PROTO_KEY = Buffer.from('__proto__')
/** Part of PROTO_KEY that Buffer#indexOf finds (or not) several times faster in most answers. */
const PROTO_KEY_PART = Buffer.from('proto')

/**
 * `decoded` (a LeaseResponse decoded from `bytes`) with each leased message's header named
 * `__proto__` as an own property: the generated decoder assigns map entries
 * (`headers[key] = value`), which for that key sets no property, so a header the server stored
 * (the request guard keeps it, weighted-queue stores it) and answered never reached the
 * consumer. Restored as the request guard restores it; the bytes are walked only when they
 * hold the name.
 */
function restoreLeasedProtoHeaders(bytes: Buffer, decoded: LeaseResponse): LeaseResponse {
  if (bytes.indexOf(PROTO_KEY_PART) < 0 || bytes.indexOf(PROTO_KEY) < 0) return decoded
  // Bytes the generated decoder took yet malformed in a way it tolerates (no server sends
  // them) may stop the walk: the headers found before stay restored.
  try {
    const reader = new BinaryReader(bytes, decodeUtf8Kept)
    let index = 0
    // The walk of the generated decoders: LeaseResponse.messages (1), LeasedMessage.headers (5).
    while (reader.pos < reader.len) {
      const tag = reader.uint32()
      if (tag === 10) {
        const end = reader.uint32() + reader.pos
        const headers = decoded.messages[index++]?.headers
        while (reader.pos < end) {
          const inner = reader.uint32()
          if (inner === 42) {
            const entry = LeasedMessage_HeadersEntry.decode(reader, reader.uint32())
            if (entry.key === '__proto__' && headers !== undefined) defineProtoKey(headers, entry.value)
            continue
          }
          if ((inner & 7) === 4 || inner === 0) break
          reader.skip(inner & 7)
        }
        continue
      }
      if ((tag & 7) === 4 || tag === 0) break
      reader.skip(tag & 7)
    }
  } catch {
    // as decoded
  }
  return decoded
}

/**
 * `service` with every method's messages serialised through a WireWriter (same bytes), and
 * its responses decoded with their strings kept exactly (decodeUtf8Kept).
 */
function withWireWriter<S extends Record<string, MethodShape>>(service: S, codecs: CodecTable<S>): S {
  const out: Record<string, unknown> = {}
  for (const name of Object.keys(service) as (keyof S & string)[]) {
    const [request, response] = codecs[name]
    const decode = (bytes: Buffer) => response.decode(new BinaryReader(bytes, decodeUtf8Kept))
    out[name] = {
      ...service[name],
      requestSerialize: (value: RequestOf<S[typeof name]>) => encodeWire(request, value),
      responseSerialize: (value: ResponseOf<S[typeof name]>) => encodeWire(response, value),
      responseDeserialize:
        (response as unknown) === LeaseResponse
          ? (bytes: Buffer) => restoreLeasedProtoHeaders(bytes, decode(bytes) as LeaseResponse)
          : decode,
    }
  }
  return out as S
}

/**
 * `service` with every method's request deserialised by guardedDeserializer: a request that
 * breaks its rule (request-rules.ts) becomes a RefusedRequest that unaryHandler answers with
 * INVALID_ARGUMENT, and is never decoded. Only the server deserialises requests, so clients are
 * unchanged.
 */
function withRequestGuard<S extends Record<string, MethodShape>>(
  service: S,
  decoders: DecoderTable<S>,
  rules: RuleTable<S>,
): S {
  const out: Record<string, unknown> = {}
  for (const name of Object.keys(service) as (keyof S & string)[]) {
    out[name] = { ...service[name], requestDeserialize: guardedDeserializer(rules[name], decoders[name]) }
  }
  return out as S
}

/**
 * `service` with every method's request decoded by decodingDeserializer: bytes its decoder
 * cannot read become a RefusedRequest (INVALID_ARGUMENT naming `names[method]`, the message),
 * which its handlers answer (unaryHandler does; others check isRefusedRequest).
 */
function withDecodeRefusal<S extends Record<string, MethodShape>>(
  service: S,
  decoders: DecoderTable<S>,
  names: { readonly [K in keyof S]: string },
): S {
  const out: Record<string, unknown> = {}
  for (const name of Object.keys(service) as (keyof S & string)[]) {
    out[name] = { ...service[name], requestDeserialize: decodingDeserializer(names[name], decoders[name]) }
  }
  return out as S
}

function requestDecoders<S>(codecs: CodecTable<S>): DecoderTable<S> {
  const out: Record<string, unknown> = {}
  for (const name of Object.keys(codecs) as (keyof S & string)[]) out[name] = codecs[name][0]
  return out as DecoderTable<S>
}

const queueCodecs: CodecTable<typeof GeneratedQueueService> = {
  produce: [ProduceRequest, ProduceResponse],
  lease: [LeaseRequest, LeaseResponse],
  ack: [AckRequest, LeaseResultsResponse],
  nack: [NackRequest, LeaseResultsResponse],
  extend: [ExtendRequest, LeaseResultsResponse],
  purge: [PurgeRequest, PurgeResponse],
  listDead: [ListDeadRequest, LeaseResponse],
  listReady: [ListReadyRequest, LeaseResponse],
  redrive: [RedriveRequest, RedriveResponse],
  purgeDead: [PurgeRequest, PurgeResponse],
  stats: [StatsRequest, PartitionStats],
}

/**
 * The Queue service as grpc-js serves and calls it: the generated definition, whose messages
 * are encoded by WireWriter instead of BinaryWriter (a lease of 512 messages: 0.11-0.15 instead
 * of ~2.0 ms; a produce of 1,000: 0.11-0.16 instead of 1.5-1.6 ms; the bytes are the same), and
 * whose requests are checked before they are decoded (withRequestGuard).
 */
export const QueueService: typeof GeneratedQueueService = withRequestGuard(
  withWireWriter(GeneratedQueueService, queueCodecs),
  requestDecoders(queueCodecs),
  QUEUE_REQUEST_RULES,
)

export type QueueService = typeof GeneratedQueueService
export type QueueClient = GeneratedQueueClient
export const QueueClient = makeGenericClientConstructor(
  QueueService,
  'mq.v1.Queue',
) as unknown as typeof GeneratedQueueClient

/**
 * The Meta service: the generated definition (generated serializers: admin calls) whose
 * requests are checked before they are decoded (withRequestGuard).
 */
export const MetaService: typeof GeneratedMetaService = withRequestGuard(
  GeneratedMetaService,
  {
    getRoutes: GetRoutesRequest,
    createQueue: CreateQueueRequest,
    updateQueue: UpdateQueueRequest,
    deleteQueue: DeleteQueueRequest,
    listQueues: ListQueuesRequest,
    describeQueue: DescribeQueueRequest,
    clusterStatus: ClusterStatusRequest,
    scaleDataGroups: ScaleDataGroupsRequest,
    transferLeader: TransferLeaderRequest,
    drainNode: DrainNodeRequest,
    undrainNode: UndrainNodeRequest,
    setMetaVoters: SetMetaVotersRequest,
    setReplicationFactor: SetReplicationFactorRequest,
    createToken: CreateTokenRequest,
    deleteToken: DeleteTokenRequest,
    listTokens: ListTokensRequest,
    removeNode: RemoveNodeRequest,
  },
  META_REQUEST_RULES,
)

export type MetaService = typeof GeneratedMetaService

const peerCodecs: CodecTable<typeof GeneratedPeerService> = {
  raft: [RaftBatch, RaftStreamEnd],
  heartbeat: [HeartbeatRequest, HeartbeatResponse],
  movePartition: [MovePartitionRequest, MovePartitionResponse],
  importPartition: [ImportPartitionRequest, ImportPartitionResponse],
  changeReplicas: [ChangeReplicasRequest, ChangeReplicasResponse],
  fetchImage: [FetchImageRequest, FetchImageResponse],
  fencePartitions: [FencePartitionsRequest, FencePartitionsResponse],
  probe: [ProbeRequest, ProbeResponse],
}

/**
 * The Peer service, encoded by WireWriter likewise (a RaftBatch carries every entry a follower
 * is sent). Its requests are not guarded: peers are cluster members (the peer token). Bytes
 * that do not decode are answered INVALID_ARGUMENT (withDecodeRefusal; Peer.Raft's handler
 * checks isRefusedRequest), not INTERNAL.
 */
export const PeerService: typeof GeneratedPeerService = withDecodeRefusal(
  withWireWriter(GeneratedPeerService, peerCodecs),
  requestDecoders(peerCodecs),
  {
    raft: 'RaftBatch',
    heartbeat: 'HeartbeatRequest',
    movePartition: 'MovePartitionRequest',
    importPartition: 'ImportPartitionRequest',
    changeReplicas: 'ChangeReplicasRequest',
    fetchImage: 'FetchImageRequest',
    fencePartitions: 'FencePartitionsRequest',
    probe: 'ProbeRequest',
  },
)

export type PeerService = typeof GeneratedPeerService
export type PeerClient = GeneratedPeerClient
export const PeerClient = makeGenericClientConstructor(
  PeerService,
  'mq.v1.Peer',
) as unknown as typeof GeneratedPeerClient

/**
 * The standard health service (grpc.health.v1): the generated definition whose request bytes
 * that do not decode are answered INVALID_ARGUMENT (withDecodeRefusal; its handlers check
 * isRefusedRequest), not INTERNAL.
 */
export const HealthService: typeof GeneratedHealthService = withDecodeRefusal(
  GeneratedHealthService,
  { check: HealthCheckRequest, watch: HealthCheckRequest },
  { check: 'HealthCheckRequest', watch: 'HealthCheckRequest' },
)
