import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { LevelEngine } from '../src/level-engine'
import { MemoryEngine } from '../src/memory-engine'
import { describeEngineConformance } from './engine-conformance'

describeEngineConformance('MemoryEngine', {
  create: async () => new MemoryEngine(),
  dispose: async () => {},
})

let dir: string | undefined
describeEngineConformance('LevelEngine', {
  create: async () => {
    dir = await mkdtemp(join(tmpdir(), 'kv-conformance-'))
    return LevelEngine.open(join(dir, 'db'))
  },
  dispose: async () => {
    if (dir) await rm(dir, { recursive: true, force: true })
    dir = undefined
  },
})
