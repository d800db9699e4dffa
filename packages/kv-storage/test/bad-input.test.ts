import { spawn } from 'node:child_process'
import { chmod, mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  DatabaseCorruptError,
  DirectoryMissingError,
  DirectoryUnwritableError,
  KvError,
  LockedError,
  OpenError,
} from '../src/errors'
import { LevelEngine } from '../src/level-engine'
import { tempDir } from './helpers'

const here = fileURLToPath(new URL('.', import.meta.url))

/** Opens `path` expecting failure; returns the error. */
async function openFails(path: string, options?: { createIfMissing?: boolean }): Promise<OpenError> {
  const err = await LevelEngine.open(path, options).then(
    async (engine) => {
      await engine.close()
      throw new Error(`open of ${path} succeeded`)
    },
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(OpenError)
  expect(err).toBeInstanceOf(KvError)
  const open = err as OpenError
  expect(open.path).toBe(path)
  expect(open.message).toContain(path)
  return open
}

/** Every file under `dir` with its bytes, except LevelDB's informational LOG files. */
async function contents(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {}
  for (const name of (await readdir(dir)).sort()) {
    if (name === 'LOG' || name === 'LOG.old') continue
    out[name] = (await readFile(join(dir, name))).toString('base64')
  }
  return out
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  )
}

describe('bad input at open', () => {
  let dir: { path: string; remove: () => Promise<void> }
  beforeEach(async () => {
    dir = await tempDir('kv-bad-input')
  })
  afterEach(async () => {
    await chmod(dir.path, 0o700).catch(() => {})
    await dir.remove()
  })

  it('a database held open by another process fails with LockedError (retriable), naming the path', async () => {
    const path = join(dir.path, 'db')
    const child = spawn(
      process.execPath,
      ['--conditions=source', '--import', 'tsx', join(here, 'hold-open.ts'), path],
      {
        cwd: join(here, '..'),
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    )
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
    try {
      const lines = createInterface({ input: child.stdout })
      let stderr = ''
      child.stderr.on('data', (d: Buffer) => {
        stderr += d.toString()
      })
      await new Promise<void>((resolve, reject) => {
        lines.on('line', (line) => line === 'open' && resolve())
        void exited.then(() => reject(new Error(`holder exited early: ${stderr}`)))
      })
      const before = await contents(path)
      const err = await openFails(path)
      expect(err).toBeInstanceOf(LockedError)
      expect(err.code).toBe('KV_LOCKED')
      expect(err.retriable).toBe(true)
      expect(err.message).toMatch(/locked by another process/)
      expect(err.cause).toBeDefined()
      expect(await contents(path)).toEqual(before)
    } finally {
      child.kill('SIGKILL')
      await exited
    }
    // Once the holder is gone the database opens.
    const engine = await LevelEngine.open(path)
    await engine.close()
  })

  it('a second open in the same process fails with LockedError too', async () => {
    const path = join(dir.path, 'db')
    const first = await LevelEngine.open(path)
    try {
      expect(await openFails(path)).toBeInstanceOf(LockedError)
    } finally {
      await first.close()
    }
  })

  it('a missing parent directory fails with DirectoryMissingError and creates nothing', async () => {
    const path = join(dir.path, 'no', 'such', 'db')
    const err = await openFails(path)
    expect(err).toBeInstanceOf(DirectoryMissingError)
    expect(err.code).toBe('KV_DIRECTORY_MISSING')
    expect(err.retriable).toBe(false)
    expect(err.message).toMatch(/does not exist/)
    expect(await exists(join(dir.path, 'no'))).toBe(false)
  })

  it('a parent that is a file, or a path that is a file, fails with DirectoryMissingError', async () => {
    await writeFile(join(dir.path, 'file'), 'x')
    expect(await openFails(join(dir.path, 'file', 'db'))).toBeInstanceOf(DirectoryMissingError)
    expect(await openFails(join(dir.path, 'file'))).toBeInstanceOf(DirectoryMissingError)
    expect(await readFile(join(dir.path, 'file'), 'utf8')).toBe('x')
  })

  it('a missing database with createIfMissing false fails and creates nothing', async () => {
    const path = join(dir.path, 'db')
    expect(await openFails(path, { createIfMissing: false })).toBeInstanceOf(DirectoryMissingError)
    expect(await exists(path)).toBe(false)
  })

  it('an existing directory without a database, with createIfMissing false, fails with DirectoryMissingError', async () => {
    const path = join(dir.path, 'empty')
    await mkdir(path)
    const err = await openFails(path, { createIfMissing: false })
    expect(err).toBeInstanceOf(DirectoryMissingError)
    expect(err.message).toMatch(/no database/)
    expect(await contents(path)).toEqual({})
  })

  it('an unwritable directory fails with DirectoryUnwritableError and creates nothing', async () => {
    // Permission bits stop everyone but root; as root, use a read-only kernel filesystem.
    let parent = join(dir.path, 'readonly')
    await mkdir(parent)
    await chmod(parent, 0o500)
    const writable = await writeFile(join(parent, 'probe'), 'x').then(
      () => true,
      () => false,
    )
    if (writable) parent = '/sys'
    const path = join(parent, 'mq-kv-db')
    const err = await openFails(path)
    expect(err).toBeInstanceOf(DirectoryUnwritableError)
    expect(err.code).toBe('KV_DIRECTORY_UNWRITABLE')
    expect(err.message).toMatch(/not writable/)
    expect(err.cause).toBeDefined()
    expect(await exists(path)).toBe(false)
  })

  it.each([
    ['CURRENT', async (db: string) => writeFile(join(db, 'CURRENT'), 'garbage without a newline')],
    [
      'MANIFEST',
      async (db: string) => {
        for (const f of await readdir(db)) {
          if (f.startsWith('MANIFEST-')) await writeFile(join(db, f), Buffer.alloc(200, 0x5a))
        }
      },
    ],
  ])(
    'garbage in %s fails with DatabaseCorruptError, naming the path, and leaves the files as they were',
    async (_f, damage) => {
      const path = join(dir.path, 'db')
      const engine = await LevelEngine.open(path)
      await engine.write([{ type: 'put', key: Uint8Array.of(1), value: Uint8Array.of(2) }], { sync: true })
      await engine.close()
      await damage(path)
      const before = await contents(path)
      const err = await openFails(path)
      expect(err).toBeInstanceOf(DatabaseCorruptError)
      expect(err.code).toBe('KV_DATABASE_CORRUPT')
      expect(err.message).toMatch(/corrupt/)
      expect((err.cause as Error).message).toBeTruthy()
      expect(await contents(path)).toEqual(before)
    },
  )
})
