import { StringDecoder } from 'node:string_decoder'

/** The longest line held back waiting for its end; a longer one goes out in pieces this long. */
export const PREFIXED_LINE_CHARS_MAX = 64 * 1024

/**
 * The lines of one output stream, each told to `out` once whole (a line split across chunks,
 * or a character across two, is joined first), the last unended one at `end()`. Empty lines
 * are left out. Bounded: a line longer than PREFIXED_LINE_CHARS_MAX goes out in pieces.
 */
export class PrefixedLines {
  readonly #out: (line: string) => void
  readonly #decoder = new StringDecoder('utf8')
  #partial = ''

  constructor(out: (line: string) => void) {
    this.#out = out
  }

  write(chunk: Buffer | string): void {
    const text = this.#partial + (typeof chunk === 'string' ? chunk : this.#decoder.write(chunk))
    const lines = text.split('\n')
    this.#partial = lines.pop() ?? ''
    for (const line of lines) this.#tell(line)
    while (this.#partial.length > PREFIXED_LINE_CHARS_MAX) {
      this.#tell(this.#partial.slice(0, PREFIXED_LINE_CHARS_MAX))
      this.#partial = this.#partial.slice(PREFIXED_LINE_CHARS_MAX)
    }
  }

  /** The stream ended: what is left of its last line goes out. */
  end(): void {
    const rest = this.#partial + this.#decoder.end()
    this.#partial = ''
    for (const line of rest.split('\n')) this.#tell(line)
  }

  #tell(line: string): void {
    if (line !== '') this.#out(line)
  }
}
