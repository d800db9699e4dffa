import { describe, expect, it } from 'vitest'
import { createProgram } from './program'

describe('mq-server program', () => {
  it('rejects a bad --nodes value with a clear error', async () => {
    const program = createProgram({ out: () => {} })
    program.exitOverride()
    program.commands.forEach((c) => {
      c.exitOverride()
      c.configureOutput({ writeErr: () => {} })
    })
    await expect(program.parseAsync(['dev', '--nodes', 'zero'], { from: 'user' })).rejects.toThrow(
      /positive integer/,
    )
  })
  it('runs dev with its defaults', async () => {
    const lines: string[] = []
    await createProgram({ out: (l) => lines.push(l) }).parseAsync(['dev'], { from: 'user' })
    expect(lines.join('\n')).toMatch(/3-node cluster/)
  })
})
