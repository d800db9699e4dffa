import { UnavailableError } from '@mq/protocol'

/**
 * A send whose batch was sent and then failed without an answer (the router gave up on the
 * partition: replies lost, a leader that fell over after committing): it may have been stored.
 * Code UNAVAILABLE, retriable as such, but sending it again may store it twice (the resend
 * takes a new sequence number; a `dedupKey` makes it safe). `outcomeUnknown` tells it from a
 * failure that stored nothing (its `name` stays UnavailableError's, as SendTimeoutError's does).
 */
export class SendOutcomeUnknownError extends UnavailableError {
  readonly outcomeUnknown = true
}
