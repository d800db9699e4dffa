import { ensureDebianPackage } from './debian-package'
import { Prng } from './prng'

/** Debian's libfaketime (package `faketime`), the multithreaded build. */
const LIBFAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1'

/**
 * The environment that runs a process with its wall clock `aheadMs` ahead of the machine's
 * (behind when negative; libfaketime preloaded, installed with apt when missing): `Date.now()`
 * and every other read of the real-time clock are shifted, the monotonic clock
 * (`performance.now()`, timers) is not — a node whose clock is off, as NTP drift or a bad setup
 * leaves one.
 */
export function clockAheadEnv(aheadMs: number): Record<string, string> {
  const lib = ensureDebianPackage('faketime', LIBFAKETIME, 'the clock skew tests')
  return {
    LD_PRELOAD: lib,
    FAKETIME: `${aheadMs < 0 ? '-' : '+'}${(Math.abs(aheadMs) / 1000).toFixed(3)}s`,
    FAKETIME_DONT_FAKE_MONOTONIC: '1',
  }
}

/**
 * A fault run's clock offset for `nodeId` (`n<k>`): none for n1, else a fixed amount in
 * [-skewMs, skewMs] drawn from the seed and the node's number (joined nodes too), so a replay
 * skews the same nodes the same way.
 */
export function skewOf(seed: number, nodeId: string, skewMs: number): number {
  const k = Number(nodeId.slice(1))
  if (skewMs === 0 || !(k > 1)) return 0
  // A generator of its own per node: the run's schedule draws stay the seed's.
  return new Prng((seed * 7919 + k) >>> 0).int(-skewMs, skewMs)
}
