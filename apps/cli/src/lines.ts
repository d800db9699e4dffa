import { UsageError } from './errors'

/** The longest stdin line `produce` accepts as one message, in bytes. */
export const LINE_BYTES_MAX = 16 * 1024 * 1024

const LF = 0x0a
const CR = 0x0d
const BOM = [0xef, 0xbb, 0xbf]
const ENCODER = new TextEncoder()

/**
 * Splits a stream of chunks into lines (LF or CRLF). Empty lines are skipped; a last line
 * without a newline counts. A line that is valid UTF-8 comes as a string, any other as its
 * bytes, unchanged: decoding every line as UTF-8 turned each invalid byte into U+FFFD, so
 * `mq produce` sent other bytes than it read, without a word (Latin-1 logs, binary records).
 * A UTF-8 byte order mark at the start of the stream is dropped. Throws UsageError when a line
 * is longer than `lineBytesMax` bytes (so that a binary file piped in by mistake does not fill
 * memory).
 */
export async function* readLines(
  source: AsyncIterable<string | Uint8Array>,
  lineBytesMax = LINE_BYTES_MAX,
): AsyncGenerator<string | Uint8Array> {
  const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })
  /** The bytes of the line not ended yet, in the chunks they came in. */
  let partial: Uint8Array[] = []
  let partialBytes = 0
  let first = true
  const line = (bytes: Uint8Array): string | Uint8Array | undefined => {
    let end = bytes.length
    if (end > 0 && bytes[end - 1] === CR) end--
    let start = 0
    if (first) {
      first = false
      if (BOM.every((b, i) => bytes[i] === b)) start = BOM.length
    }
    if (end - start <= 0) return undefined
    const text = bytes.subarray(start, end)
    try {
      return utf8.decode(text)
    } catch {
      return Uint8Array.from(text)
    }
  }
  for await (const chunk of source) {
    const bytes = typeof chunk === 'string' ? ENCODER.encode(chunk) : chunk
    let start = 0
    let at = bytes.indexOf(LF)
    while (at >= 0) {
      // The rest is checked below only while it has no newline: a line that ended in the chunk
      // that took it past the limit (up to a chunk more: 64 KiB on stdin) went out unchecked.
      if (partialBytes + (at - start) > lineBytesMax) throw tooLong(lineBytesMax)
      const whole =
        partial.length === 0 ? bytes.subarray(start, at) : concat([...partial, bytes.subarray(start, at)])
      partial = []
      partialBytes = 0
      const next = line(whole)
      if (next !== undefined) yield next
      start = at + 1
      at = bytes.indexOf(LF, start)
    }
    if (start < bytes.length) {
      partial.push(bytes.subarray(start))
      partialBytes += bytes.length - start
    }
    if (partialBytes > lineBytesMax) throw tooLong(lineBytesMax)
  }
  const last = line(concat(partial))
  if (last !== undefined) yield last
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.length
  }
  return out
}

function tooLong(lineBytesMax: number): UsageError {
  return new UsageError(`a stdin line is longer than ${lineBytesMax} bytes; send big bodies with --file`)
}
