import { readdirSync, readFileSync } from 'node:fs'
import type { ServerResponse } from 'node:http'
import { extname, join } from 'node:path'

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
}
/** The built page is a handful of small files; anything bigger is not one of them. */
const ASSET_BYTES_MAX = 4 * 1024 * 1024
const ASSETS_MAX = 64

/** Headers of every page answer: nothing from elsewhere, no framing, no sniffing. */
export const PAGE_SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
}

/**
 * The console's built files, read into memory once (at most ASSETS_MAX files of at most
 * ASSET_BYTES_MAX each, of the known types), served under `/console/`. Empty when the
 * folder is missing (the page was not built): `missing` then says so.
 */
export class ConsoleAssets {
  readonly #files = new Map<string, { body: Buffer; type: string }>()

  constructor(dir: string) {
    let names: string[] = []
    try {
      names = readdirSync(dir)
    } catch {
      return
    }
    for (const name of names.slice(0, ASSETS_MAX)) {
      const type = CONTENT_TYPES[extname(name)]
      if (!type) continue
      const body = readFileSync(join(dir, name))
      if (body.length <= ASSET_BYTES_MAX) this.#files.set(name, { body, type })
    }
  }

  /** True when the page (index.html) is not there. */
  get missing(): boolean {
    return !this.#files.has('index.html')
  }

  /**
   * Answers `path` when it is the console's: `/` and `/console` redirect to `/console/`,
   * `/console/` is the page, `/console/<file>` one of its files (404 for another name).
   * Returns false for other paths.
   */
  serve(path: string, res: ServerResponse): boolean {
    if (path === '/' || path === '/console') {
      res.writeHead(302, { location: '/console/', 'cache-control': 'no-store' })
      res.end()
      return true
    }
    if (!path.startsWith('/console/')) return false
    const name = path === '/console/' ? 'index.html' : path.slice('/console/'.length)
    const file = this.#files.get(name)
    if (!file) {
      const why = this.missing
        ? 'the console was not built: run `pnpm --filter @mq/console build` (or `pnpm build`) and restart'
        : `no console file ${name}`
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' })
      res.end(`${why}\n`)
      return true
    }
    res.writeHead(200, {
      'content-type': file.type,
      'content-length': file.body.length,
      // The page changes with the server: always revalidate.
      'cache-control': 'no-cache',
      ...PAGE_SECURITY_HEADERS,
    })
    res.end(file.body)
    return true
  }
}
