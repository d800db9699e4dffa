import { execFileSync } from 'node:child_process'
import { closeSync, mkdirSync, openSync, rmSync, writeSync } from 'node:fs'
import { join } from 'node:path'

/** The file `fillDisk` writes into a data dir. */
const FILLER = 'disk-filler'

/**
 * Mounts a tmpfs of `bytes` at `dir` (created when missing): a small disk for one node's data
 * dir that can be filled up. Needs root.
 */
export function mountTmpfs(dir: string, bytes: number): void {
  mkdirSync(dir, { recursive: true })
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${bytes}`, 'tmpfs', dir], { stdio: 'pipe' })
}

/** Unmounts `dir` (lazily, so that a process still holding a file there does not keep it). */
export function unmount(dir: string): void {
  execFileSync('umount', ['-l', dir], { stdio: 'pipe' })
}

/**
 * Fills the file system of `dir` with a filler file until a write fails with ENOSPC (64 KiB
 * writes, then 4 KiB ones for the rest); returns the bytes written. Throws on any other error.
 */
export function fillDisk(dir: string): number {
  const fd = openSync(join(dir, FILLER), 'a')
  try {
    return writeUntilFull(fd, 64 * 1024) + writeUntilFull(fd, 4096)
  } finally {
    closeSync(fd)
  }
}

/** Appends `size`-byte writes to `fd` until one fails with ENOSPC; returns the bytes written. */
function writeUntilFull(fd: number, size: number): number {
  const chunk = Buffer.alloc(size, 0xa5)
  let written = 0
  for (;;) {
    try {
      written += writeSync(fd, chunk)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOSPC') return written
      throw error
    }
  }
}

/** Deletes the filler file written by `fillDisk`. */
export function freeDisk(dir: string): void {
  rmSync(join(dir, FILLER), { force: true })
}
