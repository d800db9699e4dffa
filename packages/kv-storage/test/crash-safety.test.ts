import { type ChildProcess, spawn } from 'node:child_process'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DurabilityMark } from '../src/durability-mark'
import { LevelEngine } from '../src/level-engine'
import { stateMachineKey } from '../src/log-keys'
import { LogStore } from '../src/log-store'
import { tempDir } from './helpers'

const here = fileURLToPath(new URL('.', import.meta.url))
const packageDir = join(here, '..')
const ROUNDS = 6
const GROUPS = 4

interface Ack {
  g: number
  first: number
  last: number
  lastTerm: number
  commit: number
}

/** Starts the writer, waits for `acksBeforeKill` acknowledged flushes, SIGKILLs it; returns the last ack per group. */
async function runAndKill(dbPath: string, seed: number, acksBeforeKill: number): Promise<Map<number, Ack>> {
  const child: ChildProcess = spawn(
    process.execPath,
    ['--conditions=source', '--import', 'tsx', join(here, 'crash-writer.ts'), dbPath, String(seed)],
    { cwd: packageDir, stdio: ['ignore', 'pipe', 'pipe'] },
  )
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  let stderr = ''
  child.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString()
  })
  const acks = new Map<number, Ack>()
  let count = 0
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream })
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`writer gave ${count} acks in 15 s; stderr: ${stderr}`)),
      15_000,
    )
    lines.on('line', (line) => {
      if (!line.startsWith('ack ')) return
      const ack = JSON.parse(line.slice(4)) as Ack
      acks.set(ack.g, ack)
      if (++count === acksBeforeKill) {
        clearTimeout(timer)
        // Killed while the other groups' cycles are staged or being written.
        child.kill('SIGKILL')
        resolve()
      }
    })
    void exited.then((code) => {
      clearTimeout(timer)
      if (count < acksBeforeKill) reject(new Error(`writer exited (${code}) after ${count} acks: ${stderr}`))
    })
  })
  await exited
  lines.close()
  return acks
}

describe('crash safety: SIGKILL during group-committed writes', () => {
  let dir: { path: string; remove: () => Promise<void> }
  beforeAll(async () => {
    dir = await tempDir('kv-crash')
  })
  afterAll(async () => {
    await dir.remove()
  })

  it(`keeps every acknowledged write, with no holes, over ${ROUNDS} kill/reopen rounds`, async () => {
    const dbPath = join(dir.path, 'db')
    // A failure names the seed; KV_CRASH_SEED=<seed> replays the same kill points and writes.
    const seed = Number(process.env.KV_CRASH_SEED ?? Date.now() % 100_000)
    const prev = new Map<number, Ack>()
    for (let round = 0; round < ROUNDS; round++) {
      // Random moments: after 1 to ~120 acknowledged flushes.
      const acksBeforeKill = 1 + ((seed * (round + 7) * 7919) % 120)
      const acks = await runAndKill(dbPath, seed + round, acksBeforeKill)
      const engine = await LevelEngine.open(dbPath)
      // A process crash loses nothing synced: the durability mark must never be ahead.
      const mark = await DurabilityMark.open(engine, dbPath)
      const store = new LogStore(engine, { mark })
      try {
        for (let g = 1; g <= GROUPS; g++) {
          const ctx = `seed ${seed}, round ${round}, group ${g}`
          // Recovery itself checks checksums, holes and commit <= last index; it must not throw.
          const log = await store.openGroup(g)
          const ack = acks.get(g) ?? prev.get(g)
          const hs = log.initialState().hardState
          expect(hs.commit, ctx).toBeLessThanOrEqual(log.lastIndex())
          if (ack) {
            expect(log.lastIndex(), ctx).toBeGreaterThanOrEqual(ack.last)
            expect(log.firstIndex(), ctx).toBeGreaterThanOrEqual(ack.first)
            expect(hs.commit, ctx).toBeGreaterThanOrEqual(ack.commit)
            if (ack.last >= log.firstIndex() - 1) expect(log.term(ack.last), ctx).toBe(ack.lastTerm)
            const applied = await engine.get(stateMachineKey(g, ['applied']))
            expect(Number(new TextDecoder().decode(applied)), ctx).toBeGreaterThanOrEqual(ack.commit)
            prev.set(g, ack)
          }
          // Every entry is intact and where it belongs.
          const all = log.entries(log.firstIndex(), log.lastIndex() + 1, Number.MAX_SAFE_INTEGER)
          expect(all.length, ctx).toBe(log.lastIndex() - log.firstIndex() + 1)
          for (const e of all) {
            expect(new TextDecoder().decode(e.data).replace(/\.+$/, ''), ctx).toBe(
              `g${g}:i${e.index}:t${e.term}`,
            )
          }
        }
      } finally {
        await store.close()
        await mark.close()
        await engine.close()
      }
    }
  }, 30_000)
})
