import {
  type ClientDuplexStream,
  credentials,
  Metadata,
  makeGenericClientConstructor,
  Server,
  ServerCredentials,
  type ServiceError,
  status,
} from '@grpc/grpc-js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createLogger } from '../log'
import { AccessControl, AUTHORIZATION_KEY } from './access'
import { AUDIT_FIELD_CHARS_MAX } from './audit-log'
import { authInterceptor } from './auth-interceptor'
import { parseTokenFile } from './token-file'

// A real grpc-js server with the interceptor, serving JSON on two paths it knows by name: an
// administrative unary method and a bidi method no table lists (so it needs admin).
const json = {
  requestSerialize: (b: Buffer) => b,
  requestDeserialize: (b: Buffer) => JSON.parse(b.toString()) as unknown,
  responseSerialize: (v: unknown) => Buffer.from(JSON.stringify(v)),
  responseDeserialize: (b: Buffer) => JSON.parse(b.toString()) as unknown,
}
const definition = {
  deleteQueue: { path: '/mq.v1.Meta/DeleteQueue', requestStream: false, responseStream: false, ...json },
  newStream: { path: '/mq.v1.Meta/NewStream', requestStream: true, responseStream: true, ...json },
}
const access = new AccessControl({
  peerToken: 'peer-secret-0123456789',
  tokens: parseTokenFile(
    {
      tokens: [
        { name: 'ops', token: 'admin-secret-0123456789', roles: ['admin'] },
        { name: 'app', token: 'app-secret-0123456789', roles: ['producer:orders.*'] },
      ],
    },
    'test',
  ),
})
const ADMIN = 'admin-secret-0123456789'
const APP = 'app-secret-0123456789'
const lines: { msg: string; audit?: Record<string, unknown> }[] = []
const log = createLogger({
  nodeId: 'n1',
  level: 'info',
  format: 'json',
  destination: { write: (line: string) => void lines.push(JSON.parse(line)) },
})
const ran: string[] = [] // the handlers that ran, with what
let server: Server
let client: InstanceType<ReturnType<typeof makeGenericClientConstructor>>

beforeAll(async () => {
  server = new Server({ interceptors: [authInterceptor(access, log)] })
  server.addService(definition, {
    deleteQueue: (
      call: { request: { name: string; slowMs?: number } },
      cb: (e: null, r: unknown) => void,
    ) => {
      ran.push(`deleteQueue ${call.request.name}`)
      setTimeout(() => cb(null, { ok: true }), call.request.slowMs ?? 0)
    },
    newStream: (call: NodeJS.EventEmitter & { write(v: unknown): void; end(): void }) => {
      ran.push('newStream')
      call.write({ hello: true })
      call.on('data', () => {})
      call.on('end', () => call.end())
    },
  })
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) =>
      e ? reject(e) : resolve(p),
    ),
  )
  const Client = makeGenericClientConstructor(definition, 'Test')
  client = new Client(`127.0.0.1:${port}`, credentials.createInsecure())
})

afterAll(() => {
  client?.close()
  server?.forceShutdown()
})

function md(token?: string): Metadata {
  const m = new Metadata()
  if (token) m.set(AUTHORIZATION_KEY, `Bearer ${token}`)
  return m
}

/** One DeleteQueue with `body` (raw bytes, or an object sent as JSON); resolves with its status code. */
function deleteQueue(body: unknown, token?: string, deadlineMs = 5_000): Promise<number> {
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body))
  return new Promise((resolve) =>
    (client as unknown as Record<string, (...a: unknown[]) => void>).deleteQueue?.(
      bytes,
      md(token),
      { deadline: Date.now() + deadlineMs },
      (e: ServiceError | null) => resolve(e ? e.code : status.OK),
    ),
  )
}

/** The audit line of `method` whose principal is `principal`, once written (waits up to 2 s). */
async function auditLine(method: string, principal: string): Promise<Record<string, unknown> | undefined> {
  const deadline = Date.now() + 2_000
  for (;;) {
    const found = lines.find((l) => l.audit?.method === method && l.audit.principal === principal)
    if (found || Date.now() > deadline) return found?.audit
    await new Promise((r) => setTimeout(r, 10))
  }
}

describe('the auth interceptor', () => {
  it('authorizes a streaming call when it opens: its handler never starts for a caller refused', async () => {
    const stream = (token?: string) =>
      new Promise<{ code: number; got: unknown[] }>((resolve) => {
        const got: unknown[] = []
        const s = (
          client as unknown as { newStream(m: Metadata): ClientDuplexStream<Buffer, unknown> }
        ).newStream(md(token))
        s.on('data', (d) => {
          got.push(d)
          s.end()
        })
        s.on('error', (e: ServiceError) => resolve({ code: e.code, got }))
        s.on('status', (st: { code: number }) => resolve({ code: st.code, got }))
      })
    expect(await stream()).toEqual({ code: status.UNAUTHENTICATED, got: [] })
    expect(await stream(APP)).toEqual({ code: status.PERMISSION_DENIED, got: [] })
    expect(ran).not.toContain('newStream')
    expect(await stream(ADMIN)).toEqual({ code: status.OK, got: [{ hello: true }] })
    expect(ran).toContain('newStream')
    expect(await auditLine('mq.v1.Meta/NewStream', 'anonymous')).toMatchObject({ code: 'UNAUTHENTICATED' })
  })

  it('audits a refused administrative call with what it asked for, or, without credentials, unread', async () => {
    expect(await deleteQueue({ name: 'billing' }, APP)).toBe(status.PERMISSION_DENIED)
    expect(await auditLine('mq.v1.Meta/DeleteQueue', 'token:app')).toMatchObject({
      code: 'PERMISSION_DENIED',
      name: 'billing',
    })
    expect(await deleteQueue({ name: 'billing' })).toBe(status.UNAUTHENTICATED)
    const anonymous = await auditLine('mq.v1.Meta/DeleteQueue', 'anonymous')
    expect(anonymous).toMatchObject({ code: 'UNAUTHENTICATED' })
    expect(anonymous).not.toHaveProperty('name')
    expect(ran.filter((r) => r.startsWith('deleteQueue'))).toEqual([])
  })

  it('bounds what a line keeps of a request, however large', async () => {
    lines.length = 0
    expect(await deleteQueue({ name: 'x'.repeat(100_000) }, APP)).toBe(status.PERMISSION_DENIED)
    const line = await auditLine('mq.v1.Meta/DeleteQueue', 'token:app')
    expect(String(line?.name)).toMatch(/… \(100002 chars\)$/)
    expect(JSON.stringify(line).length).toBeLessThan(3 * AUDIT_FIELD_CHARS_MAX)
  })

  it('audits a request grpc-js refused, and the answer to a caller that had gone', async () => {
    lines.length = 0
    expect(await deleteQueue(Buffer.from('not json'), ADMIN)).not.toBe(status.OK)
    expect(await auditLine('mq.v1.Meta/DeleteQueue', 'token:ops')).toMatchObject({ code: 'CANCELLED' })
    expect(ran).toEqual(['newStream'])
    lines.length = 0
    expect(await deleteQueue({ name: 'jobs', slowMs: 300 }, ADMIN, 50)).toBe(status.DEADLINE_EXCEEDED)
    // The handler went on and answered: the queue is gone, and the line (awaited) says so.
    expect(await auditLine('mq.v1.Meta/DeleteQueue', 'token:ops')).toMatchObject({
      code: 'OK',
      cancelled: true,
      name: 'jobs',
    })
    expect(lines.filter((l) => l.audit)).toHaveLength(1)
  })
})
