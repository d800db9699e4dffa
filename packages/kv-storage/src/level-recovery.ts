import { open, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { pathExists } from './path-exists'

/**
 * The file that quarantines a database whose recovery dropped damaged data. While it exists
 * the database does not open. LevelDB ignores it (not one of its file names).
 */
export const CORRUPT_MARKER = 'MQ-CORRUPT'

/** Lines of LevelDB's info LOG that report data dropped while recovering. */
const DROPPED = /Corruption:|dropping \d+ bytes/

/**
 * What LevelDB dropped while opening the database at `path`, one line of its info `LOG` each
 * (at most 20); empty when nothing. classic-level opens without paranoid checks, so LevelDB
 * skips write-ahead-log records that fail their checksum ("(ignoring error) …: dropping N
 * bytes; Corruption: checksum mismatch"), writes what it kept to a table and deletes the log:
 * the open succeeds and data written (and synced) before is gone. Each open starts a fresh
 * `LOG`, so it holds this open's recovery only; it is flushed line by line.
 */
export async function droppedOnRecovery(path: string): Promise<string[]> {
  // No LOG: nothing was reported. A LOG that cannot be read (EMFILE, EACCES) is not "nothing
  // dropped": the open fails, saying so, rather than go on over data it could not check.
  const text = await readFile(join(path, 'LOG'), 'utf8').catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return ''
    throw new Error(
      `cannot read LevelDB's info LOG of ${path} to check what its recovery dropped: ${error.message}`,
      { cause: error },
    )
  })
  return text
    .split('\n')
    .filter((line) => DROPPED.test(line))
    .slice(0, 20)
}

/** Files of a database's data: tables, write-ahead logs, and the durability mark (MQ-DURABLE). */
const DATA_FILE = /^(\d+\.(ldb|sst|log)|MQ-DURABLE)$/

/**
 * The data files of a directory listing (`names`) that has no `CURRENT`: a database whose
 * `CURRENT` was lost (deleted, or damaged outside LevelDB; LevelDB itself replaces it by a
 * rename). Opened as it is, LevelDB would start an empty database over them, replay its
 * write-ahead log and delete every table the new manifest does not list. Empty when the
 * directory holds none (a new database, or one whose creation stopped after its first
 * manifest, before its first write).
 */
export function dataFilesWithoutCurrent(names: readonly string[]): string[] {
  if (names.includes('CURRENT')) return []
  return names.filter((n) => DATA_FILE.test(n)).sort()
}

/** The quarantine marker's text, or undefined when the database at `path` has none. */
export async function quarantined(path: string): Promise<string | undefined> {
  const marker = join(path, CORRUPT_MARKER)
  if (!(await pathExists(marker))) return undefined
  return (await readFile(marker, 'utf8')).slice(0, 4_000)
}

/** Tries at writing the quarantine marker before its failure is reported (see quarantineTried). */
const QUARANTINE_TRIES = 3

/**
 * `quarantine`, tried up to QUARANTINE_TRIES times 50 ms apart (a disk that refuses a write
 * once, EIO or a full disk being freed): resolves with the last failure when no try took,
 * undefined once the marker is written.
 */
export async function quarantineTried(
  path: string,
  reasons: readonly string[],
  headline?: string,
): Promise<Error | undefined> {
  let failure: Error | undefined
  for (let i = 0; i < QUARANTINE_TRIES; i++) {
    if (i > 0) await new Promise((resolve) => setTimeout(resolve, 50))
    try {
      await quarantine(path, reasons, headline)
      return undefined
    } catch (e) {
      failure = e instanceof Error ? e : new Error(String(e))
    }
  }
  return failure
}

/**
 * Quarantines the database at `path` (writes the marker, synced, `headline` then one line per
 * reason): the evidence LevelDB leaves is gone after this open (the log deleted, `LOG` rotated away by the next open),
 * so without the marker the next open would succeed on the damaged data.
 */
export async function quarantine(
  path: string,
  reasons: readonly string[],
  headline = 'LevelDB dropped damaged data while recovering',
): Promise<void> {
  const text = `${new Date().toISOString()} ${headline}:\n${reasons.join('\n')}\n`
  await writeFile(join(path, CORRUPT_MARKER), text, { flush: true })
  // The marker's directory entry too: without it a power cut could lose the new file.
  const dir = await open(path, 'r')
  try {
    await dir.sync()
  } finally {
    await dir.close()
  }
}
