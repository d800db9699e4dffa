import { MqClient } from '@mq/router-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LocalCluster } from '../src/cluster'
import { runBuilt } from '../src/run-built'

/** Runs `mq …` (the built apps/cli/dist/main.js) and resolves with its exit code and output. */
function mq(
  args: readonly string[],
  stdin?: string,
): Promise<{ code: number | null; out: string; err: string }> {
  return runBuilt('cli', args, stdin === undefined ? {} : { stdin })
}

// The mq command line against a real cluster.
describe('mq against a real cluster', () => {
  let cluster: LocalCluster
  let servers: string

  beforeAll(async () => {
    cluster = await LocalCluster.start({ nodes: 3 })
    servers = cluster.servers.join(',')
  })

  afterAll(async () => {
    await cluster?.stop()
  })

  it('creates a queue, produces from arguments and stdin, consumes as JSON, and reports status', async () => {
    const created = await mq([
      '--servers',
      servers,
      '--timeout',
      '30s',
      'queue',
      'create',
      'cli',
      '--partitions',
      '1',
    ])
    expect(created.err).toBe('')
    expect(created.code).toBe(0)
    expect((await mq(['--servers', servers, 'produce', 'cli', 'hello', '--weight', '7'])).code).toBe(0)
    expect((await mq(['--servers', servers, 'produce', 'cli'], 'one\ntwo\n')).code).toBe(0)
    // A peek lists them, heaviest weight first, without delivering them.
    const peeked = await mq(['--servers', servers, '--json', 'queue', 'peek', 'cli'])
    expect(peeked.code).toBe(0)
    const seen = peeked.out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { body: string; weight: number; deliveryCount: number })
    expect(seen.map((m) => [m.body, m.weight, m.deliveryCount])).toEqual([
      ['hello', 7, 0],
      ['one', 1, 0],
      ['two', 1, 0],
    ])
    const consumed = await mq([
      '--servers',
      servers,
      '--json',
      'consume',
      'cli',
      '--max',
      '3',
      '--wait',
      '3s',
    ])
    expect(consumed.code).toBe(0)
    const bodies = consumed.out
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { body: string }).body)
    expect(bodies.sort()).toEqual(['hello', 'one', 'two'])
    const deliveries = consumed.out
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { deliveryCount: number }).deliveryCount)
    expect(deliveries).toEqual([1, 1, 1]) // the peek delivered nothing
    const status = await mq(['--servers', servers, 'cluster', 'status'])
    expect(status.code).toBe(0)
    expect(status.out).toMatch(/meta leader:\s+n[123]/)
    const described = await mq(['--servers', servers, 'queue', 'describe', 'cli'])
    expect(described.code).toBe(0)
    expect(described.out).toMatch(/cli/)
    expect((await mq(['--servers', servers, 'produce', 'cli'], 'p1\np2\np3\n')).code).toBe(0)
    const purged = await mq(['--servers', servers, '--json', 'queue', 'purge', 'cli'])
    expect(purged.code).toBe(0)
    expect(JSON.parse(purged.out)).toEqual({ queue: 'cli', purged: 3 })
    // Nothing left to consume: exit 0 saying so (not a failed call, whose output is empty too).
    const empty = await mq(['--servers', servers, 'consume', 'cli', '--wait', '500ms'])
    expect(empty.code, empty.err).toBe(0)
    expect(empty.err).toMatch(/no message in cli within/)
    expect(empty.out).not.toMatch(/p1|p2|p3/)
  })

  it('gives --no-ack messages back uncounted; lists, redrives and purges dead letters; sets a retry backoff', async () => {
    const run = (...args: string[]) => mq(['--servers', servers, '--timeout', '30s', ...args])
    const created = await run('queue', 'create', 'dead', '--partitions', '1', '--max-deliveries', '1')
    expect(created.err).toBe('')
    expect((await run('produce', 'dead', 'x', '--count', '3')).code).toBe(0)
    // Given back unacked at exit, not as failed deliveries: with one delivery allowed, none dies.
    expect((await run('consume', 'dead', '--no-ack', '--max', '3', '--wait', '3s')).code).toBe(0)
    const peeked = await run('--json', 'queue', 'peek', 'dead')
    expect(peeked.out.trim().split('\n')).toHaveLength(3)
    // Failed deliveries (an SDK consumer's nacks) past their one delivery: dead.
    const client = await MqClient.connect({ servers: servers.split(','), deadlineMs: 30_000 })
    const failAll = async () => {
      const consumer = client.consumer('dead', { prefetch: 3 })
      let failed = 0
      for await (const d of consumer) {
        await d.nack()
        if (++failed === 3) break
      }
      await consumer.close()
    }
    await failAll()
    const listed = await run('--json', 'queue', 'dlq', 'dead')
    expect(listed.code).toBe(0)
    expect(listed.out.trim().split('\n')).toHaveLength(3)
    // More than one entry may take: the server redrives in batches of 1,000.
    const redriven = await run('--json', 'queue', 'dlq', 'dead', '--redrive', '5000')
    expect(redriven.err).toBe('')
    expect(JSON.parse(redriven.out)).toMatchObject({ redriven: 3 })
    await failAll()
    await client.close()
    const purged = await run('--json', 'queue', 'dlq', 'dead', '--purge')
    expect(purged.err).toBe('')
    expect(JSON.parse(purged.out)).toMatchObject({ purged: 3 })
    const backoff = await run('queue', 'update', 'dead', '--retry-backoff', '2s', '--retry-backoff-max', '1m')
    expect(backoff.err).toBe('')
    expect((await run('queue', 'describe', 'dead', '--no-stats')).out).toMatch(
      /retry backoff: +2s doubling up to 1m/,
    )
  })

  it('exits 2 for an unknown queue and 1 for a bad name, saying why', async () => {
    const missing = await mq(['--servers', servers, 'produce', 'nope', 'x'])
    expect(missing.code).toBe(2)
    expect(missing.err).toMatch(/nope/)
    const bad = await mq(['--servers', servers, 'queue', 'create', 'bad name'])
    expect(bad.code).toBe(1)
    expect(bad.err).toMatch(/may hold only/)
  })

  // `mq consume` (one message) acked it with the next lease (the SDK carries acks on leases),
  // which leased the next message, given back at exit: a delivery counted on a message mq
  // never printed, so the next consumer saw it as redelivered (deliveries=2). `queue move
  // --max` likewise.
  it('consume and queue move --max take their messages without leasing the next', async () => {
    const run = (...args: string[]) => mq(['--servers', servers, '--timeout', '30s', ...args])
    expect((await run('queue', 'create', 'one-by-one', '--partitions', '1')).code).toBe(0)
    expect((await run('queue', 'create', 'one-by-one-to', '--partitions', '1')).code).toBe(0)
    expect((await mq(['--servers', servers, 'produce', 'one-by-one'], 'a\nb\nc\nd\n')).code).toBe(0)
    for (const body of ['a', 'b']) {
      const taken = await run('--json', 'consume', 'one-by-one', '--wait', '3s')
      expect(taken.code).toBe(0)
      expect(JSON.parse(taken.out)).toMatchObject({ body, deliveryCount: 1 })
    }
    const moved = await run('--json', 'queue', 'move', 'one-by-one', '--to', 'one-by-one-to', '--max', '1')
    expect(JSON.parse(moved.out)).toMatchObject({ moved: 1 })
    const peeked = await run('--json', 'queue', 'peek', 'one-by-one')
    expect(
      peeked.out
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { body: string; deliveryCount: number }),
    ).toEqual([expect.objectContaining({ body: 'd', deliveryCount: 0 })])
    // Acked once leasing stopped: none left leased, none leased in vain.
    const described = await run('--json', 'queue', 'describe', 'one-by-one')
    const { stats } = JSON.parse(described.out) as { stats: { counters: object }[] }
    expect(stats.map((p) => p.counters)).toEqual([
      expect.objectContaining({ acked: 3, delivered: 3, nacked: 0 }),
    ])
    // --max 10 of 21: the acks of the first ones lease no more than the ten (each one acked as
    // it came leased one more into the room it freed: 5 of 10 given back, a delivery counted).
    const lines = Array.from({ length: 20 }, (_, i) => `m${i}\n`).join('')
    expect((await mq(['--servers', servers, 'produce', 'one-by-one'], lines)).code).toBe(0)
    const ten = await run('--json', 'consume', 'one-by-one', '--max', '10', '--wait', '3s')
    expect(ten.out.trim().split('\n')).toHaveLength(10)
    const after = JSON.parse((await run('--json', 'queue', 'describe', 'one-by-one')).out) as {
      stats: { counters: object }[]
    }
    expect(after.stats.map((p) => p.counters)).toEqual([
      expect.objectContaining({ acked: 13, delivered: 13, nacked: 0 }),
    ])
  })
})
