import { stat } from 'node:fs/promises'

/**
 * Whether something is at `path`. Only "no such file" (ENOENT) is an answer of "no": another
 * error (EIO, EACCES, ELOOP) is thrown, so that a marker file a read could not see is not
 * taken for an absent one (a checksummed database opened as plain values, a quarantined one
 * opened at all).
 */
export async function pathExists(path: string): Promise<boolean> {
  try {
    await stat(path)
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false
    throw error
  }
}
