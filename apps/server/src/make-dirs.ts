import { mkdirSync, statSync } from 'node:fs'
import { dirname, resolve } from 'node:path'

/**
 * `mkdir -p dir` without Node's `mkdirSync(dir, { recursive: true })`, which never returns
 * under a folder that refuses new entries with ENOENT (procfs: `mq-server start --data-dir
 * /proc/x` spun at full CPU for ever). Creates the missing folders one level at a time and
 * throws the failing level's error (its `code`, and its path in the message); an ancestor that
 * is a file throws ENOTDIR, as the recursive form does.
 */
export function makeDirs(dir: string): void {
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
  }
}
