import { spawn } from 'node:child_process'
import { type App, builtMain } from './built'

/**
 * Runs one of the repo's built commands (`mq-server` or `mq`, built by the suite's global
 * setup) with `stdin` as its standard input and `env` over this process's environment, and
 * resolves with its exit code and output once it exits.
 */
export function runBuilt(
  app: App,
  args: readonly string[],
  options: { readonly stdin?: string; readonly env?: Record<string, string> } = {},
): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [builtMain(app), ...args], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, ...options.env },
    })
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
