import { UnavailableError } from '@mq/router-client'
import { beforeEach, describe, expect, it } from 'vitest'
import { type CliClient, type CliIO, runCli } from '../src/index'
import { FakeCluster } from './fake-cluster'

let cluster: FakeCluster
beforeEach(() => {
  cluster = new FakeCluster()
  cluster.addQueue('jobs')
})

async function mq(argv: string[], options: Parameters<FakeCluster['io']>[0] = {}) {
  const h = cluster.io(options)
  const code = await runCli(argv, h.io, '1.2.3')
  return { code, stdout: h.stdout(), stderr: h.stderr() }
}

/** `h`'s IO with its client changed by `wrap`. */
function wrapped(h: ReturnType<FakeCluster['io']>, wrap: (client: CliClient) => CliClient): CliIO {
  return { ...h.io, connect: async (o) => wrap((await h.io.connect(o)) as CliClient) }
}

/** An IO whose client's deliveries fail to be given back (release rejects: the cluster went away). */
function releaseFailsIO(h: ReturnType<FakeCluster['io']>): CliIO {
  return wrapped(h, (c) => ({
    ...c,
    consumer: (queue, options) => {
      const inner = c.consumer(queue, options)
      return {
        stop: () => inner.stop(),
        close: () => inner.close(),
        async *[Symbol.asyncIterator]() {
          for await (const d of inner) {
            yield {
              ...d,
              ack: () => d.ack(),
              release: async () => {
                throw new UnavailableError('no connection established')
              },
            }
          }
        },
      }
    },
  }))
}

describe('consume: failures said, not hidden', () => {
  it('--no-ack: a give-back that fails is said, with a failing exit code (the messages stay leased until their timeout)', async () => {
    for (const body of ['a', 'b']) cluster.put('jobs', 0, { body })
    const h = cluster.io()
    const code = await runCli(
      ['consume', 'jobs', '--no-ack', '--max', '2', '--wait', '300ms'],
      releaseFailsIO(h),
      '0',
    )
    // Nothing was given back, and mq says so (exit 3: the cluster is unavailable).
    expect(cluster.released).toEqual([])
    expect(cluster.ready('jobs')).toEqual([])
    expect(code).toBe(3)
    expect(h.stderr()).toMatch(/2 of 2 message\(s\) of jobs could not be given back/)
  })

  it('Ctrl-C before any message: does not claim the wait elapsed', async () => {
    const h = cluster.io()
    setTimeout(() => h.interrupt.abort(), 50)
    const started = Date.now()
    const code = await runCli(['consume', 'jobs', '--wait', '5s'], h.io, '0')
    expect(Date.now() - started).toBeLessThan(2_000)
    expect(code).toBe(0)
    expect(h.stderr()).not.toMatch(/no message in jobs within 5s/)
  })
})

describe('produce: a stdin that fails', () => {
  it('a stdin line too long after some lines were sent: says how many were produced', async () => {
    const r = await mq(['produce', 'jobs'], { stdin: ['a\nb\n', 'x'.repeat(16 * 1024 * 1024 + 1)] })
    expect(cluster.ready('jobs')).toHaveLength(2)
    expect(r.code).not.toBe(0)
    expect(r.stderr).toMatch(/2 of 2/)
  })
})

describe('queue dlq: flags that do not go together', () => {
  it('--purge with --limit is refused, not a purge of every dead letter', async () => {
    for (let i = 0; i < 5; i++) cluster.bury('jobs', 0, `d${i}`)
    const r = await mq(['queue', 'dlq', 'jobs', '--purge', '--limit', '1'])
    expect(r.code).toBe(1)
  })
})

describe('node drain: a hint that cannot be read', () => {
  it('a drain accepted by the cluster is not reported as failed when the follow-up status fails', async () => {
    const h = cluster.io()
    const io = wrapped(h, (c) => ({
      ...c,
      admin: {
        ...c.admin,
        clusterStatus: async () => {
          throw new UnavailableError('no connection established')
        },
      },
    }))
    const code = await runCli(['node', 'drain', 'n2', '--timeout', '1s'], io, '0')
    expect(cluster.calls).toContain('drainNode:n2')
    expect({ code, stderr: h.stderr() }).toMatchObject({ code: 0 })
  })
})

describe('queue move: stopped', () => {
  it('stopped by SIGTERM half-way: does not report a normal finish with exit 0', async () => {
    cluster.addQueue('dead')
    for (let i = 0; i < 5; i++) cluster.put('dead', 0, { body: `m${i}` })
    const h = cluster.io()
    const io = wrapped(h, (c) => ({
      ...c,
      producer: (queue) => {
        const p = c.producer(queue)
        let n = 0
        return {
          ...p,
          send: async (m) => {
            if (++n === 2) h.interrupt.abort({ why: 'SIGTERM', exitCode: 143 })
            return p.send(m)
          },
        }
      },
    }))
    const code = await runCli(['queue', 'move', 'dead', '--to', 'jobs', '--max', '5'], io, '0')
    expect(cluster.ready('dead').length).toBeGreaterThan(0) // it did stop early
    expect(code).toBe(143)
    expect(h.stderr()).toMatch(/move from dead to jobs stopped \(SIGTERM\): \d moved/)
    expect(h.stdout()).not.toMatch(/moved \d messages from dead/)
  })
})
