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
})
