/** What untilInterrupted gives when the interrupt came first. */
export const INTERRUPTED: unique symbol = Symbol('interrupted')

/**
 * Tells the binary that the running command handles Ctrl-C itself (nodeIO exits at once when
 * no one listens), until the returned function is called at the command's end.
 */
export function handleInterrupts(signal: AbortSignal | undefined): () => void {
  const listening = () => {}
  signal?.addEventListener('abort', listening, { once: true })
  return () => signal?.removeEventListener('abort', listening)
}

/**
 * `pending`'s value, or INTERRUPTED once `signal` aborts (at once when it has). Its listener is
 * removed when either comes: racing each wait with one long-lived "interrupted" promise left a
 * reaction on it per wait, which a `consume --follow` of millions of messages never freed.
 * `pending` is observed in every case: one that fails after the interrupt won (a stdin read
 * that the interrupt closed) is ignored, not an unhandled rejection that ends the process.
 */
export function untilInterrupted<T>(
  pending: Promise<T>,
  signal: AbortSignal | undefined,
): Promise<T | typeof INTERRUPTED> {
  if (!signal) return pending
  if (signal.aborted) {
    pending.catch(() => {})
    return Promise.resolve(INTERRUPTED)
  }
  return new Promise((resolve, reject) => {
    const onAbort = () => resolve(INTERRUPTED)
    signal.addEventListener('abort', onAbort, { once: true })
    pending.then(
      (value) => {
        signal.removeEventListener('abort', onAbort)
        resolve(value)
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort)
        reject(error)
      },
    )
  })
}
