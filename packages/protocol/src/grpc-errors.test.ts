import {
  type Client,
  credentials,
  makeGenericClientConstructor,
  Server,
  ServerCredentials,
  type ServiceDefinition,
  type ServiceError,
} from '@grpc/grpc-js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { boundedText, ERROR_DETAILS_CHARS_MAX, fromGrpcError, unaryHandler } from './grpc-errors'
import { InvalidArgumentError } from './mq-error'
import { shownText } from './shown-text'

const json = {
  serialize: (v: unknown) => Buffer.from(JSON.stringify(v)),
  deserialize: (b: Buffer) => JSON.parse(b.toString()) as unknown,
}
/** A unary method of the test service at `path`, its messages in JSON. */
const unary = (path: string) => ({
  path,
  requestStream: false,
  responseStream: false,
  requestSerialize: json.serialize,
  requestDeserialize: json.deserialize,
  responseSerialize: json.serialize,
  responseDeserialize: json.deserialize,
})
const service: ServiceDefinition = { fail: unary('/test.Errors/Fail'), parse: unary('/test.Errors/Parse') }

let server: Server
let client: Client & { fail: (...a: unknown[]) => unknown; parse: (...a: unknown[]) => unknown }

beforeAll(async () => {
  server = new Server()
  server.addService(service, {
    // Quotes what the caller sent, as a handler refusing a name does.
    fail: unaryHandler(async (req: { name: string }) => {
      throw new InvalidArgumentError(`queue ${JSON.stringify(req.name)} is not a valid name`)
    }),
    // Lets a parser's error escape: an InternalError that quotes its message.
    parse: unaryHandler(async (req: { text: string }) => JSON.parse(req.text) as unknown),
  })
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) =>
      e ? reject(e) : resolve(p),
    ),
  )
  const Ctor = makeGenericClientConstructor(service, 'Errors')
  client = new Ctor(`127.0.0.1:${port}`, credentials.createInsecure()) as unknown as typeof client
})
afterAll(() => {
  client.close()
  server.forceShutdown()
})

const fail = (name: string) =>
  new Promise<ServiceError>((resolve) =>
    client.fail({ name }, { deadline: Date.now() + 5_000 }, (e: ServiceError | null) =>
      resolve(e as ServiceError),
    ),
  )

const parse = (text: string) =>
  new Promise<ServiceError>((resolve) =>
    client.parse({ text }, { deadline: Date.now() + 5_000 }, (e: ServiceError | null) =>
      resolve(e as ServiceError),
    ),
  )

describe('error statuses', () => {
  it('cut a message that quotes a long input, so that the caller gets its status at all', async () => {
    const name = 'q'.repeat(100_000)
    const e = await fail(name)
    const whole = `queue ${JSON.stringify(name)} is not a valid name`
    expect(e.code).toBe(3) // INVALID_ARGUMENT, not a deadline
    expect(e.details).toMatch(/^queue "qqq/)
    expect(e.details).toBe(`${whole.slice(0, ERROR_DETAILS_CHARS_MAX)}… (${whole.length} chars)`)
    expect(e.details.length).toBeLessThan(ERROR_DETAILS_CHARS_MAX + 32)
    expect(fromGrpcError(e)).toMatchObject({ code: 'INVALID_ARGUMENT', retriable: false })
    // A short one travels whole.
    expect((await fail('jobs!')).details).toBe('queue "jobs!" is not a valid name')
  })

  it('escape the control characters a quoted name carries, which JSON.stringify leaves (found by the request fuzz)', async () => {
    // A DEL made 'fuzz-contr\x7fl' read as "fuzz-contrl", a name that looks valid.
    expect((await fail('fuzz-contr\u007fl')).details).toBe('queue "fuzz-contr\\u007fl" is not a valid name')
    // A C1 CSI and a right-to-left override would act on the caller's terminal.
    expect((await fail('a\u009b2Jb\u202ec')).details).toBe('queue "a\\u009b2Jb\\u202ec" is not a valid name')
    // What JSON.stringify escapes stays as it escaped it; C0 controls unquoted are escaped too.
    expect((await fail('a\nb')).details).toBe('queue "a\\nb" is not a valid name')
  })

  it('never cut a character in two', async () => {
    // 😀 is two UTF-16 units: with the cut inside one, a lone surrogate could not be sent.
    const name = `${'a'.repeat(ERROR_DETAILS_CHARS_MAX - 9)}${'😀'.repeat(50_000)}`
    const e = await fail(name)
    expect(e.code).toBe(3)
    expect(e.details).toMatch(/😀… \(\d+ chars\)$/)
    expect(boundedText('ab😀', 3)).toBe('ab… (4 chars)')
    expect(boundedText('abc', 3)).toBe('abc')
    // An escape shownText wrote is kept whole or left out, not cut to `\u20`.
    expect(boundedText(shownText('ab\u202e'), 5)).toBe('ab… (8 chars)')
  })

  it('escape a lone surrogate the message holds, which a header cannot carry (the call hung and the server had an unhandled URIError)', async () => {
    // V8's message quotes one UTF-16 unit of the emoji: "Unexpected token '\ud83d', ...".
    const e = await parse('{"a":😀}')
    expect(e.code).toBe(13) // INTERNAL, not a deadline
    expect(e.details).toMatch(/^internal error: Unexpected token '\\ud83d'/)
    expect(fromGrpcError(e)).toMatchObject({ code: 'INTERNAL', retriable: false })
    expect(shownText('a\ud83db\ude00c😀')).toBe('a\\ud83db\\ude00c😀')
  })
})
