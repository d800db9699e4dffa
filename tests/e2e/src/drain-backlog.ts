/**
 * Waits until `left()` is 0: true then; false once it has not gone down for `stallMs`, or
 * `maxMs` passed. Polls every 200 ms; an undefined count (a failed read) is no progress.
 */
export async function drainBacklog(
  left: () => number | undefined | Promise<number | undefined>,
  stallMs: number,
  maxMs: number,
): Promise<boolean> {
  const start = Date.now()
  let least = (await left()) ?? Number.POSITIVE_INFINITY
  let leastAt = start
  while (least > 0) {
    const now = Date.now()
    if (now - leastAt >= stallMs || now - start >= maxMs) return false
    await new Promise((r) => setTimeout(r, 200))
    const n = (await left()) ?? Number.POSITIVE_INFINITY
    if (n < least) {
      least = n
      leastAt = Date.now()
    }
  }
  return true
}
