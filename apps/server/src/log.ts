import { type DestinationStream, type Logger, pino } from 'pino'
import pretty from 'pino-pretty'
import type { LogFormat, LogLevel } from './config'

export type { Logger }

export interface LoggerOptions {
  readonly nodeId: string
  readonly level: LogLevel
  readonly format: LogFormat
  /** Where lines go (default: stdout, written synchronously so nothing is lost at exit). */
  readonly destination?: DestinationStream
}

/**
 * The server's logger: pino, one JSON object per line with `level`, `time`, `node` (this
 * node's id) and the event's own fields — `group` for a Raft group, `requestId` for an RPC.
 * `pretty` prints one readable line per event instead (for `mq-server dev`).
 */
export function createLogger(options: LoggerOptions): Logger {
  const settings = {
    level: options.level,
    base: { node: options.nodeId },
    formatters: { level: (label: string) => ({ level: label }) },
  }
  if (options.format === 'pretty') {
    return pino(
      settings,
      pretty({
        sync: true,
        singleLine: true,
        colorize: false,
        translateTime: 'HH:MM:ss.l',
        ignore: 'pid,hostname',
        destination: options.destination ?? 1,
      }),
    )
  }
  return pino(settings, options.destination ?? pino.destination({ dest: 1, sync: true }))
}

/** A logger that writes nothing (for code paths that run without a configured logger). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' })
}
