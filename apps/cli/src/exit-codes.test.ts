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
    [coded('QUEUE_EXISTS', false), ExitCode.Other],
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
