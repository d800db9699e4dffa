export type { BatchOp, Engine, EngineSnapshot, KeyRange, KeyValue, KvReader, WriteOptions } from './engine'
export { compareKeys, inRange } from './engine'
