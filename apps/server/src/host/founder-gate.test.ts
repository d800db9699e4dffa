import { Metadata, type ServiceError, status } from '@grpc/grpc-js'
import { fromGrpcError, type ProbeResponse } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { type Founder, FounderGate, foundersPristine } from './founder-gate'

const FOUNDERS: Founder[] = ['n1', 'n2', 'n3', 'n4', 'n5'].map((nodeId, i) => ({
  nodeId,
  address: `127.0.0.1:${7001 + i}`,
}))

/** A gate of n1 whose probes answer from `answers` (a node left out does not answer). */
function gate(answers: Map<string, ProbeResponse>) {
  const opened: number[] = []
  const waiting: string[] = []
  const asked: string[] = []
  const g = new FounderGate({
    self: 'n1',
    founders: FOUNDERS,
    probe: async (f) => {
      asked.push(f.nodeId)
      const answer = answers.get(f.address)
      if (!answer) throw new Error('UNAVAILABLE')
      return answer
    },
    open: () => opened.push(1),
    waiting: (m) => waiting.push(m),
    logEveryMs: 1_000,
  })
  return { g, opened, waiting, asked }
}

const pristine = (nodeId: string): ProbeResponse => ({ nodeId, metaPristine: true })
const ran = (nodeId: string): ProbeResponse => ({ nodeId, metaPristine: false })

describe('foundersPristine', () => {
  it('needs a majority of the founders, the asking one included', () => {
    expect(foundersPristine(FOUNDERS, 'n1', new Set(['n2', 'n3']))).toBe(true)
    expect(foundersPristine(FOUNDERS, 'n1', new Set(['n2']))).toBe(false)
    expect(foundersPristine(FOUNDERS.slice(0, 1), 'n1', new Set())).toBe(true) // a founder alone
    expect(foundersPristine(FOUNDERS.slice(0, 2), 'n1', new Set())).toBe(false) // 1 of 2
    // Names that are not founders do not count.
    expect(foundersPristine(FOUNDERS, 'n1', new Set(['n2', 'x', 'y']))).toBe(false)
    // One founder whose replica holds more proves the meta group ran, whatever the others say
    // (they may answer pristine only because they wait at their own gates).
    expect(foundersPristine(FOUNDERS, 'n1', new Set(['n2', 'n3', 'n4']), new Set(['n5']))).toBe(false)
    expect(foundersPristine(FOUNDERS, 'n1', new Set(['n2', 'n3']), new Set(['x']))).toBe(true)
  })
})

describe('FounderGate', () => {
  it('opens when a majority of the founders never ran the meta group (a new cluster)', async () => {
    const t = gate(
      new Map([FOUNDERS[1], FOUNDERS[2]].map((f) => [f?.address ?? '', pristine(f?.nodeId ?? '')])),
    )
    await t.g.round(0)
    expect(t.asked.sort()).toEqual(['n2', 'n3', 'n4', 'n5'])
    expect(t.opened).toEqual([1])
    expect(t.g.opened).toBe(true)
    await t.g.round(1) // no more rounds, no second open
    t.g.open()
    expect(t.opened).toEqual([1])
    expect(t.asked).toHaveLength(4)
  })

  it('stays shut in a running cluster (a wiped founder), saying why at most every logEveryMs', async () => {
    const answers = new Map<string, ProbeResponse>([
      ['127.0.0.1:7002', pristine('n2')],
      ['127.0.0.1:7003', ran('n3')],
      ['127.0.0.1:7004', ran('n4')],
      // n5 does not answer
    ])
    const t = gate(answers)
    await t.g.round(0)
    await t.g.round(500)
    await t.g.round(1_000)
    expect(t.opened).toEqual([])
    expect(t.waiting).toHaveLength(2)
    expect(t.waiting[0]).toContain('so far n2 besides itself, and n3, n4 holding more')
    // The meta leader accepts the node's store (a heartbeat answer): it opens.
    t.g.open()
    expect(t.opened).toEqual([1])
  })

  it("stays shut when one founder's replica holds more, though a majority answers pristine (a wiped founder and one that never started)", async () => {
    const t = gate(
      new Map([
        ['127.0.0.1:7002', pristine('n2')],
        ['127.0.0.1:7003', pristine('n3')],
        ['127.0.0.1:7004', ran('n4')],
      ]),
    )
    await t.g.round(0)
    expect(t.opened).toEqual([])
  })

  it('counts a founder that answers Probe UNIMPLEMENTED (an older version) as holding more: a wiped founder and two that never started do not pass beside it', async () => {
    // What PeerCalls rejects with when the callee has no Peer.Probe.
    const unimplemented = fromGrpcError(
      Object.assign(
        new Error('12 UNIMPLEMENTED: The server does not implement the method /mq.v1.Peer/Probe'),
        {
          code: status.UNIMPLEMENTED,
          details: 'The server does not implement the method /mq.v1.Peer/Probe',
          metadata: new Metadata(),
        },
      ) as ServiceError,
    )
    const opened: number[] = []
    const waiting: string[] = []
    const g = new FounderGate({
      self: 'n1',
      founders: FOUNDERS,
      probe: async (f) => {
        if (f.nodeId === 'n2') throw unimplemented
        if (f.nodeId === 'n3' || f.nodeId === 'n4') return pristine(f.nodeId)
        throw new Error('UNAVAILABLE')
      },
      open: () => opened.push(1),
      waiting: (m) => waiting.push(m),
    })
    await g.round(0)
    expect(opened).toEqual([])
    expect(waiting[0]).toContain('and n2 holding more')
  })

  it('counts an answer only from the node it asked (a wrong address)', async () => {
    const t = gate(
      new Map([
        ['127.0.0.1:7002', pristine('n9')],
        ['127.0.0.1:7003', pristine('n3')],
      ]),
    )
    await t.g.round(0)
    expect(t.opened).toEqual([])
  })
})
