import { describe, expect, it } from 'vitest'
import { messageLine, messageRecord, Output } from './output'

const message = (body: Uint8Array, extra: Partial<Parameters<typeof messageLine>[0]> = {}) => ({
  id: 17,
  partition: 2,
  body,
  weight: 5,
  headers: {},
  key: '',
  deliveryCount: 1,
  ...extra,
})

describe('message output', () => {
  it('marks base64 bodies in the JSON record and only those', () => {
    expect(messageRecord(message(new TextEncoder().encode('x')))).not.toHaveProperty('encoding')
    expect(messageRecord(message(new Uint8Array([0xff])))).toMatchObject({ body: '/w==', encoding: 'base64' })
  })

  it('prints one message on one line', () => {
    const line = messageLine(
      message(new TextEncoder().encode('a\nb\u007f'), { key: 'k', headers: { h: 'v' } }),
    )
    expect(line).toBe('2/17  weight=5  deliveries=1  key=k  headers={h=v}  a\\nb\\u007f')
    expect(messageLine(message(new Uint8Array([0xff])))).toBe('2/17  weight=5  deliveries=1  base64:/w==')
    // Keys and headers too: a newline or an escape sequence in them reaches no terminal.
    expect(
      messageLine(
        message(new TextEncoder().encode('x'), { key: 'k\ney', headers: { 'h\u001b': 'v\u001b[31m' } }),
      ),
    ).toBe('2/17  weight=5  deliveries=1  key=k\\ney  headers={h\\u001b=v\\u001b[31m}  x')
  })

  it('escapes C1 and bidi controls as well, and nothing else', () => {
    // A C1 CSI clears an xterm's screen; a right-to-left override reorders what follows.
    expect(messageLine(message(new TextEncoder().encode('tab\there é \u009b2J \u202eabc')))).toBe(
      '2/17  weight=5  deliveries=1  tab\\there é \\u009b2J \\u202eabc',
    )
  })
})

describe('Output', () => {
  const capture = (json: boolean) => {
    let text = ''
    return { out: new Output({ write: (s: string) => (text += s) }, json), text: () => text }
  }

  it('writes tables for people and JSON lines for programs', () => {
    const rows = [{ n: 1 }, { n: 22 }]
    const columns = [{ header: 'N', value: (r: { n: number }) => r.n }]
    const human = capture(false)
    human.out.table(rows, columns, (r) => r)
    expect(human.text()).toBe(' N\n 1\n22\n')
    const json = capture(true)
    json.out.table(rows, columns, (r) => r)
    json.out.text('ignored')
    json.out.result('ignored', { ok: true })
    expect(json.text()).toBe('{"n":1}\n{"n":22}\n{"ok":true}\n')
  })
})
