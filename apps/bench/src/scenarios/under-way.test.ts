import { describe, expect, it } from 'vitest'
import { UnderWay } from './under-way'

/** An ack that settles when told to: ok, or failed. */
function pendingAck(): { ack: Promise<void>; settle: (ok: boolean) => void } {
  const settlers: ((ok: boolean) => void)[] = []
  const ack = new Promise<void>((resolve, reject) => {
    settlers.push((ok) => (ok ? resolve() : reject(new Error('ack failed'))))
  })
  return { ack, settle: (ok) => settlers[0]?.(ok) }
}

describe('UnderWay', () => {
  it('holds an ack only until it settles, either way', async () => {
    const acks = new UnderWay()
    for (let i = 0; i < 1_000; i++) acks.add(Promise.resolve())
    const failing = pendingAck()
    acks.add(failing.ack)
    expect(acks.size).toBe(1_001)
    await new Promise((resolve) => setImmediate(resolve))
    expect(acks.size).toBe(1)
    failing.settle(false)
    await new Promise((resolve) => setImmediate(resolve))
    expect(acks.size).toBe(0)
  })

  it('settles once every ack added has settled, and does not reject for a failed one', async () => {
    const acks = new UnderWay()
    const a = pendingAck()
    const b = pendingAck()
    acks.add(a.ack)
    acks.add(b.ack)
    let done = false
    const settled = acks.settled().then(() => {
      done = true
    })
    a.settle(true)
    await new Promise((resolve) => setImmediate(resolve))
    expect(done).toBe(false)
    b.settle(false)
    await settled
    expect(done).toBe(true)
    expect(acks.size).toBe(0)
  })
})
