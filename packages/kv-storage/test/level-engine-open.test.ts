import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it, vi } from 'vitest'

// readdir of one directory fails (EMFILE, say): the open must fail, not take the database
// there for a new one (whose undo would delete its files).
const failing = { dir: '' }
/**
 * An open held at one step (its listing of a directory, or its write of one file) until the
 * test releases it: another open meanwhile creates the database and takes its lock.
 */
const held = new Map<string, { reached: () => void; released: Promise<void> }>()
function holdAt(path: string): { reached: Promise<void>; release: () => void } {
  let reached!: () => void
  let release!: () => void
  const atStep = new Promise<void>((resolve) => {
    reached = resolve
  })
  const released = new Promise<void>((resolve) => {
    release = resolve
  })
  held.set(path, { reached, released })
  return { reached: atStep, release }
}
async function pass(path: string): Promise<void> {
  const hold = held.get(path)
  if (!hold) return
  held.delete(path)
  hold.reached()
  await hold.released
}
vi.mock('node:fs/promises', async (original) => {
  const fs = await original<typeof import('node:fs/promises')>()
  return {
    ...fs,
    readdir: (async (path: string, ...rest: unknown[]) => {
      if (failing.dir !== '' && path === failing.dir)
        throw Object.assign(new Error('too many open files'), { code: 'EMFILE' })
      const names = await (fs.readdir as (...a: unknown[]) => Promise<unknown>)(path, ...rest)
      await pass(path)
      return names
    }) as typeof fs.readdir,
    writeFile: (async (path: string, ...rest: unknown[]) => {
      await pass(path)
      return (fs.writeFile as (...a: unknown[]) => Promise<unknown>)(path, ...rest)
    }) as typeof fs.writeFile,
  }
})

const { LevelEngine } = await import('../src/level-engine')
const { LockedError, OpenFailedError } = await import('../src/errors')

const KEY = Uint8Array.of(1)
const VALUE = Uint8Array.of(7)

describe('LevelEngine.open', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kv-open-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it('fails, touching nothing, when it cannot list an existing database directory', async () => {
    const path = join(dir, 'db')
    const engine = await LevelEngine.open(path)
    await engine.write([{ type: 'put', key: KEY, value: VALUE }], { sync: true })
    await engine.close()
    failing.dir = path
    await expect(LevelEngine.open(path)).rejects.toBeInstanceOf(OpenFailedError)
    failing.dir = ''
    const again = await LevelEngine.open(path)
    expect(await again.get(KEY)).toEqual(VALUE)
    await again.close()
  })

  // Two processes started on one data dir at once (a double start): the one that loses the lock
  // must leave the files alone, since they are the holder's database, made a moment before.
  it("an open that loses the lock to a database created meanwhile in its empty directory deletes none of the holder's files", async () => {
    const path = join(dir, 'db-listed-empty')
    mkdirSync(path)
    // The second open lists the directory empty, then waits while the first one creates the database.
    const listing = holdAt(path)
    const second = LevelEngine.open(path).then(
      async (engine) => {
        await engine.close()
        return undefined
      },
      (error: unknown) => error,
    )
    await listing.reached
    const first = await LevelEngine.open(path)
    await first.write([{ type: 'put', key: KEY, value: VALUE }], { sync: true })
    listing.release()
    expect(await second).toBeInstanceOf(LockedError)
    await first.close()
    const again = await LevelEngine.open(path)
    expect(await again.get(KEY)).toEqual(VALUE)
    await again.close()
  })

  it('an open that created the directory and then loses the lock to another open does not remove the directory', async () => {
    const path = join(dir, 'db-created')
    // The second open creates the directory, then waits (at its format file) while the first
    // one finds the directory, creates the database in it and takes its lock.
    const creating = holdAt(join(path, 'MQ-FORMAT'))
    const second = LevelEngine.open(path).then(
      async (engine) => {
        await engine.close()
        return undefined
      },
      (error: unknown) => error,
    )
    await creating.reached
    const first = await LevelEngine.open(path)
    await first.write([{ type: 'put', key: KEY, value: VALUE }], { sync: true })
    creating.release()
    expect(await second).toBeInstanceOf(LockedError)
    await first.close()
    const again = await LevelEngine.open(path)
    expect(await again.get(KEY)).toEqual(VALUE)
    await again.close()
  })
})
