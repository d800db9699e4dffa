import {
  type ChannelCredentials,
  credentials as grpcCredentials,
  InterceptingCall,
  type Interceptor,
} from '@grpc/grpc-js'

/** TLS settings of a client: PEM contents (not paths). */
export interface TlsOptions {
  /** The CA that signs the servers' certificates (default: the system's trusted CAs). */
  readonly ca?: Buffer
  /** A client certificate and its key, for servers that require mutual TLS. */
  readonly cert?: Buffer
  readonly key?: Buffer
}

/** The metadata key of the token: `authorization: Bearer <token>`. */
const AUTHORIZATION_KEY = 'authorization'

/**
 * The channel credentials of a client: `credentials` when given, else TLS when `tls` is
 * given, else plaintext. Throws a RangeError when only one of `cert` and `key` is given, or
 * when both `credentials` and `tls` are.
 */
export function channelCredentials(options: {
  readonly credentials?: ChannelCredentials
  readonly tls?: TlsOptions
}): ChannelCredentials {
  if (options.credentials && options.tls) throw new RangeError('give either credentials or tls, not both')
  if (options.credentials) return options.credentials
  const tls = options.tls
  if (!tls) return grpcCredentials.createInsecure()
  if ((tls.cert === undefined) !== (tls.key === undefined)) {
    throw new RangeError('tls: give cert and key together (a client certificate needs its key)')
  }
  return grpcCredentials.createSsl(tls.ca ?? null, tls.key ?? null, tls.cert ?? null)
}

/**
 * Undefined when `token` can be sent, else what is wrong with it (never repeating it): printable
 * ASCII alone can travel in a header (grpc-js refuses the call otherwise, quoting the secret).
 */
export function tokenProblem(token: string): string | undefined {
  return /^[\x21-\x7e]+$/.test(token)
    ? undefined
    : 'token must be non-empty printable ASCII, without spaces (as `mq token create` prints it)'
}

/**
 * A client interceptor that sends `token` with every call. Works over plaintext too (grpc-js
 * call credentials need TLS), which is what a loopback development cluster uses.
 */
export function tokenInterceptor(token: string): Interceptor {
  const problem = tokenProblem(token)
  if (problem) throw new RangeError(problem)
  const value = `Bearer ${token}`
  return (options, nextCall) =>
    new InterceptingCall(nextCall(options), {
      start: (metadata, listener, next) => {
        metadata.set(AUTHORIZATION_KEY, value)
        next(metadata, listener)
      },
    })
}
