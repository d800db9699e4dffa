import { describe, expect, it } from 'vitest'
import { AcksUnderWay } from './acks-under-way'

function deferred(): { promise: Promise<void>; resolve: () => void; reject: (e: Error) => void } {
  let resolve = () => {}
  let reject: (e: Error) => void = () => {}
  const promise = new Promise<void>((res, rej) => {
    resolve = res
    reject = rej
  })
  return { promise, resolve, reject }
}

describe('AcksUnderWay', () => {
  it('holds an ack only until it settles, either way', async () => {
    const acks = new AcksUnderWay()
    for (let i = 0; i < 1_000; i++) acks.add(Promise.resolve())
    const failing = deferred()
    acks.add(failing.promise)
    expect(acks.size).toBe(1_001)
    await new Promise((resolve) => setImmediate(resolve))
    expect(acks.size).toBe(1)
    failing.reject(new Error('ack failed'))
    await new Promise((resolve) => setImmediate(resolve))
    expect(acks.size).toBe(0)
  })

  it('settles once every ack added has settled, and does not reject for a failed one', async () => {
    const acks = new AcksUnderWay()
    const a = deferred()
    const b = deferred()
    acks.add(a.promise)
    acks.add(b.promise)
    let done = false
    const settled = acks.settled().then(() => {
      done = true
    })
    a.resolve()
    await new Promise((resolve) => setImmediate(resolve))
    expect(done).toBe(false)
    b.reject(new Error('ack failed'))
    await settled
    expect(done).toBe(true)
    expect(acks.size).toBe(0)
  })
})
