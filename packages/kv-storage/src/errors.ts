/**
 * The errors of kv-storage. Each has a stable `code`, says whether a retry can help
 * (`retriable`), and passes the underlying error through as `cause`. Raft-level range
 * errors (CompactedError, UnavailableError) come from @mq/raft-core, not from here.
 */

export const KvErrorCode = {
  /** The engine (or snapshot, or log store) was closed; nothing more can be read or written. */
  Closed: 'KV_CLOSED',
  /** The database is locked by another process (or another open handle in this one). */
  Locked: 'KV_LOCKED',
  /** The database directory (or its parent) does not exist or is not a directory. */
  DirectoryMissing: 'KV_DIRECTORY_MISSING',
  /** The database directory cannot be created, read or written (permissions, read-only fs). */
  DirectoryUnwritable: 'KV_DIRECTORY_UNWRITABLE',
  /** The database files on disk are damaged (CURRENT, MANIFEST, tables). */
  DatabaseCorrupt: 'KV_DATABASE_CORRUPT',
  /** Opening failed for another reason; see `cause`. */
  OpenFailed: 'KV_OPEN_FAILED',
  /** A record read back from the database fails its checksum or does not decode. */
  CorruptRecord: 'KV_CORRUPT_RECORD',
  /** The group commit's staging queue is full; retry after the in-flight flush resolves. */
  Overloaded: 'KV_OVERLOADED',
  /** The group is being removed from the log store; it can be opened once that ends. */
  GroupRemoving: 'KV_GROUP_REMOVING',
  /** A write or flush reached the engine and failed there; see `cause`. */
  WriteFailed: 'KV_WRITE_FAILED',
  /** An argument is out of its documented domain (bad key, bad tuple, bad index). */
  InvalidArgument: 'KV_INVALID_ARGUMENT',
} as const
export type KvErrorCode = (typeof KvErrorCode)[keyof typeof KvErrorCode]

export abstract class KvError extends Error {
  abstract readonly code: KvErrorCode
  abstract readonly retriable: boolean
}

/** The engine, snapshot or store was closed before (or while) the call ran. */
export class ClosedError extends KvError {
  override readonly name = 'ClosedError'
  readonly code = KvErrorCode.Closed
  readonly retriable = false
}

/**
 * Opening a database failed. `path` is the database directory; the message names it and
 * the cause, and says what to do. Subclasses say which cause.
 */
export abstract class OpenError extends KvError {
  readonly path: string
  constructor(path: string, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.path = path
  }
}

/** Another process (or handle) holds the database's LOCK file. Retriable: it may let go. */
export class LockedError extends OpenError {
  override readonly name = 'LockedError'
  readonly code = KvErrorCode.Locked
  readonly retriable = true
}

export class DirectoryMissingError extends OpenError {
  override readonly name = 'DirectoryMissingError'
  readonly code = KvErrorCode.DirectoryMissing
  readonly retriable = false
}

export class DirectoryUnwritableError extends OpenError {
  override readonly name = 'DirectoryUnwritableError'
  readonly code = KvErrorCode.DirectoryUnwritable
  readonly retriable = false
}

export class DatabaseCorruptError extends OpenError {
  override readonly name = 'DatabaseCorruptError'
  readonly code = KvErrorCode.DatabaseCorrupt
  readonly retriable = false
}

export class OpenFailedError extends OpenError {
  override readonly name = 'OpenFailedError'
  readonly code = KvErrorCode.OpenFailed
  readonly retriable = false
}

/**
 * A stored record failed its checksum or did not decode. Never returned as data: the
 * reader stops here. `groupId`/`index` name the Raft log record when there is one.
 */
export class CorruptRecordError extends KvError {
  override readonly name = 'CorruptRecordError'
  readonly code = KvErrorCode.CorruptRecord
  readonly retriable = false
  readonly groupId: number | undefined
  readonly index: number | undefined
  constructor(
    message: string,
    where: { groupId?: number; index?: number } = {},
    options?: { cause?: unknown },
  ) {
    super(message, options)
    this.groupId = where.groupId
    this.index = where.index
  }
}

/** The group commit's staging queue is at its bound. Retry once a flush resolves. */
export class OverloadedError extends KvError {
  override readonly name = 'OverloadedError'
  readonly code = KvErrorCode.Overloaded
  readonly retriable = true
}

/** The group is being removed (LogStore.removeGroupInPages): it is not opened half deleted. Retry later. */
export class GroupRemovingError extends KvError {
  override readonly name = 'GroupRemovingError'
  readonly code = KvErrorCode.GroupRemoving
  readonly retriable = true
}

/** The engine rejected a write or sync; `cause` carries its error. The data may not be durable. */
export class WriteFailedError extends KvError {
  override readonly name = 'WriteFailedError'
  readonly code = KvErrorCode.WriteFailed
  readonly retriable = false
}

export class InvalidArgumentError extends KvError {
  override readonly name = 'InvalidArgumentError'
  readonly code = KvErrorCode.InvalidArgument
  readonly retriable = false
}
