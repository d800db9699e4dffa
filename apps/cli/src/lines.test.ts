import { describe, expect, it } from 'vitest'
import { readLines } from './lines'

async function collect(chunks: (string | Uint8Array)[], max?: number): Promise<string[]> {
  async function* source() {
    yield* chunks
  }
  const lines: string[] = []
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
    await expect(collect(['x'.repeat(20)], 10)).rejects.toThrow(/longer than 10 characters/)
  })

  // The limit was checked only on the unfinished rest of a chunk: a line that ended in the chunk
  // that took it past the limit (up to a chunk longer: stdin's are 64 KiB) was sent whatever
  // its length.
  it('refuses a line longer than the limit that ends in the chunk that took it past the limit', async () => {
    await expect(collect(['xxxxxxxx', 'xxx\nok\n'], 10)).rejects.toThrow(/longer than 10 characters/)
    await expect(collect(['x'.repeat(30), '\n'], 40)).resolves.toEqual(['x'.repeat(30)])
    expect(await collect(['xxxxxxxx', 'xx\nok'], 10)).toEqual(['x'.repeat(10), 'ok'])
  })
})
