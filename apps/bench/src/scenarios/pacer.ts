/**
 * Open-loop pacing: calls `send(i)` for i = 0 … count−1 at `ratePerS`, catching up in
 * bursts when the event loop falls behind (so latency is measured from the intended time,
 * not hidden by a slow sender). Stops at `count` or at `deadlineMs` past the start.
 * Returns the promises of every send made.
 */
export async function paced(
  ratePerS: number,
  count: number,
  send: (i: number) => Promise<void>,
  tickMs = 5,
): Promise<Promise<void>[]> {
  const start = performance.now()
  const deadline = start + (count / ratePerS) * 1000 + 10_000
  const sends: Promise<void>[] = []
  let i = 0
  while (i < count && performance.now() < deadline) {
    const due = Math.min(count, Math.floor(((performance.now() - start) * ratePerS) / 1000) + 1)
    for (; i < due; i++) sends.push(send(i))
    await new Promise((r) => setTimeout(r, tickMs))
  }
  return sends
}
