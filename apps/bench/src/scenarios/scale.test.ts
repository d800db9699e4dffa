import { describe, expect, it } from 'vitest'
import { createProgram } from '../program'

describe('scale command line', () => {
  it('refuses a partition list with a bad entry', async () => {
    let err = ''
    const program = createProgram({ out: () => {}, err: (t) => (err += t) })
    for (const c of [program, ...program.commands]) c.exitOverride()
    await expect(
      program.parseAsync(['scale', '--partitions', '1,0'], { from: 'user' }),
    ).rejects.toMatchObject({
      exitCode: 1,
    })
    expect(err).toMatch(/integer from 1 to 256/)
  })
})
