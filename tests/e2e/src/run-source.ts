import { spawn } from 'node:child_process'
import { join } from 'node:path'

const root = join(import.meta.dirname, '..', '..', '..')
const tsxLoader = import.meta.resolve('tsx')

/** Entry points of the repo's commands, run from source. */
export const CLI_MAIN = 'apps/cli/src/main.ts'
export const SERVER_MAIN = 'apps/server/src/main.ts'

/**
 * Runs one of the repo's TypeScript entry points (`main`, relative to the repo root) from
 * source, with `stdin` as its standard input and `env` over this process's environment, and
 * resolves with its exit code and output once it exits.
 */
export function runSource(
  main: string,
  args: readonly string[],
  options: { readonly stdin?: string; readonly env?: Record<string, string> } = {},
): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      ['--import', tsxLoader, '--conditions=source', join(root, main), ...args],
      {
        stdio: ['pipe', 'pipe', 'pipe'],
        env: { ...process.env, ...options.env },
      },
    )
    let out = ''
    let err = ''
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString()
    })
    child.stderr.on('data', (c: Buffer) => {
      err += c.toString()
    })
    child.stdin.end(options.stdin ?? '')
    child.once('exit', (code) => resolve({ code, out, err }))
  })
}
