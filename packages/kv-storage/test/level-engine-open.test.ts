import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it, vi } from 'vitest'

// readdir of one directory fails (EMFILE, say): the open must fail, not take the database
// there for a new one (whose undo would delete its files).
const failing = { dir: '' }
vi.mock('node:fs/promises', async (original) => {
  const fs = await original<typeof import('node:fs/promises')>()
  return {
    ...fs,
    readdir: (async (path: string, ...rest: unknown[]) => {
      if (failing.dir !== '' && path === failing.dir)
        throw Object.assign(new Error('too many open files'), { code: 'EMFILE' })
      return (fs.readdir as (...a: unknown[]) => Promise<unknown>)(path, ...rest)
    }) as typeof fs.readdir,
  }
})

const { LevelEngine } = await import('../src/level-engine')
const { OpenFailedError } = await import('../src/errors')

describe('LevelEngine.open', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kv-open-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it('fails, touching nothing, when it cannot list an existing database directory', async () => {
    const path = join(dir, 'db')
    const engine = await LevelEngine.open(path)
    await engine.write([{ type: 'put', key: Uint8Array.of(1), value: Uint8Array.of(7) }], { sync: true })
    await engine.close()
    failing.dir = path
    await expect(LevelEngine.open(path)).rejects.toBeInstanceOf(OpenFailedError)
    failing.dir = ''
    const again = await LevelEngine.open(path)
    expect(await again.get(Uint8Array.of(1))).toEqual(Uint8Array.of(7))
    await again.close()
  })
})
