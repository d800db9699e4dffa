export type {
  BatchOp,
  Engine,
  EngineSnapshot,
  KeyRange,
  KeyValue,
  KvReader,
  RangeBound,
  WriteOptions,
} from './engine'
export { compareKeys, inRange, isEmptyRange, lowerBoundOf, upperBoundOf } from './engine'
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
export type { Tuple, TupleElement } from './key-codec'
export { compareTuples, decodeTuple, encodeTuple, KeyTag, prefixEnd, prefixRange } from './key-codec'
export type { LevelEngineOptions } from './level-engine'
export { LevelEngine } from './level-engine'
export { MemoryEngine } from './memory-engine'
export { checkOps, opBytes, WriteBatch } from './write-batch'
