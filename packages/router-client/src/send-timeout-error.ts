import { UnavailableError } from '@mq/protocol'

/**
 * A send that was not sent within the producer's `sendTimeoutMs` (counted from the send()
 * call): it waited for room in the buffer, for its route, or behind its partition's batches
 * in flight, and left the buffer unsent. Code UNAVAILABLE, retriable as such (sending again
 * may succeed once the partition is back); `timedOut` tells it from an operation the router
 * gave up on (its `name` stays UnavailableError's, as ConnectionRefusedError's does).
 */
export class SendTimeoutError extends UnavailableError {
  readonly timedOut = true
}
