export type { BatchOp, Engine, EngineSnapshot, KeyRange, KeyValue, KvReader, WriteOptions } from './engine'
export { compareKeys, inRange } from './engine'
export {
  ClosedError,
  CorruptRecordError,
  DatabaseCorruptError,
  DirectoryMissingError,
  DirectoryUnwritableError,
  InvalidArgumentError,
  KvError,
  KvErrorCode,
  LockedError,
  OpenError,
  OpenFailedError,
  OverloadedError,
  WriteFailedError,
} from './errors'
export { MemoryEngine } from './memory-engine'
export { checkOps, opBytes, WriteBatch } from './write-batch'
