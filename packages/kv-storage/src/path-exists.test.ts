import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { pathExists } from './path-exists'

describe('pathExists', () => {
  it('says no only for a missing path, and throws what else stat meets', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mq-exists-'))
    try {
      writeFileSync(join(dir, 'file'), 'x')
      expect(await pathExists(join(dir, 'file'))).toBe(true)
      expect(await pathExists(join(dir, 'missing'))).toBe(false)
      // A symlink loop: ELOOP, not "absent".
      symlinkSync(join(dir, 'b'), join(dir, 'a'))
      symlinkSync(join(dir, 'a'), join(dir, 'b'))
      await expect(pathExists(join(dir, 'a'))).rejects.toMatchObject({ code: 'ELOOP' })
      // Below a file: ENOTDIR, not "absent".
      await expect(pathExists(join(dir, 'file', 'x'))).rejects.toMatchObject({ code: 'ENOTDIR' })
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
