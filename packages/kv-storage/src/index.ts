export { crc32c } from './crc32c'
export type { DurabilityMarkStats } from './durability-mark'
export { DurabilityMark, MARK_FILE } from './durability-mark'
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
  GroupRemovingError,
  InvalidArgumentError,
  KvError,
  KvErrorCode,
  LockedError,
  OpenError,
  OpenFailedError,
  OverloadedError,
  WriteFailedError,
} from './errors'
export type { BatchMark, GroupCommitBatch, GroupCommitOptions, GroupCommitStats } from './group-commit'
export { GroupCommit, WriteChain } from './group-commit'
export type { GroupLogLimits, TailStats } from './group-log'
export { GroupLog } from './group-log'
export type { HistogramSnapshot } from './histogram'
export { quantileOf } from './histogram'
export type { Tuple, TupleElement } from './key-codec'
export {
  appendBytes,
  appendUint,
  compareTuples,
  decodeTuple,
  encodeTuple,
  KeyTag,
  prefixEnd,
  prefixRange,
} from './key-codec'
export type { LevelEngineOptions } from './level-engine'
export { LevelEngine } from './level-engine'
export {
  batchSeqKey,
  entriesRange,
  entryKey,
  GroupKeyKind,
  groupRange,
  hardStateKey,
  KeySpace,
  nodeKey,
  stagedImageKey,
  stagedImageRange,
  stateMachineKey,
  stateMachineRange,
} from './log-keys'
export type { LogStoreOptions } from './log-store'
export { LogStore } from './log-store'
export { MemoryEngine } from './memory-engine'
export type { WalRecord } from './wal-records'
export { walRecords } from './wal-records'
export { checkOps, opBytes, WriteBatch } from './write-batch'
