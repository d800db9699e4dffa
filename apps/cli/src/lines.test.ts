import { describe, expect, it } from 'vitest'
import { readLines } from './lines'

async function collect(chunks: (string | Uint8Array)[], max?: number): Promise<(string | Uint8Array)[]> {
  async function* source() {
    yield* chunks
  }
  const lines: (string | Uint8Array)[] = []
  for await (const line of readLines(source(), max)) lines.push(line)
  return lines
}

describe('readLines', () => {
  it('splits on LF and CRLF across chunks and skips empty lines', async () => {
    expect(await collect(['a\r\nb', 'c\n\n', 'd'])).toEqual(['a', 'bc', 'd'])
  })

  it('decodes UTF-8 split across chunks', async () => {
    const bytes = new TextEncoder().encode('é€\n')
    expect(await collect([bytes.slice(0, 1), bytes.slice(1, 3), bytes.slice(3)])).toEqual(['é€'])
  })

  it('refuses a line longer than the limit', async () => {
    await expect(collect(['x'.repeat(20)], 10)).rejects.toThrow(/longer than 10 bytes/)
  })

  // The limit was checked only on the unfinished rest of a chunk: a line that ended in the chunk
  // that took it past the limit (up to a chunk longer: stdin's are 64 KiB) was sent whatever
  // its length.
  it('refuses a line longer than the limit that ends in the chunk that took it past the limit', async () => {
    await expect(collect(['xxxxxxxx', 'xxx\nok\n'], 10)).rejects.toThrow(/longer than 10 bytes/)
    await expect(collect(['x'.repeat(30), '\n'], 40)).resolves.toEqual(['x'.repeat(30)])
    expect(await collect(['xxxxxxxx', 'xx\nok'], 10)).toEqual(['x'.repeat(10), 'ok'])
  })

  // Every line was decoded as UTF-8: an invalid byte became U+FFFD, and `mq produce` sent other
  // bytes than stdin held, without a word (Latin-1 logs, binary records).
  it('gives a line that is not valid UTF-8 as its bytes, unchanged, across chunks', async () => {
    const bytes = new Uint8Array([0x61, 0xff, 0xfe, 0x0d, 0x0a, 0xc3, 0xa9, 0x0a, 0xe2, 0x82])
    const lines = await collect([bytes.slice(0, 2), bytes.slice(2, 6), bytes.slice(6)])
    expect(lines).toEqual([new Uint8Array([0x61, 0xff, 0xfe]), 'é', new Uint8Array([0xe2, 0x82])])
  })

  it('drops a byte order mark at the start only', async () => {
    expect(await collect(['\uFEFFa\n\uFEFFb\n'])).toEqual(['a', '\uFEFFb'])
  })
})
