import { describe, expect, it } from 'vitest'
import { createProgram, type ProgramIo } from './program'

function capture(): ProgramIo & { lines: string[]; errors: string[]; code: number | undefined } {
  const io = {
    lines: [] as string[],
    errors: [] as string[],
    code: undefined as number | undefined,
    out: (l: string) => io.lines.push(l),
    err: (l: string) => io.errors.push(l),
    exit: (c: number) => {
      io.code = c
    },
  }
  return io
}

describe('mq-server program', () => {
  it('rejects a bad --nodes value with a clear error', async () => {
    const program = createProgram(capture())
    program.exitOverride()
    for (const c of program.commands) {
      c.exitOverride()
      c.configureOutput({ writeErr: () => {} })
    }
    await expect(program.parseAsync(['dev', '--nodes', 'zero'], { from: 'user' })).rejects.toThrow(
      /positive integer/,
    )
  })

  it('exits 2 with the reason on a bad config, before binding anything', async () => {
    const io = capture()
    await createProgram(io).parseAsync(['start', '--node-id', 'n1', '--listen', '127.0.0.1:7001'], {
      from: 'user',
    })
    expect(io.code).toBe(2)
    expect(io.errors.join('\n')).toMatch(/dataDir is required/)
  })
})
