import type { Metadata, ServerUnaryCall } from '@grpc/grpc-js'

/** What a unary handler may know of its call besides the request (see unaryHandler). */
export interface UnaryCallContext {
  /**
   * Aborted once the client has given up on the call: no answer reaches it any more. Made on
   * first use (most handlers never look).
   */
  readonly cancelled: AbortSignal
  /** The metadata the caller sent (its credentials among them: a handler may scope its answer by them). */
  readonly metadata: Metadata
}

/**
 * The reason of every call's `cancelled` signal: grpc-js reports a cancel when any call's
 * stream closes, answered or not, and `abort()` without a reason builds a DOMException (its
 * stack captured) each time. One made once serves them all (an AbortError all the same).
 */
export const CALL_CANCELLED: DOMException = new DOMException('the client gave up on the call', 'AbortError')

export class CallContext implements UnaryCallContext {
  readonly #call: ServerUnaryCall<unknown, unknown>
  #signal: AbortSignal | undefined

  constructor(call: ServerUnaryCall<unknown, unknown>) {
    this.#call = call
  }

  get cancelled(): AbortSignal {
    if (this.#signal) return this.#signal
    const controller = new AbortController()
    this.#signal = controller.signal
    if (this.#call.cancelled) controller.abort(CALL_CANCELLED)
    else this.#call.once('cancelled', () => controller.abort(CALL_CANCELLED))
    return this.#signal
  }

  get metadata(): Metadata {
    return this.#call.metadata
  }
}
