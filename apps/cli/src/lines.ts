import { UsageError } from './errors'

/** The longest stdin line `produce` accepts as one message. */
export const LINE_CHARS_MAX = 16 * 1024 * 1024

/**
 * Splits a stream of chunks into lines (LF or CRLF), decoding UTF-8 across chunk boundaries.
 * Empty lines are skipped; a last line without a newline counts. Throws UsageError when a line
 * is longer than `lineCharsMax` (so that a binary file piped in by mistake does not fill memory).
 */
export async function* readLines(
  source: AsyncIterable<string | Uint8Array>,
  lineCharsMax = LINE_CHARS_MAX,
): AsyncGenerator<string> {
  const decoder = new TextDecoder()
  let partial = ''
  for await (const chunk of source) {
    partial += typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true })
    let at = partial.indexOf('\n')
    while (at >= 0) {
      const line = partial.slice(0, at).replace(/\r$/, '')
      // The rest is checked below only while it has no newline: a line that ended in the chunk
      // that took it past the limit (up to a chunk more: 64 KiB on stdin) went out unchecked.
      if (line.length > lineCharsMax) throw tooLong(lineCharsMax)
      partial = partial.slice(at + 1)
      if (line.length > 0) yield line
      at = partial.indexOf('\n')
    }
    if (partial.length > lineCharsMax) throw tooLong(lineCharsMax)
  }
  partial += decoder.decode()
  const last = partial.replace(/\r$/, '')
  if (last.length > 0) yield last
}

function tooLong(lineCharsMax: number): UsageError {
  return new UsageError(`a stdin line is longer than ${lineCharsMax} characters; send big bodies with --file`)
}
