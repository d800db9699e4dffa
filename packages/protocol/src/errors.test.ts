import { describe, expect, it } from 'vitest'
import { ERROR_CODES, ErrorCode, GrpcStatus, isErrorCode } from './errors'

describe('wire error codes', () => {
  it('describes every code exactly once', () => {
    expect(Object.keys(ERROR_CODES).sort()).toEqual(Object.values(ErrorCode).sort())
  })
  it('marks redirects and overload retriable, bad input not', () => {
    expect(ERROR_CODES.NOT_LEADER.retriable).toBe(true)
    expect(ERROR_CODES.STALE_ROUTE.retriable).toBe(true)
    expect(ERROR_CODES.LIMIT_EXCEEDED.retriable).toBe(true)
    expect(ERROR_CODES.UNAVAILABLE.retriable).toBe(true)
    expect(ERROR_CODES.INVALID_ARGUMENT.retriable).toBe(false)
    expect(ERROR_CODES.INTERNAL.retriable).toBe(false)
    expect(ERROR_CODES.QUEUE_NOT_FOUND.status).toBe(GrpcStatus.NotFound)
  })
  it('travels a missing or wrong token as UNAUTHENTICATED and a forbidden call as PERMISSION_DENIED, never retried', () => {
    expect(ERROR_CODES.UNAUTHENTICATED).toEqual({ status: 16, retriable: false })
    expect(ERROR_CODES.PERMISSION_DENIED).toEqual({ status: 7, retriable: false })
  })
  it('recognises codes and only codes', () => {
    expect(isErrorCode('NOT_LEADER')).toBe(true)
    expect(isErrorCode('toString')).toBe(false)
    expect(isErrorCode('nope')).toBe(false)
  })
})
