import { ClosedError, CorruptRecordError } from './errors'
import { quarantineTried } from './level-recovery'
import { ScratchSealer, unsealValue } from './value-checksum'

/** The ops classic-level's batch takes (after `clear` ops are expanded). */
export type LevelOp = { type: 'put'; key: Uint8Array; value: Uint8Array } | { type: 'del'; key: Uint8Array }

/**
 * Called once when a read finds damaged data, after the database is quarantined; with
 * `quarantineFailure` when the marker could not be written (a full or failing disk): the
 * database would then open again, so its owner must say it is not to be used.
 */
export type CorruptionHandler = (error: CorruptRecordError, quarantineFailure?: Error) => void

/**
 * What a LevelEngine does to the values it writes and reads, and to the failures of its reads:
 * seals values with their checksum (when the database stores checksummed values), checks them
 * on every read, and turns damaged data — a checksum mismatch, or LevelDB reporting a corrupt
 * block — into CorruptRecordError after quarantining the database (`MQ-CORRUPT`, so it does
 * not open again: the damage may sit where no read at start would find it) and telling the
 * owner once (`onCorruption`), so that a node stops serving from it.
 */
export class ReadGuard {
  /** The quarantine under way or done: its failure, undefined when the marker was written. */
  private quarantining: Promise<Error | undefined> | undefined
  private readonly sealer = new ScratchSealer()

  constructor(
    private readonly path: string,
    /** Whether stored values carry a checksum (see value-checksum.ts). */
    readonly checksums: boolean,
    private readonly onCorruption: CorruptionHandler | undefined,
  ) {}

  /**
   * How a put's value is stored: sealed with its checksum (a view into a scratch buffer, valid
   * until the next call: see ScratchSealer), or as it is without checksums.
   */
  seal(key: Uint8Array, value: Uint8Array): Uint8Array {
    return this.checksums ? this.sealer.seal(key, value) : value
  }

  /**
   * The value a read returns for `key` from what LevelDB returned (a plain Uint8Array over the
   * same memory). Throws CorruptRecordError when its checksum fails; run it inside `run()`.
   */
  value(key: Uint8Array, stored: Uint8Array | undefined): Uint8Array | undefined {
    if (stored === undefined) return undefined
    if (!this.checksums) return plain(stored)
    const value = unsealValue(key, stored)
    if (value === undefined) {
      throw new CorruptRecordError(
        `database at ${this.path}: the value of key ${hex(key)} fails its checksum (${stored.length} bytes stored): its table or log is damaged`,
      )
    }
    return value
  }

  /**
   * Runs a read, mapping its failures: not open → ClosedError; damaged data (a checksum that
   * fails, or LevelDB's corruption status) → quarantine, report, CorruptRecordError.
   */
  async run<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn()
    } catch (err) {
      if (isNotOpen(err)) throw new ClosedError(`database at ${this.path} is closed`, { cause: err })
      if (err instanceof CorruptRecordError) throw await this.damaged(err)
      const code = (err as { code?: string }).code ?? (err as { cause?: { code?: string } }).cause?.code
      if (code === 'LEVEL_CORRUPTION') {
        throw await this.damaged(
          new CorruptRecordError(
            `database at ${this.path}: LevelDB found corrupt data while reading: ${describe(err)}`,
            {},
            {
              cause: err,
            },
          ),
        )
      }
      throw err
    }
  }

  private async damaged(err: CorruptRecordError): Promise<CorruptRecordError> {
    if (!this.quarantining) {
      this.quarantining = this.quarantine(err)
      const failure = await this.quarantining
      try {
        this.onCorruption?.(err, failure)
      } catch {
        // The owner's handler must not turn a corruption report into another failure.
      }
    }
    await this.quarantining
    return err
  }

  /** Writes the quarantine marker (a few tries, 50 ms apart); its last failure when none took. */
  private quarantine(err: CorruptRecordError): Promise<Error | undefined> {
    return quarantineTried(this.path, [err.message], 'a read found damaged data')
  }
}

export function isNotOpen(err: unknown): boolean {
  const code = (err as { code?: string }).code
  // A read in pages (`range` with bytesMax) holds an iterator across turns: a snapshot closed
  // under it (an image store closing an image a follower reads) fails its next page with the
  // snapshot's code, a database closed under it with the iterator's.
  return (
    code === 'LEVEL_DATABASE_NOT_OPEN' ||
    code === 'LEVEL_DATABASE_NOT_CLOSED' ||
    code === 'LEVEL_SNAPSHOT_NOT_OPEN' ||
    code === 'LEVEL_ITERATOR_NOT_OPEN'
  )
}

/**
 * classic-level hands out Buffers; callers get plain Uint8Arrays over the same memory, so
 * both engines return the same type (and `toEqual` compares them alike).
 */
export function plain(u: Uint8Array | undefined): Uint8Array | undefined {
  if (u === undefined || u.constructor === Uint8Array) return u
  return new Uint8Array(u.buffer, u.byteOffset, u.byteLength)
}

function hex(key: Uint8Array): string {
  const shown = Buffer.from(key.subarray(0, 64)).toString('hex')
  return key.length > 64 ? `${shown}…` : shown
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}
