import type { CallOptions, Metadata, ServiceError } from '@grpc/grpc-js'
import { Metadata as GrpcMetadata } from '@grpc/grpc-js'

/** A unary stub method, as grpc-js generates it. */
type Unary<Req, Res> = (
  request: Req,
  metadata: Metadata,
  options: Partial<CallOptions>,
  callback: (error: ServiceError | null, response: Res) => void,
) => unknown

/** The outcome of one call: its response, or the status it failed with. */
export type Outcome<Res> = { ok: true; response: Res } | { ok: false; code: number; details: string }

/**
 * Calls a unary method with `headers` as metadata and a 5 s deadline; never rejects (tests
 * assert on the outcome's status code).
 */
export function call<Req, Res>(
  stub: object,
  method: Unary<Req, Res>,
  request: Req,
  headers: Record<string, string> = {},
): Promise<Outcome<Res>> {
  const metadata = new GrpcMetadata()
  for (const [k, v] of Object.entries(headers)) metadata.set(k, v)
  return new Promise((resolve) =>
    method.call(stub, request, metadata, { deadline: Date.now() + 5_000 }, (error, response) =>
      resolve(error ? { ok: false, code: error.code, details: error.details } : { ok: true, response }),
    ),
  )
}

/** Calls until the call succeeds or `timeoutMs` passes (a new cluster elects leaders first); returns the last outcome. */
export async function callUntilOk<Res>(
  attempt: () => Promise<Outcome<Res>>,
  timeoutMs = 20_000,
): Promise<Outcome<Res>> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const outcome = await attempt()
    if (outcome.ok || Date.now() > deadline) return outcome
    await new Promise((r) => setTimeout(r, 100))
  }
}

/** Fetches `url` and returns its status and body. */
export async function httpGet(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string }> {
  const res = await fetch(url, { headers })
  return { status: res.status, body: await res.text() }
}

/** Polls `url` until it answers 200 or `timeoutMs` passes; returns the last answer. */
export async function httpUntilOk(
  url: string,
  timeoutMs = 20_000,
): Promise<{ status: number; body: string }> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const r = await httpGet(url).catch((e: Error) => ({ status: 0, body: e.message }))
    if (r.status === 200 || Date.now() > deadline) return r
    await new Promise((res) => setTimeout(res, 100))
  }
}
