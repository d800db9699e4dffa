import { ErrorCode, MqError } from '@mq/protocol'

/**
 * The client was closed (`client.close()`): nothing it made can reach the cluster any more.
 * Not retriable — a retry through the same client cannot succeed — though its code is
 * UNAVAILABLE, as that of the UnavailableError "the client is closed" it replaces (which
 * retry loops took as passing, and retried for ever).
 */
export class ClientClosedError extends MqError {
  override readonly name = 'ClientClosedError'
  readonly code = ErrorCode.Unavailable

  constructor(message = 'the client is closed', options?: ErrorOptions) {
    super(message, {}, options)
  }

  override get retriable(): boolean {
    return false
  }
}
