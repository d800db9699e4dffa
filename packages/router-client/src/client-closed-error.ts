import { ErrorCode, MqError } from '@mq/protocol'

/**
 * The client was closed (`client.close()`): nothing it made can reach the cluster any more;
 * or the producer a send went to was closed (`producer.close()`). Not retriable — a retry
 * through the same client or producer cannot succeed — though its code is UNAVAILABLE, as
 * that of the UnavailableError "the client is closed" / "producer for q is closed" it
 * replaces (which retry loops took as passing, and retried for ever).
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
