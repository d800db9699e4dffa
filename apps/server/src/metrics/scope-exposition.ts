import { QUEUE_OVERFLOW } from './queue-overflow'

/**
 * The part of a Prometheus text exposition a caller who sees only some queues may read: every
 * line but the samples whose `queue` label names a queue `sees` refuses (the operation counters'
 * `_overflow` included: it sums queues of anyone). Comment lines (`# HELP`, `# TYPE`) stay, so a
 * family whose samples all went is declared without samples, which the format allows.
 */
export function scopeExposition(text: string, sees: (queue: string) => boolean): string {
  const lines = text.split('\n')
  const kept = lines.filter((line) => {
    if (line === '' || line.startsWith('#')) return true
    // A line this cannot read is dropped: it might name a queue.
    const sample = parseSample(line)
    if (!sample) return false
    const queue = sample.labels.queue
    // Never given to `sees`: a pattern such as `*flow` would match it.
    return queue === undefined || (queue !== QUEUE_OVERFLOW && sees(queue))
  })
  return kept.join('\n')
}

/** A sample line of the text format: `name{label="value",…} value`. */
const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/
/** One label of a sample, its value read whole, escapes included (`\\`, `\"`, `\n`). */
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g

/**
 * The metric name, labels (unescaped) and value text of a sample line, or undefined when the
 * line is not one. Values are read whole, so a value that holds `queue="` is not taken for a label.
 */
export function parseSample(
  line: string,
): { name: string; labels: Record<string, string>; value: string } | undefined {
  const m = SAMPLE.exec(line)
  if (!m) return undefined
  const labels: Record<string, string> = {}
  for (const l of (m[2] ?? '').matchAll(LABEL)) {
    labels[l[1] as string] = (l[2] as string).replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c))
  }
  return { name: m[1] as string, labels, value: m[3] as string }
}
