import { ensureDebianPackage } from './debian-package'

/** Debian's Chromium, the browser the console tests drive. */
export const CHROMIUM = '/usr/bin/chromium'

/** Makes sure Debian's `chromium` is installed (ensureDebianPackage); returns CHROMIUM. */
export function ensureChromium(): string {
  return ensureDebianPackage('chromium', CHROMIUM, 'the console tests')
}
