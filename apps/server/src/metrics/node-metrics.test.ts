import type { PartitionStats } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { parseExposition, sampleSum } from '../../test/prometheus'
import type { NodeView, PartitionView } from '../node-view'
import { NodeMetrics, QUEUE_OVERFLOW } from './node-metrics'
import { OTHER_WEIGHTS, WEIGHT_SERIES_MAX } from './partition-series'
import { countQueueOps } from './queue-ops'

const PARTITIONS = 4

/** One event-loop turn. */
const turn = () => new Promise<void>((r) => setImmediate(r))

/** A view leading PARTITIONS partitions of queue `q`, each one's stats answered a turn after asked. */
function fakeView(): { view: NodeView; statsCalls: () => number } {
  let calls = 0
  const stats = async (): Promise<PartitionStats> => {
    calls++
    await turn()
    return {
      weights: [
        {
          weight: 1,
          ready: 5,
          delayed: 0,
          leased: 0,
          dead: 0,
          oldestAgeMs: 0,
          targetShare: 1,
          achievedShare: 1,
        },
      ],
      messages: 5,
      waiting: 0,
      windowLeases: 0,
      counters: {
        enqueued: 7,
        delivered: 3,
        acked: 2,
        nacked: 0,
        expired: 1,
        deadLettered: 1,
        discarded: 0,
      },
    } as unknown as PartitionStats
  }
  const partitions = Array.from({ length: PARTITIONS }, (_, partition) => ({
    groupId: 1,
    queue: 'q',
    partition,
    stats,
  }))
  const view = {
    nodeId: 'n1',
    serving: () => true,
    failed: () => false,
    groups: () => [],
    ledPartitions: () => partitions,
    metaLeaderId: () => 'n1',
  } as unknown as NodeView
  return { view, statsCalls: () => calls }
}

const readySeries = (text: string) =>
  text.split('\n').filter((l) => l.startsWith('mq_queue_messages{') && l.includes('state="ready"')).length

describe('NodeMetrics.render', () => {
  it("exports each led partition's replicated counts, set afresh at each scrape", async () => {
    const metrics = new NodeMetrics('n1')
    const { view } = fakeView()
    const scrape = async () => {
      const text = await metrics.render(view)
      return text
        .split('\n')
        .filter((l) => l.startsWith('mq_partition_messages_total{') && l.includes('partition="2"'))
    }
    const expected = [
      'mq_partition_messages_total{queue="q",partition="2",event="enqueued",node="n1"} 7',
      'mq_partition_messages_total{queue="q",partition="2",event="delivered",node="n1"} 3',
      'mq_partition_messages_total{queue="q",partition="2",event="acked",node="n1"} 2',
      'mq_partition_messages_total{queue="q",partition="2",event="nacked",node="n1"} 0',
      'mq_partition_messages_total{queue="q",partition="2",event="expired",node="n1"} 1',
      'mq_partition_messages_total{queue="q",partition="2",event="dead_lettered",node="n1"} 1',
      'mq_partition_messages_total{queue="q",partition="2",event="discarded",node="n1"} 0',
    ]
    expect(await scrape()).toEqual(expected)
    // Not added up from one scrape to the next: the partition's own counts each time.
    expect(await scrape()).toEqual(expected)
  })

  it('gives concurrent scrapes every series: they share one collection', async () => {
    const metrics = new NodeMetrics('n1')
    const { view, statsCalls } = fakeView()
    expect(readySeries(await metrics.render(view))).toBe(PARTITIONS)
    const before = statsCalls()
    const first = metrics.render(view)
    // The first scrape is under way, waiting for the partitions' stats (asked all at once, each
    // answered a turn later).
    const second = metrics.render(view)
    const [a, b] = await Promise.all([first, second])
    expect([readySeries(a), readySeries(b)]).toEqual([PARTITIONS, PARTITIONS])
    // One collection for both.
    expect(statsCalls() - before).toBe(PARTITIONS)
    // Once it is done, a scrape collects afresh.
    await metrics.render(view)
    expect(statsCalls() - before).toBe(2 * PARTITIONS)
  })
})

