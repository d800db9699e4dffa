import { defineConfig, type Options } from 'tsup'
import { buildConfig } from '../../tsup.shared.ts'

/**
 * Two outputs: the Node entry (dist/: where the assets are, and the JSON API's types) and the
 * page itself (www/: index.html and style.css copied from static/, app.js bundled from
 * src/web/main.ts for browsers, no runtime dependency, no CDN).
 */
export default defineConfig([
  buildConfig() as Options,
  {
    entry: { app: 'src/web/main.ts' },
    outDir: 'www',
    format: ['iife'],
    platform: 'browser',
    target: 'es2022',
    tsconfig: 'tsconfig.build.json',
    publicDir: 'static',
    minify: true,
    sourcemap: true,
    clean: true,
    dts: false,
    outExtension: () => ({ js: '.js' }),
  },
])
