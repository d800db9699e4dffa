import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { makeDirs } from './make-dirs'

const made: string[] = []
afterEach(() => {
  for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true })
})
function scratch(): string {
  const d = mkdtempSync(join(tmpdir(), 'make-dirs-'))
  made.push(d)
  return d
}

describe('makeDirs', () => {
  it('creates missing folders at any depth, and takes one that exists', () => {
    const base = scratch()
    const deep = join(base, 'a', 'b', 'c')
    makeDirs(deep)
    expect(statSync(deep).isDirectory()).toBe(true)
    makeDirs(deep)
    makeDirs(base)
  })

  it('makes each folder it creates durable in its parent, parents first, and none that existed', () => {
    const base = scratch()
    const synced: string[] = []
    makeDirs(join(base, 'a', 'b'), (dir) => synced.push(dir))
    expect(synced).toEqual([base, join(base, 'a')])
    synced.length = 0
    makeDirs(join(base, 'a', 'b'), (dir) => synced.push(dir))
    expect(synced).toEqual([])
    // The real fsync of a folder works where the tests run.
    makeDirs(join(base, 'c'))
    expect(statSync(join(base, 'c')).isDirectory()).toBe(true)
  })

  it('throws ENOTDIR when the path or one of its parents is a file', () => {
    const base = scratch()
    const file = join(base, 'f')
    writeFileSync(file, 'x')
    expect(() => makeDirs(file)).toThrow(expect.objectContaining({ code: 'ENOTDIR' }))
    expect(() => makeDirs(join(file, 'under'))).toThrow(expect.objectContaining({ code: 'ENOTDIR' }))
    expect(existsSync(join(file, 'under'))).toBe(false)
  })

  it.runIf(existsSync('/proc/self'))('fails at once under a folder that refuses new entries (procfs)', () => {
    const started = Date.now()
    expect(() => makeDirs('/proc/mq-make-dirs-test/data')).toThrow(/mkdir '\/proc\/mq-make-dirs-test'/)
    expect(Date.now() - started).toBeLessThan(1_000)
  })
})
