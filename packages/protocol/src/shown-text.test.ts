import { describe, expect, it } from 'vitest'
import { shownCut, shownText } from './shown-text'

describe('shownText', () => {
  it('escapes C0, DEL, C1 and bidi controls as JSON would, and nothing else', () => {
    expect(shownText('node \u001b[2J is\tnot\r\n')).toBe('node \\u001b[2J is\\tnot\\r\\n')
    expect(shownText('a\u007fb\u009b2Jc\u202ed\u2066e\u061cf\u200eg')).toBe(
      'a\\u007fb\\u009b2Jc\\u202ed\\u2066e\\u061cf\\u200eg',
    )
    expect(shownText('ö名🎉 "x" \\ \u00a0')).toBe('ö名🎉 "x" \\ \u00a0')
    // JSON's own escapes of the C0 controls, so text escaped either way reads the same.
    const c0 = Array.from({ length: 0x20 }, (_, i) => String.fromCharCode(i)).join('')
    expect(shownText(c0)).toBe(JSON.stringify(c0).slice(1, -1))
  })
})

describe('shownCut', () => {
  it('cuts at max, but never within a surrogate pair or an escape shownText wrote', () => {
    expect(shownCut('abc', 5)).toBe(3)
    expect(shownCut('abcdef', 4)).toBe(4)
    expect(shownCut('ab😀', 3)).toBe(2)
    const shown = shownText('ab\u202ecd\n')
    expect(shown).toBe('ab\\u202ecd\\n')
    // Every cut inside `\u202e` (2..8) falls back to its start; after it, at max.
    for (let max = 3; max < 8; max++) expect(shownCut(shown, max), `max ${max}`).toBe(2)
    expect(shownCut(shown, 8)).toBe(8)
    expect(shownCut(shown, 10)).toBe(10)
    expect(shownCut(shown, 11), 'not within \\n').toBe(10)
  })
})
