import { status } from '@grpc/grpc-js'
import { describe, expect, it, vi } from 'vitest'
import { capturedLog } from '../log-capture'
import { AuditRecord, auditedRequest } from './audit-log'

describe('audit log', () => {
  it('keeps what a call was about: its queue and partition and the known fields, nothing else', () => {
    expect(
      auditedRequest({
        target: { queue: 'jobs', partition: 2, routeEpoch: 9 },
        max: 100,
        body: 'never kept',
        token: 'never kept',
      }),
    ).toEqual({ queue: 'jobs', partition: 2, max: 100 })
    expect(auditedRequest({ name: 'ci', roles: ['admin'], ttlMs: 60_000 })).toEqual({
      name: 'ci',
      roles: ['admin'],
      ttlMs: 60_000,
    })
    expect(auditedRequest({ name: 'jobs', update: { visibilityTimeoutMs: 5_000 } })).toEqual({
      name: 'jobs',
      update: { visibilityTimeoutMs: 5_000 },
    })
    expect(auditedRequest(undefined)).toEqual({})
    expect(auditedRequest('garbage')).toEqual({})
  })

  it("keeps what a SetReplicationFactor or a Redrive asked for: the factor, a redrive's place", () => {
    // `mq cluster replication 1` left a line without the factor (who lowered it to what), and a
    // redrive's line did not say whether it moved anything (placeOnly) or through where.
    expect(auditedRequest({ factor: 1 })).toEqual({ factor: 1 })
    expect(
      auditedRequest({ target: { queue: 'jobs', partition: 0 }, max: 10, throughPlace: 42, placeOnly: true }),
    ).toEqual({ queue: 'jobs', partition: 0, max: 10, throughPlace: 42, placeOnly: true })
  })

  it('writes one line per call when it ends: who, from where, what, the outcome', () => {
    const { log, lines } = capturedLog()
    const ok = new AuditRecord(log, 'mq.v1.Meta/DeleteQueue', 'ipv4:127.0.0.1:5555')
    ok.by({ kind: 'token', name: 'ops', roles: [{ role: 'admin' }] })
    ok.request({ name: 'jobs' })
    ok.end(status.OK, 'OK')
    ok.end(status.CANCELLED, 'twice') // a call ends once
    const refused = new AuditRecord(log, 'mq.v1.Meta/CreateToken', 'ipv4:127.0.0.1:6666')
    refused.end(status.UNAUTHENTICATED, 'this cluster requires a token')
    expect(lines).toHaveLength(2)
    expect(lines[0]).toMatchObject({
      level: 'info',
      node: 'n1',
      msg: 'audit: mq.v1.Meta/DeleteQueue by token:ops: OK',
      audit: {
        method: 'mq.v1.Meta/DeleteQueue',
        principal: 'token:ops',
        peer: 'ipv4:127.0.0.1:5555',
        code: 'OK',
        name: 'jobs',
        ms: expect.any(Number),
      },
    })
    expect(lines[0]?.audit).not.toHaveProperty('details')
    expect(lines[1]).toMatchObject({
      msg: 'audit: mq.v1.Meta/CreateToken by anonymous: UNAUTHENTICATED',
      audit: { principal: 'anonymous', code: 'UNAUTHENTICATED', details: 'this cluster requires a token' },
    })
  })

  it('writes the line of a call whose caller went away once its handler answers, or without the outcome when it never does', () => {
    vi.useFakeTimers()
    try {
      const { log, lines } = capturedLog()
      const late = new AuditRecord(log, 'mq.v1.Meta/DrainNode', 'ipv4:127.0.0.1:5555', 10_000)
      late.cancelled()
      vi.advanceTimersByTime(9_000)
      late.answered() // within the wait: the real outcome
      expect(vi.getTimerCount()).toBe(0) // and its wait is over
      const silent = new AuditRecord(log, 'mq.v1.Meta/DeleteQueue', 'ipv4:127.0.0.1:6666', 10_000)
      silent.request({ name: 'jobs' })
      silent.cancelled()
      silent.cancelled() // one wait
      vi.advanceTimersByTime(10_000)
      silent.answered() // too late: the line is written already
      vi.advanceTimersByTime(60_000)
      expect(lines.map((l) => l.audit)).toMatchObject([
        { method: 'mq.v1.Meta/DrainNode', code: 'OK', cancelled: true },
        {
          method: 'mq.v1.Meta/DeleteQueue',
          code: 'CANCELLED',
          cancelled: true,
          name: 'jobs',
          details: 'the caller went away and the handler had not answered 10 s later: the outcome is unknown',
        },
      ])
    } finally {
      vi.useRealTimers()
    }
  })
})
