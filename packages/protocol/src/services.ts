import type { BinaryReader, BinaryWriter } from '@bufbuild/protobuf/wire'
import { makeGenericClientConstructor } from '@grpc/grpc-js'
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
  RaftBatch,
  RaftStreamEnd,
} from './generated/mq/v1/peer'
import {
  AckRequest,
  ExtendRequest,
  type QueueClient as GeneratedQueueClient,
  QueueService as GeneratedQueueService,
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

/** `service` with every method's messages serialised through a WireWriter (same bytes). */
function withWireWriter<S extends Record<string, MethodShape>>(service: S, codecs: CodecTable<S>): S {
  const out: Record<string, unknown> = {}
  for (const name of Object.keys(service) as (keyof S & string)[]) {
    const [request, response] = codecs[name]
    out[name] = {
      ...service[name],
      requestSerialize: (value: RequestOf<S[typeof name]>) => encodeWire(request, value),
      responseSerialize: (value: ResponseOf<S[typeof name]>) => encodeWire(response, value),
    }
  }
  return out as S
}

/**
 * The Queue service as grpc-js serves and calls it: the generated definition, whose messages
 * are encoded by WireWriter instead of BinaryWriter (a lease of 512 messages: 0.11-0.15 instead
 * of ~2.0 ms; a produce of 1,000: 0.11-0.16 instead of 1.5-1.6 ms). The bytes are the same.
 */
export const QueueService: typeof GeneratedQueueService = withWireWriter(GeneratedQueueService, {
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
})

export type QueueService = typeof GeneratedQueueService
export type QueueClient = GeneratedQueueClient
export const QueueClient = makeGenericClientConstructor(
  QueueService,
  'mq.v1.Queue',
) as unknown as typeof GeneratedQueueClient

/** The Peer service likewise (a RaftBatch carries every entry a follower is sent). */
export const PeerService: typeof GeneratedPeerService = withWireWriter(GeneratedPeerService, {
  raft: [RaftBatch, RaftStreamEnd],
  heartbeat: [HeartbeatRequest, HeartbeatResponse],
  movePartition: [MovePartitionRequest, MovePartitionResponse],
  importPartition: [ImportPartitionRequest, ImportPartitionResponse],
  changeReplicas: [ChangeReplicasRequest, ChangeReplicasResponse],
  fetchImage: [FetchImageRequest, FetchImageResponse],
  fencePartitions: [FencePartitionsRequest, FencePartitionsResponse],
})

export type PeerService = typeof GeneratedPeerService
export type PeerClient = GeneratedPeerClient
export const PeerClient = makeGenericClientConstructor(
  PeerService,
  'mq.v1.Peer',
) as unknown as typeof GeneratedPeerClient
