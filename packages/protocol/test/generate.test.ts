import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { describe, expect, it } from 'vitest'

const packageDir = join(import.meta.dirname, '..')

function listFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name)
    return statSync(p).isDirectory() ? listFiles(p) : [p]
  })
}

// The generated code is committed; this proves it is exactly what the .proto files and the
// pinned generators produce (offline, reproducibly), so nobody edits it by hand or forgets
// to regenerate.
describe('generated code', () => {
  it('matches a fresh `buf generate`', () => {
    const out = mkdtempSync(join(tmpdir(), 'mq-proto-'))
    try {
      const template = readFileSync(join(packageDir, 'buf.gen.yaml'), 'utf8').replace(
        'out: src/generated',
        `out: ${out}`,
      )
      const bin = join(packageDir, 'node_modules', '.bin')
      execFileSync(join(bin, 'buf'), ['generate', '--template', template], {
        cwd: packageDir,
        env: { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}` },
        stdio: 'pipe',
      })
      const committedDir = join(packageDir, 'src', 'generated')
      const fresh = listFiles(out)
        .map((p) => relative(out, p))
        .sort()
      expect(fresh).toEqual(
        listFiles(committedDir)
          .map((p) => relative(committedDir, p))
          .sort(),
      )
      for (const file of fresh) {
        expect(readFileSync(join(out, file), 'utf8'), file).toBe(
          readFileSync(join(committedDir, file), 'utf8'),
        )
      }
    } finally {
      rmSync(out, { recursive: true, force: true })
    }
  }, 60_000)
})
