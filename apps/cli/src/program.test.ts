import { describe, expect, it } from 'vitest'
import { createProgram } from './program'

describe('mq program', () => {
  it('prints its version', async () => {
    let printed = ''
    const program = createProgram('1.2.3')
      .exitOverride()
      .configureOutput({ writeOut: (s) => (printed += s) })
    await expect(program.parseAsync(['--version'], { from: 'user' })).rejects.toMatchObject({
      code: 'commander.version',
    })
    expect(printed.trim()).toBe('1.2.3')
  })
  it('defaults the seed servers', () => {
    const program = createProgram('0.0.0')
    program.parse([], { from: 'user' })
    expect(program.opts().servers).toBe('127.0.0.1:7001')
  })
})
