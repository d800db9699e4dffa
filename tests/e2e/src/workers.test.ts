import { describe, expect, it } from 'vitest'
import { History } from './history'
import { Workload } from './workers'

describe('Workload', () => {
  it('counts the ok-enqueued bodies not acked yet, whichever answer comes first', () => {
    const load = new Workload(new History(), 'q')
    load.noteEnqueued('a')
    load.noteEnqueued('b')
    load.noteAcked('a')
    // An ack that comes before its enqueue's answer, and a repeated note of each kind.
    load.noteAcked('c')
    load.noteEnqueued('c')
    load.noteEnqueued('b')
    load.noteAcked('a')
    expect(load.unackedCount).toBe(1)
    expect(load.unacked()).toEqual(['b'])
    load.noteAcked('b')
    expect(load.unackedCount).toBe(0)
    expect(load.unacked()).toEqual([])
  })
})
