import { execFileSync } from 'node:child_process'
import { mkdir, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { WriteFailedError } from '../src/errors'
import { LevelEngine } from '../src/level-engine'
import { tempDir } from './helpers'

const asRoot = process.getuid?.() === 0

// A real full disk: a small tmpfs under the test's temporary directory. Mounting needs root
// (as tests/e2e's disk-full test); as another user the test is not collected.
describe.runIf(asRoot)('LevelEngine on a disk that fills up', () => {
  it('takes no write after one LevelDB failed, so a later write is never reported durable and then lost at the next open', async () => {
    const dir = await tempDir('kv-full-disk')
    const disk = join(dir.path, 'disk')
    await mkdir(disk)
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=3m', 'tmpfs', disk], { stdio: 'pipe' })
    try {
      // Space that comes back once the log has filled the rest.
      const filler = join(disk, 'filler')
      await writeFile(filler, new Uint8Array(600 * 1024))
      const path = join(disk, 'db')
      const engine = await LevelEngine.open(path)
      const key = (i: number) => Uint8Array.of(1, i >> 8, i & 0xff)
      let acked = 0
      let failure: unknown
      // 21 kB a batch: the 3 MiB disk is full after some 120 (bounded well before 1,000).
      for (let i = 0; i < 1_000 && failure === undefined; i++) {
        const ops = Array.from({ length: 7 }, (_, j) => ({
          type: 'put' as const,
          key: Uint8Array.of(...key(i), j),
          value: new Uint8Array(3_000).fill(i & 0xff),
        }))
        try {
          await engine.write(ops, { sync: true })
          acked++
        } catch (error) {
          failure = error
        }
      }
      expect(failure).toBeInstanceOf(WriteFailedError)
      expect(String(failure)).toMatch(/no space left/i)
      // Nothing of the failed batch is visible.
      expect(await engine.keys({ gte: key(acked), lt: key(acked + 1) })).toEqual([])
      await rm(filler)
      // The disk has room again, but the log may end in part of the failed batch's record.
      // Before the fix this write resolved (synced, and readable), and the next open read its
      // record as the rest of the torn one and dropped it: a durable write gone, nothing said.
      const later = engine.write([{ type: 'put', key: Uint8Array.of(2), value: Uint8Array.of(2) }], {
        sync: true,
      })
      await expect(later).rejects.toBeInstanceOf(WriteFailedError)
      await expect(later).rejects.toThrow(/open it again/)
      await engine.close()
      const again = await LevelEngine.open(path)
      try {
        const keys = await again.keys({ gte: Uint8Array.of(1), lt: Uint8Array.of(2) })
        expect(keys.length).toBe(acked * 7)
      } finally {
        await again.close()
      }
    } finally {
      execFileSync('umount', ['-l', disk], { stdio: 'pipe' })
      await dir.remove()
    }
  })
})