/** A view leading `partitions` partitions of queues a and b (alternately), each holding `weights` weights, its stats answered at once. */
function wideView(partitions: number, weights: number): NodeView {
  const stats = async () => ({
    weights: Array.from({ length: weights }, (_, i) => ({
      weight: i + 1,
      ready: 2,
      delayed: 1,
      leased: 0,
      dead: 0,
      oldestAgeMs: (i + 1) * 1000,
      targetShare: (i + 1) / ((weights * (weights + 1)) / 2),
      achievedShare: 0,
    })),
    messages: 3 * weights,
    waiting: 0,
    windowLeases: 0,
  })
  const led = Array.from({ length: partitions }, (_, partition) => ({
    groupId: 1,
    queue: partition % 2 === 0 ? 'a' : 'b',
    partition,
    stats,
  }))
  return { ...fakeView().view, ledPartitions: () => led } as unknown as NodeView
}

describe('NodeMetrics.render of many weights and partitions', () => {
  it(`shows a partition's ${WEIGHT_SERIES_MAX} weights of largest target share and sums the others under weight="${OTHER_WEIGHTS}"`, async () => {
    const samples = parseExposition(await new NodeMetrics('n1').render(wideView(1, 1000)))
    const weights = new Set(samples.filter((s) => s.name === 'mq_queue_messages').map((s) => s.labels.weight))
    expect([...weights]).toEqual([
      ...Array.from({ length: WEIGHT_SERIES_MAX }, (_, i) => String(1000 - WEIGHT_SERIES_MAX + 1 + i)),
      OTHER_WEIGHTS,
    ])
    // Sums over weights are still the partition's.
    expect(sampleSum(samples, 'mq_queue_messages', { state: 'ready' })).toBe(2000)
    expect(sampleSum(samples, 'mq_queue_messages', { state: 'delayed' })).toBe(1000)
    expect(sampleSum(samples, 'mq_queue_target_share')).toBeCloseTo(1)
    expect(sampleSum(samples, 'mq_queue_oldest_age_seconds', { weight: OTHER_WEIGHTS })).toBe(
      1000 - WEIGHT_SERIES_MAX,
    )
  })

  it('renders a large scrape over many event-loop turns (the Raft ticks are not held up)', async () => {
    let turns = 0
    let rendering = true
    const count = () => {
      turns++
      if (rendering) setImmediate(count)
    }
    setImmediate(count)
    // 200 partitions of 17 weight series: 25,000 lines, and stats answered with no turn between.
    const text = await new NodeMetrics('n1').render(wideView(200, 40))
    rendering = false
    expect(text.split('\n').filter((l) => l.startsWith('mq_queue_messages{')).length).toBe(200 * 17 * 4)
    expect(turns).toBeGreaterThanOrEqual(10)
  })

  it("asks every led partition's stats at once: each waits behind its group's applies, and one after the other a scrape under load took the sum of those waits", async () => {
    // No read answers before all were asked (each waits for an apply queued before it; here, the
    // last ask): asked one at a time, the first one never answered.
    const view = wideView(20, 1)
    const asked: (() => void)[] = []
    const led = view.ledPartitions().map((p) => ({
      ...p,
      stats: async () => {
        await new Promise<void>((resolve) => {
          asked.push(resolve)
          if (asked.length === 20) for (const r of asked) r()
        })
        return p.stats()
      },
    }))
    const waited = new NodeMetrics('n1').render({ ...view, ledPartitions: () => led } as unknown as NodeView)
    const text = await Promise.race([
      waited,
      new Promise<string>((r) => setTimeout(() => r('timed out'), 2_000)),
    ])
    expect(asked).toHaveLength(20)
    expect(
      text.split('\n').filter((l) => l.startsWith('mq_queue_messages{') && l.includes('state="ready"')),
    ).toHaveLength(20)
  })

  it('leaves the partitions of queues a scoped caller does not see out of its scrape', async () => {
    const metrics = new NodeMetrics('n1')
    const view = wideView(4, 2)
    const queues = (text: string) =>
      new Set(parseExposition(text).flatMap((s) => (s.labels.queue === undefined ? [] : [s.labels.queue])))
    expect(queues(await metrics.render(view))).toEqual(new Set(['a', 'b']))
    expect(queues(await metrics.render(view, (q) => q === 'b'))).toEqual(new Set(['b']))
  })
})

