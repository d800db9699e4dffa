import type { BatchOp, MemoryEngine } from '@mq/kv-storage'
import type { SweepEngine } from './range-sweeper'

/**
 * For tests: `engine` as a SweepEngine whose writes first go through `before` (to count, hold
 * or fail them: a rejection fails the write, which then never reaches the engine).
 */
export function interceptWrites(
  engine: MemoryEngine,
  before: (ops: readonly BatchOp[]) => void | Promise<void>,
): SweepEngine {
  return {
    get: (key) => engine.get(key),
    getMany: (keys) => engine.getMany(keys),
    range: (range) => engine.range(range),
    keys: (range) => engine.keys(range),
    write: async (ops, options) => {
      await before(ops)
      return engine.write(ops, options)
    },
  }
}
