// `node --test scripts/check-deps.test.mjs`: check-deps.mjs run over a small workspace of its own.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { after, test } from 'node:test'
import { fileURLToPath } from 'node:url'

const root = mkdtempSync(join(tmpdir(), 'check-deps-'))
after(() => rmSync(root, { recursive: true, force: true }))

/** Runs check-deps.mjs over a workspace whose CLI (protocol only a devDependency) has `source`. */
function check(source) {
  rmSync(root, { recursive: true, force: true })
  const file = (path, text) => {
    mkdirSync(dirname(join(root, path)), { recursive: true })
    writeFileSync(join(root, path), text)
  }
  mkdirSync(join(root, 'scripts'), { recursive: true })
  copyFileSync(
    join(dirname(fileURLToPath(import.meta.url)), 'check-deps.mjs'),
    join(root, 'scripts/check-deps.mjs'),
  )
  mkdirSync(join(root, 'tests'))
  file('packages/protocol/package.json', JSON.stringify({ name: '@mq/protocol', scripts: { build: 'tsup' } }))
  file(
    'apps/cli/package.json',
    JSON.stringify({
      name: '@mq/cli',
      scripts: { build: 'tsup' },
      devDependencies: { '@mq/protocol': 'workspace:*' },
    }),
  )
  file('apps/cli/src/main.ts', source)
  return spawnSync(process.execPath, [join(root, 'scripts/check-deps.mjs')], { encoding: 'utf8' })
}

test('refuses built code importing a value from a devDependency', () => {
  const r = check("import { FORMAT_LEVEL } from '@mq/protocol'\nexport const level = FORMAT_LEVEL\n")
  assert.equal(r.status, 1)
  assert.match(r.stderr, /imports @mq\/protocol, only a devDependency of @mq\/cli/)
})

test('takes types from a devDependency, the build drops them, also on several lines', () => {
  const r = check(
    [
      "import type { QueueRoute } from '@mq/protocol'",
      'import type {',
      '  QueueConfig,',
      '  QueueInfo,',
      "} from '@mq/protocol'",
      "export type { ErrorCode } from '@mq/protocol'",
      'export type Routes = [QueueRoute, QueueConfig, QueueInfo]',
      '',
    ].join('\n'),
  )
  assert.equal(r.stderr, '')
  assert.equal(r.status, 0)
})
