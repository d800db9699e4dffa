import type { ApiError } from '../api-types'

/** An error answer of the console API, with its stable code and HTTP status. */
export class ApiCallError extends Error {
  override readonly name = 'ApiCallError'
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message)
  }
}

const TOKEN_KEY = 'mq-console-token'
/** Each API call gives up after this long. */
const CALL_MS = 10_000

/** The token entered in the page, kept for the browser tab's session only. */
export function savedToken(): string {
  return sessionStorage.getItem(TOKEN_KEY) ?? ''
}

export function saveToken(token: string): void {
  if (token) sessionStorage.setItem(TOKEN_KEY, token)
  else sessionStorage.removeItem(TOKEN_KEY)
}

/**
 * Calls the console API at `path` (GET, or POST with `body` as JSON) with the saved token as
 * a bearer header; resolves with the parsed answer, rejects with ApiCallError.
 */
export async function api<T>(path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = {}
  const token = savedToken()
  if (token) headers.authorization = `Bearer ${token}`
  if (body !== undefined) headers['content-type'] = 'application/json'
  let response: Response
  try {
    response = await fetch(path, {
      method: body === undefined ? 'GET' : 'POST',
      headers,
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(CALL_MS),
    })
  } catch (error) {
    throw new ApiCallError(0, 'UNREACHABLE', `the server did not answer: ${(error as Error).message}`)
  }
  const text = await response.text()
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    throw new ApiCallError(
      response.status,
      'BAD_ANSWER',
      `not JSON (HTTP ${response.status}): ${text.slice(0, 200)}`,
    )
  }
  if (!response.ok) {
    const e = (parsed as ApiError).error ?? { code: 'UNKNOWN', message: text.slice(0, 200) }
    throw new ApiCallError(response.status, e.code, e.message)
  }
  return parsed as T
}
