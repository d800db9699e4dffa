import type {
  Admin,
  ClientOptions,
  ConsumerOptions,
  Delivery,
  Producer,
  ProducerOptions,
} from '@mq/router-client'

/** A stream the CLI writes to: stdout or stderr. `isTTY` turns on progress bars. */
export interface OutputStream {
  /** `done` (when the stream takes one) is called once the text left the process, or failed. */
  write(text: string, done?: (error?: Error | null) => void): unknown
  readonly isTTY?: boolean
  /** Terminal width, when a TTY. */
  readonly columns?: number
}

/** The admin calls the CLI makes (the SDK's Admin satisfies it). */
export type CliAdmin = Pick<
  Admin,
  | 'createQueue'
  | 'updateQueue'
  | 'deleteQueue'
  | 'describeQueue'
  | 'listQueues'
  | 'clusterStatus'
  | 'scaleDataGroups'
  | 'purgeQueue'
  | 'deadLetters'
  | 'redriveDeadLetters'
  | 'purgeDeadLetters'
  | 'queueStats'
  | 'drainNode'
  | 'undrainNode'
  | 'peek'
  | 'removeNode'
  | 'setMetaVoters'
  | 'setReplicationFactor'
  | 'transferLeader'
  | 'createToken'
  | 'deleteToken'
  | 'listTokens'
>

/** One leased message as the CLI sees it (the SDK's Delivery satisfies it). */
export type CliDelivery = Pick<
  Delivery,
  'id' | 'partition' | 'body' | 'weight' | 'headers' | 'key' | 'deliveryCount' | 'ack' | 'release'
>

export type CliProducer = Pick<Producer, 'send' | 'flush' | 'close'>

export interface CliConsumer extends AsyncIterable<CliDelivery> {
  /** Stops leasing (what was leased and not handed out goes back); handed-out ones can still be settled. */
  stop(): Promise<void>
  close(): Promise<void>
}

/** The part of MqClient the CLI uses; tests give a fake through CliIO.connect. */
export interface CliClient {
  readonly admin: CliAdmin
  producer(queue: string, options?: Partial<ProducerOptions>): CliProducer
  consumer(queue: string, options?: Partial<ConsumerOptions>): CliConsumer
  close(): Promise<void>
}

/**
 * Everything the CLI touches outside itself, injected so that tests run commands in process:
 * the standard streams, the environment, files, the clock and the way to reach a cluster.
 */
export interface CliIO {
  readonly stdout: OutputStream
  readonly stderr: OutputStream
  /** Chunks of standard input (read for `produce` without a body). */
  readonly stdin: AsyncIterable<string | Uint8Array> & { readonly isTTY?: boolean }
  readonly env: Readonly<Record<string, string | undefined>>
  /** Connects to a cluster (MqClient.connect in the binary). */
  connect(options: ClientOptions): Promise<CliClient>
  readFile(path: string): Promise<Uint8Array>
  /** Wall-clock milliseconds since the epoch: heartbeat ages, rates, progress throttling. */
  now(): number
  /**
   * Aborts on Ctrl-C: long-running commands (`consume --follow`) stop cleanly. Its `reason`
   * is an InterruptReason (the binary's nodeIO), or anything else (a test's plain abort()).
   */
  readonly interrupt?: AbortSignal
}

/** Why `interrupt` aborted, and the exit code of a command it stopped before its end. */
export interface InterruptReason {
  /** E.g. `Ctrl-C`, `SIGTERM`, `stdout's reader left (EPIPE)`. */
  readonly why: string
  /**
   * 128 + the signal's number; 0 for stdout's reader gone (mq ends quietly, as for `head`); 4
   * for stdout failing otherwise (a full disk).
   */
  readonly exitCode: number
}

/** The reason of an aborted `interrupt`, as an InterruptReason (a plain abort() counts as Ctrl-C). */
export function interruptReason(signal: AbortSignal | undefined): InterruptReason {
  const r = signal?.reason as Partial<InterruptReason> | undefined
  return typeof r?.why === 'string' && typeof r.exitCode === 'number'
    ? { why: r.why, exitCode: r.exitCode }
    : { why: 'Ctrl-C', exitCode: 130 }
}
