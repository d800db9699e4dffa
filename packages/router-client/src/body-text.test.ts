import { describe, expect, it } from 'vitest'
import { encodeBody } from './body-text'

describe('encodeBody', () => {
  it('keeps valid UTF-8 as text and turns anything else into base64', () => {
    expect(encodeBody(new TextEncoder().encode('héllo €'))).toEqual({ body: 'héllo €', encoding: 'utf8' })
    expect(encodeBody(new Uint8Array([0xc3]))).toEqual({ body: 'ww==', encoding: 'base64' })
  })

  it('keeps a leading byte-order mark (the body as sent, not as a text file reader would show it)', () => {
    expect(encodeBody(new TextEncoder().encode('\uFEFFa'))).toEqual({ body: '\uFEFFa', encoding: 'utf8' })
  })
})
