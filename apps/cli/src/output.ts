import { encodeBody, shownText } from '@mq/router-client'
import type { CliDelivery, OutputStream } from './io'
import { type Column, formatTable } from './table'

/** The JSON record of a consumed message (one line of `mq consume --json`). */
export interface MessageRecord {
  readonly id: number
  readonly partition: number
  readonly weight: number
  readonly key: string
  readonly body: string
  /** Present only when the body is not valid UTF-8 (then `body` is base64). */
  readonly encoding?: 'base64'
  readonly headers: Readonly<Record<string, string>>
  readonly deliveryCount: number
}

export function messageRecord(m: Omit<CliDelivery, 'ack' | 'release'>): MessageRecord {
  const { body, encoding } = encodeBody(m.body)
  return {
    id: m.id,
    partition: m.partition,
    weight: m.weight,
    key: m.key,
    body,
    ...(encoding === 'base64' ? { encoding } : {}),
    headers: { ...m.headers },
    deliveryCount: m.deliveryCount,
  }
}

/**
 * One human-readable line for a message: `partition/id`, its weight and delivery count, key
 * and headers when set, then the body (`base64:` + base64 when not UTF-8). Control characters
 * in the body, the key and the headers are escaped so that one message is one line (and no
 * escape sequence reaches the terminal).
 */
export function messageLine(m: Omit<CliDelivery, 'ack' | 'release'>): string {
  const { body, encoding } = encodeBody(m.body)
  const parts = [`${m.partition}/${m.id}`, `weight=${m.weight}`, `deliveries=${m.deliveryCount}`]
  if (m.key) parts.push(`key=${shownText(m.key)}`)
  const headers = Object.entries(m.headers)
  if (headers.length > 0)
    parts.push(`headers={${headers.map(([k, v]) => `${shownText(k)}=${shownText(v)}`).join(',')}}`)
  parts.push(encoding === 'utf8' ? shownText(body) : `base64:${body}`)
  return parts.join('  ')
}

/**
 * Writes a command's results: aligned tables and plain lines for people, or (with --json)
 * one JSON object per line for programs.
 */
export class Output {
  readonly json: boolean
  readonly #stdout: OutputStream

  constructor(stdout: OutputStream, json: boolean) {
    this.#stdout = stdout
    this.json = json
  }

  /** Writes one result: `human` as a line, or `record` as one JSON line. */
  result(human: string, record: object): void {
    this.#stdout.write(this.json ? `${JSON.stringify(record)}\n` : `${human}\n`)
  }

  /** Writes rows as a table, or (with --json) each row's record as one JSON line. */
  table<T>(rows: readonly T[], columns: readonly Column<T>[], record: (row: T) => object): void {
    if (this.json) {
      for (const row of rows) this.#stdout.write(`${JSON.stringify(record(row))}\n`)
    } else {
      this.#stdout.write(formatTable(rows, columns))
    }
  }

  /** Writes human text as is; nothing in --json mode. */
  text(human: string): void {
    if (!this.json) this.#stdout.write(human)
  }

  /** Writes one JSON line in --json mode; nothing otherwise. */
  record(record: object): void {
    if (this.json) this.#stdout.write(`${JSON.stringify(record)}\n`)
  }

  /**
   * Resolves once everything written so far has left the process (a pipe's reader may still
   * not have read it), with the write's error if it failed (EPIPE: the reader is gone). A stream
   * that takes no callback (a test's) counts as written at once.
   */
  flushed(): Promise<Error | undefined> {
    return new Promise((resolve) => {
      const write = this.#stdout.write as (text: string, done?: (error?: Error | null) => void) => unknown
      if (write.length < 2) return resolve(undefined)
      write.call(this.#stdout, '', (error) => resolve(error ?? undefined))
    })
  }
}
