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
    if (this.#call.cancelled) controller.abort()
    else this.#call.once('cancelled', () => controller.abort())
    return this.#signal
  }

  get metadata(): Metadata {
    return this.#call.metadata
  }
}
