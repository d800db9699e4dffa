import { NotLeaderError, UnavailableError } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { awaitLeader, type Probe } from './silent-leader'

const never = <T>(): Promise<T> => new Promise<T>(() => {})
const o = { silentMs: 20, probeEveryMs: 10 }

function probe<T>(address: string, answer: () => Promise<T>): Probe<T> & { sent: number } {
  const p = {
    address,
    sent: 0,
    send: () => {
      p.sent++
      return answer()
    },
  }
  return p
}

describe('awaitLeader', () => {
  it('returns the leader’s answer and asks nobody when it answers in time', async () => {
    const b = probe('b', () => Promise.resolve('from b'))
    await expect(awaitLeader(Promise.resolve('from a'), 'a', [b], o)).resolves.toBe('from a')
    await expect(awaitLeader(Promise.reject(new UnavailableError('down')), 'a', [b], o)).rejects.toThrow(
      'down',
    )
    expect(b.sent).toBe(0)
  })

  it('asks the other replicas once the leader is silent; a NOT_LEADER naming another leader ends the wait', async () => {
    const same = probe('b', () => Promise.reject(new NotLeaderError('not me', { leaderAddress: 'a' })))
    const moved = probe('c', () => Promise.reject(new NotLeaderError('not me', { leaderAddress: 'b' })))
    const err = await awaitLeader(never<string>(), 'a', [same, moved], o).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(NotLeaderError)
    expect((err as NotLeaderError).facts.leaderAddress).toBe('b')
    expect([same.sent, moved.sent]).toEqual([1, 1])
  })

  it('keeps asking while the replicas still name the silent leader, and takes a replica’s service', async () => {
    let round = 0
    const b = probe('b', () =>
      ++round < 3
        ? Promise.reject(new NotLeaderError('not me', { leaderAddress: 'a' }))
        : Promise.resolve('served by b'),
    )
    const served: string[] = []
    await expect(awaitLeader(never<string>(), 'a', [b], o, (x) => served.push(x))).resolves.toBe(
      'served by b',
    )
    expect(b.sent).toBe(3)
    expect(served).toEqual(['b'])
  })

  it('asks the next replica while a probe hangs, and does not ask that one again meanwhile', async () => {
    // b is silent too: its probe ended only at its deadline (5 s in the router), and c, which
    // leads now, was asked only then (until an audit).
    const hanging = probe('b', () => never<string>())
    const leader = probe('c', () => Promise.resolve('served by c'))
    const served: string[] = []
    const started = Date.now()
    await expect(
      awaitLeader(never<string>(), 'a', [hanging, leader], o, (x) => served.push(x)),
    ).resolves.toBe('served by c')
    expect(Date.now() - started).toBeLessThan(1_000)
    expect([hanging.sent, leader.sent]).toEqual([1, 1])
    expect(served).toEqual(['c'])
  })

  it('awaits the probe of a replica another names as the leader instead of following the name', async () => {
    // c leads and long-polls the probe; b names c. Followed, the caller would send c a second
    // lease beside the probe's, which could lease messages for no one.
    const leader = probe('c', () => new Promise<string>((r) => setTimeout(() => r('served by c'), 100)))
    const follower = probe('b', () => Promise.reject(new NotLeaderError('not me', { leaderAddress: 'c' })))
    await expect(awaitLeader(never<string>(), 'a', [leader, follower], o)).resolves.toBe('served by c')
    expect(leader.sent).toBe(1)
    expect(follower.sent).toBeGreaterThan(0)
  })

  it('a late answer of the leader still wins over a probe that hangs', async () => {
    let answer!: (v: string) => void
    const call = new Promise<string>((r) => {
      answer = r
    })
    const hanging = probe('b', () => never<string>())
    const result = awaitLeader(call, 'a', [hanging], o)
    await new Promise((r) => setTimeout(r, 40))
    expect(hanging.sent).toBe(1)
    answer('from a')
    await expect(result).resolves.toBe('from a')
  })
})
