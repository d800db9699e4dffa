import { describe, expect, it } from 'vitest'
import { PREFIXED_LINE_CHARS_MAX, PrefixedLines } from './prefixed-lines'

describe('PrefixedLines', () => {
  it('tells each line once whole, joining a line and a character split across chunks', () => {
    const out: string[] = []
    const lines = new PrefixedLines((l) => out.push(l))
    const é = Buffer.from('é') // two bytes
    lines.write(Buffer.from('node n1 sta'))
    lines.write(Buffer.concat([Buffer.from('rted caf'), é.subarray(0, 1)]))
    lines.write(Buffer.concat([é.subarray(1), Buffer.from('\n\nsecond\nthi')]))
    expect(out).toEqual(['node n1 started café', 'second'])
    lines.write(Buffer.from('rd, unended'))
    lines.end()
    expect(out).toEqual(['node n1 started café', 'second', 'third, unended'])
  })

  it('sends a line longer than its bound in pieces, holding no more than the bound', () => {
    const out: string[] = []
    const lines = new PrefixedLines((l) => out.push(l))
    lines.write('x'.repeat(PREFIXED_LINE_CHARS_MAX * 2 + 5))
    expect(out).toEqual(['x'.repeat(PREFIXED_LINE_CHARS_MAX), 'x'.repeat(PREFIXED_LINE_CHARS_MAX)])
    lines.write('y\n')
    expect(out[2]).toBe('xxxxxy')
  })
})
