import { CommanderError } from 'commander'
import { describe, expect, it } from 'vitest'
import { CommandError, UsageError } from './errors'
import { classify, ExitCode, oneLine } from './exit-codes'

const coded = (code: string, retriable: boolean, message = 'why') =>
  Object.assign(new Error(message), { code, retriable })

describe('classify', () => {
  it.each([
    [new CommanderError(1, 'commander.unknownOption', "error: unknown option '--x'"), ExitCode.Usage],
    [new CommanderError(0, 'commander.helpDisplayed', '(outputHelp)'), ExitCode.Ok],
    [new UsageError('bad'), ExitCode.Usage],
    [coded('INVALID_ARGUMENT', false), ExitCode.Usage],
    [coded('QUEUE_NOT_FOUND', false), ExitCode.NotFound],
    [coded('UNAVAILABLE', true), ExitCode.Unavailable],
    [coded('LIMIT_EXCEEDED', true), ExitCode.Unavailable],
    [coded('QUEUE_EXISTS', false), ExitCode.AlreadyExists],
    [coded('INVALID_ARGUMENT', false, 'node n9 is not registered'), ExitCode.NotFound],
    [coded('INVALID_ARGUMENT', false, 'data group 99 does not exist'), ExitCode.NotFound],
    [coded('INVALID_ARGUMENT', false, 'no token is named app'), ExitCode.NotFound],
    [coded('INVALID_ARGUMENT', false, 'a token named app exists; delete it first'), ExitCode.AlreadyExists],
    [
      coded(
        'INVALID_ARGUMENT',
        false,
        "token name ops is taken by a token of this node's --auth-file: pick another name",
      ),
      ExitCode.AlreadyExists,
    ],
    [coded('INVALID_ARGUMENT', false, 'node n1 is not a replica of data group 2 (n2, n3)'), ExitCode.Usage],
    [coded('UNAUTHENTICATED', false), ExitCode.Denied],
    [coded('PERMISSION_DENIED', false), ExitCode.Denied],
    [coded('INTERNAL', false), ExitCode.Other],
    [coded('LEASE_LOST', false), ExitCode.Other],
    [new Error('plain'), ExitCode.Other],
    ['a string', ExitCode.Other],
  ])('%s exits %d', (error, exitCode) => {
    expect(classify(error).exitCode).toBe(exitCode)
  })

  it('classifies a CommandError as its cause', () => {
    expect(classify(new CommandError('produce failed', coded('QUEUE_NOT_FOUND', false))).exitCode).toBe(
      ExitCode.NotFound,
    )
  })

  it('names the servers and the deadline when the cluster is unavailable', () => {
    const f = classify(coded('UNAVAILABLE', true, 'gave up after 7 attempts in 1500 ms: refused'), {
      servers: ['a:1', 'b:2'],
      timeoutMs: 1_500,
    })
    expect(f.message).toBe(
      'the cluster at a:1,b:2 did not answer within 1s500ms: refused (check --servers or MQ_SERVERS, or raise --timeout)',
    )
  })

  it('says nothing listens when every connection was refused', () => {
    const refused = Object.assign(
      coded('UNAVAILABLE', true, 'connection refused on every attempt for 2003 ms'),
      {
        connectionRefused: true,
      },
    )
    expect(classify(refused, { servers: ['a:1'], timeoutMs: 10_000 })).toEqual({
      exitCode: ExitCode.Unavailable,
      message:
        'nothing listens at a:1: connection refused on every attempt for 2003 ms (is the cluster started? check --servers or MQ_SERVERS; --timeout waits that long for it)',
    })
  })

  it('says why in one clean sentence when nothing listens (no grpc-js wrapping, no dangling note)', async () => {
    const refused = Object.assign(
      coded(
        'UNAVAILABLE',
        true,
        'connection refused on every attempt for 2002 ms (10 attempts; nothing listens there?): No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.1:7001. Resolution note: ',
      ),
      { connectionRefused: true },
    )
    expect(classify(refused, { servers: ['127.0.0.1:7001'], timeoutMs: 10_000 }).message).toBe(
      'nothing listens at 127.0.0.1:7001: connection refused on every attempt for 2002 ms (10 attempts): connect ECONNREFUSED 127.0.0.1:7001 (is the cluster started? check --servers or MQ_SERVERS; --timeout waits that long for it)',
    )
  })

  it("hints that TLS settings do not match the server's", () => {
    const target = { servers: ['127.0.0.1:7001'], timeoutMs: 1_000 }
    const tlsToPlain = coded(
      'UNAVAILABLE',
      true,
      'No connection established. Last error: Error: 805C64B77A7F0000:error:0A00010B:SSL routines:ssl3_get_record:wrong version number:../deps/openssl/openssl/ssl/record/ssl3_record.c:350: .',
    )
    expect(classify(tlsToPlain, { ...target, tls: true }).message).toBe(
      "the cluster at 127.0.0.1:7001 did not answer within 1s: TLS: wrong version number (the server answered in plaintext: your TLS settings probably do not match the server's; leave out --tls-ca and MQ_TLS_CA for a cluster without TLS)",
    )
    const plainToTls = coded(
      'UNAVAILABLE',
      true,
      'No connection established. Last error: Failed to connect (2026-12-02T16:40:25.866Z).',
    )
    expect(classify(plainToTls, { ...target, tls: false }).message).toBe(
      "the cluster at 127.0.0.1:7001 did not answer within 1s: Failed to connect (the server closed the connection: if it speaks TLS, your TLS settings probably do not match the server's; give its CA with --tls-ca or MQ_TLS_CA)",
    )
    // A node's HTTP port given as a server: grpc-js says only "Protocol error" (as it did to
    // `mq queue list --servers` at an HTTP/1.1 server, exit 3).
    expect(classify(coded('UNAVAILABLE', true, 'Protocol error'), target).message).toBe(
      "the cluster at 127.0.0.1:7001 did not answer within 1s: Protocol error (the server does not speak gRPC: is --servers a node's gRPC address (mq-server --listen), not its HTTP port (--http-listen)?)",
    )
    // A plain timeout says nothing of TLS.
    expect(classify(coded('UNAVAILABLE', true, 'Deadline exceeded'), target).message).toMatch(
      /\(check --servers or MQ_SERVERS, or raise --timeout\)$/,
    )
  })

  it('says what limit held when the SDK gave up on one (the cluster answered)', () => {
    const f = classify(
      coded(
        'LIMIT_EXCEEDED',
        true,
        'gave up after 50 attempts in 9000 ms: queue jobs holds 10 messages, its limit',
      ),
      {
        servers: ['a:1'],
        timeoutMs: 1_500,
      },
    )
    expect(f).toEqual({
      exitCode: ExitCode.Unavailable,
      message: 'gave up after 50 attempts in 9000 ms: queue jobs holds 10 messages, its limit',
    })
  })

  it('makes messages one line', () => {
    expect(oneLine('error: first\n  second\n\n')).toBe('first second')
  })
})