/** A view leading one partition of each queue in `queues` (mutable), with no stats. */
function ledView(queues: Set<string>): NodeView {
  return {
    nodeId: 'n1',
    serving: () => true,
    failed: () => false,
    groups: () => [],
    ledPartitions: (): PartitionView[] =>
      [...queues].map((queue) => ({ groupId: 1, queue, partition: 0, stats: async () => undefined })),
    metaLeaderId: () => 'n1',
  }
}

/** What a successful Produce of `count` messages to `queue` counts. */
function produced(metrics: NodeMetrics, queue: string, count = 1): void {
  const ids = Array.from({ length: count }, (_, i) => i)
  countQueueOps(metrics, '/mq.v1.Queue/Produce', { target: { queue } }, { ids, duplicate: false })
}

/** The value of `mq_queue_enqueued_total` per queue label in a scrape. */
function enqueued(text: string): Map<string, number> {
  const counts = new Map<string, number>()
  for (const m of text.matchAll(/^mq_queue_enqueued_total\{queue="([^"]*)",node="n1"\} (\d+)$/gm))
    counts.set(m[1] as string, Number(m[2]))
  return counts
}

const queueSeriesLines = (text: string) =>
  text.split('\n').filter((l) => /^mq_queue_[a-z]+_total\{/.test(l)).length

describe('NodeMetrics queue operation series', () => {
  const IDLE_MS = 60_000

  it('removes the series of queues deleted (no longer led) once idle, and never resets a led queue', async () => {
    let nowMs = 0
    const metrics = new NodeMetrics('n1', { queueSeriesIdleMs: IDLE_MS, now: () => nowMs })
    const led = new Set(['kept'])
    const view = ledView(led)
    produced(metrics, 'kept', 3)
    // 200 temporary queues: created (led here), used once, deleted.
    for (let i = 0; i < 200; i++) {
      led.add(`tmp-${i}`)
      produced(metrics, `tmp-${i}`)
      countQueueOps(
        metrics,
        '/mq.v1.Queue/Lease',
        { target: { queue: `tmp-${i}` } },
        { messages: [{ deliveryCount: 2 }] },
      )
    }
    expect(enqueued(await metrics.render(view)).size).toBe(201)
    for (let i = 0; i < 200; i++) led.delete(`tmp-${i}`)
    // Not led for less than the idle time: kept (a leader election ending back here resets nothing).
    nowMs += IDLE_MS - 1
    expect(enqueued(await metrics.render(view)).size).toBe(201)
    // Idle for queueSeriesIdleMs: gone, every counter of theirs; the led queue's count goes on.
    nowMs += 1
    const text = await metrics.render(view)
    expect(enqueued(text)).toEqual(new Map([['kept', 3]]))
    expect(text).not.toMatch(/queue="tmp-/)
    expect(queueSeriesLines(text)).toBe(1)
    // Long after, a led queue without operations keeps its series and its count.
    nowMs += 10 * IDLE_MS
    produced(metrics, 'kept')
    nowMs += 10 * IDLE_MS
    expect(enqueued(await metrics.render(view))).toEqual(new Map([['kept', 4]]))
  })

  it('keeps a queue counted here (not led at a scrape) for the idle time after its last operation', async () => {
    let nowMs = 0
    const metrics = new NodeMetrics('n1', { queueSeriesIdleMs: IDLE_MS, now: () => nowMs })
    const view = ledView(new Set())
    produced(metrics, 'q')
    nowMs += IDLE_MS - 1
    produced(metrics, 'q')
    nowMs += IDLE_MS - 1
    expect(enqueued(await metrics.render(view))).toEqual(new Map([['q', 2]]))
    nowMs += 1
    expect(enqueued(await metrics.render(view)).size).toBe(0)
  })

  it('counts queues past queueSeriesMax under the overflow label until a scrape removes idle ones', async () => {
    let nowMs = 0
    const metrics = new NodeMetrics('n1', {
      queueSeriesMax: 2,
      queueSeriesIdleMs: IDLE_MS,
      now: () => nowMs,
    })
    const led = new Set(['a', 'b', 'c', 'd'])
    const view = ledView(led)
    for (const queue of ['a', 'b', 'c', 'd', 'a']) produced(metrics, queue)
    expect(enqueued(await metrics.render(view))).toEqual(
      new Map([
        ['a', 2],
        ['b', 1],
        [QUEUE_OVERFLOW, 2],
      ]),
    )
    led.delete('b')
    nowMs += IDLE_MS
    await metrics.render(view)
    produced(metrics, 'c')
    expect(enqueued(await metrics.render(view))).toEqual(
      new Map([
        ['a', 2],
        ['c', 1],
        [QUEUE_OVERFLOW, 2],
      ]),
    )
  })
})

/** A view hosting the groups in `groups` (a replica of each, following a leader) and leading no partition. */
function groupsView(groups: Set<number>): NodeView {
  return {
    nodeId: 'n1',
    serving: () => true,
    failed: () => false,
    groups: () =>
      [...groups].map((groupId) => ({
        groupId,
        status: { term: 2, role: 'follower', lead: 'n2', commit: 9, applied: 9, lastIndex: 9 },
        imports: 0,
        sweeping: 0,
        logTail: { entries: 0, bytes: 0 },
      })) as unknown as ReturnType<NodeView['groups']>,
    ledPartitions: () => [],
    metaLeaderId: () => 'n2',
  }
}

/** The `group` labels of a scrape's samples. */
const groupLabels = (text: string) => new Set([...text.matchAll(/group="([^"]*)"/g)].map((m) => m[1]))

describe('NodeMetrics group series', () => {
  it('removes the series of data groups no longer hosted here (removed, or their replica moved away)', async () => {
    const metrics = new NodeMetrics('n1')
    const hosted = new Set([1])
    const view = groupsView(hosted)
    metrics.raftElections.inc({ group: '1' })
    // 50 data groups hosted for a while, each of which elected, sent a snapshot, committed and applied here.
    for (let groupId = 2; groupId < 52; groupId++) {
      hosted.add(groupId)
      const group = String(groupId)
      metrics.raftElections.inc({ group })
      metrics.raftSnapshotSends.inc({ group })
      metrics.raftApplySeconds.observe({ group }, 0.001)
      await metrics.timeAppend(groupId, Promise.resolve())
    }
    expect(groupLabels(await metrics.render(view)).size).toBe(51)
    // Removed (the cluster shrank its data groups, or moved their replicas to other nodes).
    for (let groupId = 2; groupId < 52; groupId++) hosted.delete(groupId)
    const text = await metrics.render(view)
    expect(groupLabels(text)).toEqual(new Set(['1']))
    expect(sampleSum(parseExposition(text), 'mq_raft_elections_total', { group: '1' })).toBe(1)
  })
})

describe('NodeMetrics of a node stopped after a fatal error', () => {
  it('reports no partition depth and no Raft role: its figures froze, and another node leads those groups now', async () => {
    const { view } = fakeView()
    const failed: NodeView = {
      ...view,
      serving: () => false,
      failed: () => true,
      // Its Raft host halted as the leader of group 1: the status it reads stays that forever.
      groups: () =>
        [
          {
            groupId: 1,
            status: { term: 3, role: 'leader', lead: 'n1', commit: 9, applied: 9, lastIndex: 9 },
            imports: 0,
            sweeping: 0,
            logTail: { entries: 0, bytes: 0 },
          },
        ] as unknown as ReturnType<NodeView['groups']>,
    }
    const samples = parseExposition(await new NodeMetrics('n1').render(failed))
    expect(sampleSum(samples, 'mq_node_ready')).toBe(0)
    expect(sampleSum(samples, 'mq_queue_messages')).toBe(0)
    expect(sampleSum(samples, 'mq_partition_messages_total')).toBe(0)
    expect(sampleSum(samples, 'mq_raft_role', { group: '1', role: 'leader' })).toBe(0)
    expect(sampleSum(samples, 'mq_raft_term', { group: '1' })).toBe(3)
  })
})
