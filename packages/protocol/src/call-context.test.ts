import { EventEmitter } from 'node:events'
import type { ServerUnaryCall } from '@grpc/grpc-js'
import { describe, expect, it } from 'vitest'
import { CALL_CANCELLED, CallContext } from './call-context'

/** A stand-in for grpc-js's call: `cancelled` set and the event emitted as its stream closes. */
function fakeCall(cancelled = false): EventEmitter & { cancelled: boolean } {
  return Object.assign(new EventEmitter(), { cancelled })
}
const asCall = (c: EventEmitter) => c as unknown as ServerUnaryCall<unknown, unknown>

describe('CallContext', () => {
  it('aborts `cancelled` when the call reports its cancel, every call with the one shared reason', () => {
    const calls = [fakeCall(), fakeCall()]
    const signals = calls.map((c) => new CallContext(asCall(c)).cancelled)
    for (const s of signals) expect(s.aborted).toBe(false)
    for (const c of calls) c.emit('cancelled', 'cancelled')
    for (const s of signals) {
      expect(s.aborted).toBe(true)
      expect(s.reason).toBe(CALL_CANCELLED)
    }
    expect(CALL_CANCELLED.name).toBe('AbortError')
  })

  it('is aborted from the start for a call cancelled before the handler looked, and makes one signal', () => {
    const context = new CallContext(asCall(fakeCall(true)))
    expect(context.cancelled.aborted).toBe(true)
    expect(context.cancelled.reason).toBe(CALL_CANCELLED)
    expect(context.cancelled).toBe(context.cancelled)
  })
})
