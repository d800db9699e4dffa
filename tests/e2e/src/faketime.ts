import { ensureDebianPackage } from './debian-package'

/** Debian's libfaketime (package `faketime`), the multithreaded build. */
const LIBFAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1'

/**
 * The environment that runs a process with its wall clock `aheadMs` ahead of the machine's
 * (libfaketime preloaded; installed with apt when missing): `Date.now()` and every other read of
 * the real-time clock are shifted, the monotonic clock (`performance.now()`, timers) is not — a
 * node whose clock is ahead, as NTP drift or a bad setup leaves one.
 */
export function clockAheadEnv(aheadMs: number): Record<string, string> {
  const lib = ensureDebianPackage('faketime', LIBFAKETIME, 'the clock skew tests')
  return {
    LD_PRELOAD: lib,
    FAKETIME: `+${(aheadMs / 1000).toFixed(3)}s`,
    FAKETIME_DONT_FAKE_MONOTONIC: '1',
  }
}
