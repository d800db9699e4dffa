import { UnderWay } from './under-way'

/** How long past the end of its schedule the pacer goes on issuing sends that fell behind. */
const OVERRUN_MS_MAX = 10_000

/**
 * Open-loop pacing: calls `send(i, intendedAtMs)` for i = 0 … count−1, the i-th at its intended
 * time `intendedAtMs` = start + i × 1000 / ratePerS (a performance.now() reading). The pacer
 * sleeps until the next send is due; when the event loop falls behind (GC, a busy core), the
 * sends that came due meanwhile go out at once, each still given its own intended time, so a
 * latency measured from `intendedAtMs` counts the delay instead of omitting it (no coordinated
 * omission). Issues nothing more 10 s past the schedule's end. Resolves once every send made
 * has settled (whichever way), with how many were made (fewer than `count` only past that
 * bound). Only the sends under way are held: the promise of every send, returned until an
 * audit, was kept by e2e and failover to the run's end (rate × duration of them).
 */
export async function paced(
  ratePerS: number,
  count: number,
  send: (i: number, intendedAtMs: number) => Promise<void>,
): Promise<number> {
  if (!(ratePerS > 0)) throw new RangeError(`ratePerS must be positive, got ${ratePerS}`)
  const intervalMs = 1000 / ratePerS
  const start = performance.now()
  const deadline = start + count * intervalMs + OVERRUN_MS_MAX
  const underWay = new UnderWay()
  let i = 0
  while (i < count) {
    const now = performance.now()
    if (now >= deadline) break
    for (; i < count && start + i * intervalMs <= now; i++) underWay.add(send(i, start + i * intervalMs))
    if (i < count) {
      const waitMs = Math.max(0, start + i * intervalMs - performance.now())
      await new Promise((r) => setTimeout(r, waitMs))
    }
  }
  await underWay.settled()
  return i
}
