import { createLogger, type Logger } from './log'

/** For tests: a JSON logger of node n1 whose lines are kept, parsed, in `lines`. */
export function capturedLog(): { log: Logger; lines: { msg: string; [field: string]: unknown }[] } {
  const lines: { msg: string; [field: string]: unknown }[] = []
  const log = createLogger({
    nodeId: 'n1',
    level: 'info',
    format: 'json',
    destination: { write: (line: string) => void lines.push(JSON.parse(line)) },
  })
  return { log, lines }
}
