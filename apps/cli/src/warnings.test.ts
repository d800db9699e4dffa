import { describe, expect, it } from 'vitest'
import { silenceIpServernameWarning } from './warnings'

describe('silenceIpServernameWarning', () => {
  it("drops DEP0123 in each of emitWarning's forms and passes every other warning on", () => {
    const emitted: unknown[][] = []
    const target = {
      emitWarning: ((...args: unknown[]) => {
        emitted.push(args)
      }) as NodeJS.Process['emitWarning'],
    }
    silenceIpServernameWarning(target)
    const ip = 'Setting the TLS ServerName to an IP address is not permitted by RFC 6066.'
    target.emitWarning(ip, 'DeprecationWarning', 'DEP0123')
    target.emitWarning(ip, { type: 'DeprecationWarning', code: 'DEP0123' })
    target.emitWarning(Object.assign(new Error(ip), { name: 'DeprecationWarning', code: 'DEP0123' }))
    expect(emitted).toEqual([])
    target.emitWarning('Buffer() is deprecated', 'DeprecationWarning', 'DEP0005')
    target.emitWarning('plain')
    target.emitWarning('other', { code: 'X1' })
    expect(emitted).toEqual([
      ['Buffer() is deprecated', 'DeprecationWarning', 'DEP0005'],
      ['plain'],
      ['other', { code: 'X1' }],
    ])
  })
})
