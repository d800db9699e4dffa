export type { EncodedBody } from '@mq/router-client'
export { encodeBody } from '@mq/router-client'
export { registerClusterCommands } from './commands/cluster'
export { NO_ACK_HELD_MAX, registerConsumeCommand } from './commands/consume'
export { COUNT_MAX, registerProduceCommand, SENDS_IN_FLIGHT_MAX } from './commands/produce'
export { registerQueueCommands } from './commands/queue'
export type { GlobalOptions, Session } from './context'
export { DEFAULT_SERVERS, DEFAULT_TIMEOUT_MS, Runtime } from './context'
export { DURATION_MS_MAX, formatDuration, parseDuration } from './durations'
export { CommandError, InterruptedError, UsageError } from './errors'
export type { Failure, FailureContext } from './exit-codes'
export { classify, ExitCode, oneLine } from './exit-codes'
export { handleInterrupts, INTERRUPTED, untilInterrupted } from './interrupt'
export type {
  CliAdmin,
  CliClient,
  CliConsumer,
  CliDelivery,
  CliIO,
  CliProducer,
  InterruptReason,
  OutputStream,
} from './io'
export { interruptReason } from './io'
export { LINE_BYTES_MAX, readLines } from './lines'
export { nodeIO } from './node-io'
export { durationArg, headerArg, integerArg, parseServers, serversArg } from './options'
export type { MessageRecord } from './output'
export { messageLine, messageRecord, Output } from './output'
export { createProgram, runCli } from './program'
export type { ProgressState } from './progress'
export { Progress, renderProgress } from './progress'
export type { Column } from './table'
export { formatFields, formatTable } from './table'
