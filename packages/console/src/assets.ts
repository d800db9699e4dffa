import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

/**
 * The folder of the built page (index.html, app.js, style.css): `www/` beside `src/` and
 * `dist/`, so the same path holds whether the package runs from source or from its build.
 */
export function consoleAssetsDir(): string {
  return fileURLToPath(new URL('../www/', import.meta.url))
}

/** Whether the page has been built (`pnpm --filter @mq/console build`). */
export function consoleAssetsBuilt(dir = consoleAssetsDir()): boolean {
  return existsSync(`${dir}index.html`) && existsSync(`${dir}app.js`)
}
