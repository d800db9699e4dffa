import { closeSync, fsyncSync, mkdirSync, openSync, statSync } from 'node:fs'
import { dirname, resolve } from 'node:path'

/** Makes a folder's entries durable (fsync of the folder itself). */
export function syncDir(dir: string): void {
  const fd = openSync(dir, 'r')
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

/**
 * `mkdir -p dir` without Node's `mkdirSync(dir, { recursive: true })`, which never returns
 * under a folder that refuses new entries with ENOENT (procfs: `mq-server start --data-dir
 * /proc/x` spun at full CPU for ever). Creates the missing folders one level at a time and
 * throws the failing level's error (its `code`, and its path in the message); an ancestor that
 * is a file throws ENOTDIR, as the recursive form does. Each folder made is made durable in its
 * parent (`sync`, an fsync of the parent): a power cut right after a first start could
 * otherwise lose the new data dir's entry with everything written under it (since 2026-12-06).
 */
export function makeDirs(dir: string, sync: (dir: string) => void = syncDir): void {
  const missing: string[] = []
  let at = resolve(dir)
  for (;;) {
    let isDirectory: boolean
    try {
      isDirectory = statSync(at).isDirectory()
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
      const parent = dirname(at)
      if (parent === at) break
      missing.push(at)
      at = parent
      continue
    }
    if (!isDirectory)
      throw Object.assign(new Error(`ENOTDIR: not a directory, mkdir '${at}'`), { code: 'ENOTDIR' })
    break
  }
  for (const level of missing.reverse()) {
    try {
      mkdirSync(level)
    } catch (error) {
      // Made meanwhile by someone else: fine if it is a folder.
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || !statSync(level).isDirectory()) throw error
    }
    sync(dirname(level))
  }
}
