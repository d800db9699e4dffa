import { MemoryEngine } from '../src/memory-engine'
import { describeEngineConformance } from './engine-conformance'

describeEngineConformance('MemoryEngine', {
  create: async () => new MemoryEngine(),
  dispose: async () => {},
})
