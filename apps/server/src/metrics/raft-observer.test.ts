import { type Message, MessageType, message, type StateMachine } from '@mq/raft-core'
import { describe, expect, it } from 'vitest'
import { NodeMetrics } from './node-metrics'
import { observedStateMachine, observedTransport } from './raft-observer'

async function count(metrics: NodeMetrics, name: string, group: string): Promise<number> {
  const metric = await metrics.registry.getSingleMetric(name)?.get()
  return metric?.values.find((v) => v.labels.group === group && !('le' in v.labels))?.value ?? 0
}

describe('raft observers', () => {
  it('count one election per new campaign term and one snapshot send per first chunk, passing every message on', async () => {
    const metrics = new NodeMetrics('n1')
    const sent: Message[] = []
    const transport = observedTransport({ send: (_g, ms) => sent.push(...ms) }, metrics)
    const vote = (term: number, to: string) => message({ type: MessageType.Vote, from: 'n1', to, term })
    transport.send(1, [vote(2, 'n2'), vote(2, 'n3')])
    transport.send(1, [vote(2, 'n2')])
    transport.send(1, [vote(3, 'n2')])
    transport.send(2, [vote(3, 'n2')])
    const chunk = (offset: number) =>
      message({
        type: MessageType.Snap,
        from: 'n1',
        to: 'n2',
        term: 3,
        snapshot: {
          meta: { index: 9, term: 3, conf: { voters: [], learners: [] } } as never,
          offset,
          totalBytes: 20,
          data: new Uint8Array(10),
        },
      })
    transport.send(1, [chunk(0), chunk(10)])
    expect(await count(metrics, 'mq_raft_elections_total', '1')).toBe(2)
    expect(await count(metrics, 'mq_raft_elections_total', '2')).toBe(1)
    expect(await count(metrics, 'mq_raft_snapshot_sends_total', '1')).toBe(1)
    expect(sent).toHaveLength(7)
  })

  it('passes every optional member of the state machine through (the host reads their presence)', async () => {
    const metrics = new NodeMetrics('n1')
    const full: Required<StateMachine> = {
      apply: () => [],
      snapshot: () => new Uint8Array(),
      restore: () => {},
      persisted: async () => {},
      applyBacklog: () => 7,
    }
    const sm = observedStateMachine(1, full, metrics)
    expect(Object.keys(sm).sort()).toEqual(Object.keys(full).sort())
    expect(sm.applyBacklog?.()).toBe(7)
    const bare = observedStateMachine(
      1,
      { apply: () => [], snapshot: () => new Uint8Array(), restore: () => {} },
      metrics,
    )
    expect(Object.keys(bare).sort()).toEqual(['apply', 'restore', 'snapshot'])
  })

  it('times an asynchronous apply until its results settle, and returns them unchanged', async () => {
    const metrics = new NodeMetrics('n1')
    let release = () => {}
    const pending = new Promise<string>((resolve) => {
      release = () => resolve('done')
    })
    const inner: StateMachine = {
      apply: () => [pending],
      snapshot: () => new Uint8Array(),
      restore: () => {},
    }
    const sm = observedStateMachine(4, inner, metrics)
    const results = sm.apply([])
    expect(results).toEqual([pending])
    const histogram = async () =>
      (await metrics.registry.getSingleMetric('mq_raft_apply_seconds')?.get())?.values.find(
        (v) =>
          (v as { metricName?: string }).metricName === 'mq_raft_apply_seconds_count' &&
          v.labels.group === '4',
      )?.value ?? 0
    expect(await histogram()).toBe(0)
    release()
    await pending
    await new Promise((r) => setImmediate(r))
    expect(await histogram()).toBe(1)
  })
})
