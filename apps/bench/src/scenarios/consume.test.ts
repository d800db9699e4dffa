import type { MqClient } from '@mq/router-client'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { connect } from './common'
import { drain } from './consume'

// drain() connects its own clients: here they are fakes, so that an ack can fail on cue.
vi.mock('./common', async (importOriginal) => ({
  ...(await importOriginal<typeof import('./common')>()),
  connect: vi.fn(),
}))

/** A client whose one consumer delivers `acks.length` messages, 5 ms apart, acked as `acks` says. */
function fakeClient(acks: readonly ('ok' | 'fail')[]): MqClient {
  let closed = false
  const consumer = {
    async *[Symbol.asyncIterator]() {
      for (const outcome of acks) {
        await new Promise((resolve) => setTimeout(resolve, 5))
        if (closed) return
        yield {
          body: new Uint8Array(8),
          ack: () => (outcome === 'ok' ? Promise.resolve() : Promise.reject(new Error('lease lost'))),
        }
      }
    },
    close: async () => {
      closed = true
    },
  }
  return { consumer: () => consumer, close: async () => {} } as unknown as MqClient
}

describe('drain', () => {
  const unhandled: unknown[] = []
  const onUnhandled = (reason: unknown) => void unhandled.push(reason)
  afterEach(() => {
    process.off('unhandledRejection', onUnhandled)
  })

  // The audit's case: an ack that failed (a lease lost, a partition unavailable) was a rejected
  // promise nobody listened to until the drain ended, so Node ended the whole bench with an
  // unhandled rejection instead of reporting the acks that were confirmed.
  it('counts only the confirmed acks, and a failed ack does not end the process', async () => {
    process.on('unhandledRejection', onUnhandled)
    vi.mocked(connect).mockResolvedValue(fakeClient(['ok', 'fail', 'ok', 'ok']))
    const r = await drain(['127.0.0.1:1'], 'q', { count: 4, consumers: 1, prefetch: 4, timeLimitMs: 10_000 })
    // Give a late unhandled rejection its turn to be reported.
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(unhandled).toEqual([])
    expect(r.acked).toBe(3)
  })
})
