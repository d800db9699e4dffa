/** A one-line progress display on stderr, only when stderr is a TTY; throttled to 5 Hz. */
export class Progress {
  #lastMs = 0
  #shown = false

  constructor(
    private readonly label: string,
    private readonly stream: NodeJS.WriteStream = process.stderr,
  ) {}

  /** Shows `done` of `total` (and `text`) on the progress line. */
  update(done: number, total: number, text = ''): void {
    if (!this.stream.isTTY) return
    const now = Date.now()
    if (now - this.#lastMs < 200 && done < total) return
    this.#lastMs = now
    const width = 24
    const filled = total > 0 ? Math.min(width, Math.round((done / total) * width)) : 0
    const bar = `${'#'.repeat(filled)}${'.'.repeat(width - filled)}`
    this.stream.write(`\r${this.label} [${bar}] ${done}/${total} ${text}\u001b[K`)
    this.#shown = true
  }

  end(): void {
    if (this.#shown) this.stream.write('\r\u001b[K')
    this.#shown = false
  }
}
