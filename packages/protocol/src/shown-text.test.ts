import { describe, expect, it } from 'vitest'
import { shownText } from './shown-text'

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
