import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { credentials } from '@grpc/grpc-js'
import {
  type ChangeReplicasResponse,
  freePort,
  type GetRoutesResponse,
  MetaClient,
  PeerClient,
  waitServing,
} from '@mq/protocol'
import { afterAll, describe, expect, it } from 'vitest'
import { call, callUntilOk } from './grpc-calls'
import { type ServerProcess, singleNodeArgs, startServer } from './processes'

const dir = mkdtempSync(join(tmpdir(), 'mq-step-fence-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

async function stop(server: ServerProcess): Promise<void> {
  server.child.kill('SIGTERM')
  await server.exited
}

// A real mq-server process; its meta group's term grows with each restart (a new election).
describe('replica change steps of a deposed meta leader', () => {
  it('are refused by a group leader that took no step yet (just restarted), and so are forged terms: it asks the meta group its term', async () => {
    const address = `127.0.0.1:${await freePort()}`
    const args = singleNodeArgs('n1', address, dir)
    const metaTerm = async (): Promise<number> => {
      const meta = new MetaClient(address, credentials.createInsecure())
      try {
        const r = await callUntilOk(() => call(meta, meta.getRoutes, { queues: [''] }))
        expect(r.ok).toBe(true)
        return (r as { response: GetRoutesResponse }).response.metaTerm
      } finally {
        meta.close()
      }
    }
    let server = startServer(args)
    let before: number
    try {
      await waitServing(address)
      before = await metaTerm()
      expect(before).toBeGreaterThan(0)
    } finally {
      await stop(server)
    }
    server = startServer(args)
    const peer = new PeerClient(address, credentials.createInsecure())
    try {
      await waitServing(address)
      const now = await metaTerm()
      expect(now).toBeGreaterThan(before)
      // Sent again only while the restarted node's group 1 has no leader yet, or its meta read
      // did not answer (a loaded machine).
      const step = async (term: number) => {
        const deadline = Date.now() + 20_000
        for (;;) {
          const outcome = await call(peer, peer.changeReplicas, {
            groupId: 1,
            add: 'n1',
            remove: '',
            addCaughtUp: false,
            removeFirst: false,
            replicas: ['n1'],
            metaTerm: term,
            away: [],
          })
          const settled =
            outcome.ok ||
            !/no leader|not the leader|no replica|starting|could not ask the meta group/.test(outcome.details)
          if (settled || Date.now() > deadline) return outcome
          await new Promise((r) => setTimeout(r, 100))
        }
      }
      // The step of the term before the restart: its leader is deposed; the fence had no term
      // of group 1 (in memory), so only the meta group's answer tells.
      const late = await step(before)
      expect(late.ok).toBe(false)
      expect(late.ok ? '' : late.details).toMatch(
        new RegExp(
          `a replica change step of group 1 from meta term ${before}, below the meta group's term ${now}: a deposed meta leader's, ignored`,
        ),
      )
      // The current leader's step is taken (n1 is the group's voter already: nothing to do).
      const current = await step(now)
      expect(current).toMatchObject({ ok: true, response: { done: true } as Partial<ChangeReplicasResponse> })
      // The refused step's term stays refused.
      expect((await step(before)).ok).toBe(false)
      // A term no meta leader had (forged by a peer-secret holder) is refused and does not fence
      // the real leader's steps out.
      const forged = await step(now + 1_000)
      expect(forged.ok ? '' : forged.details).toMatch(
        new RegExp(
          `from meta term ${now + 1_000}, above the meta group's term ${now}: no meta leader sent it`,
        ),
      )
      expect(await step(now)).toMatchObject({ ok: true })
      // Another peer call on the same node: a fence of partitions no queue has is refused whole.
      const fence = await call(peer, peer.fencePartitions, {
        groupId: 1,
        storedAs: 'q#1',
        partitions: [0, 999],
      })
      expect(fence).toMatchObject({ ok: false, code: 3 })
      expect(fence.ok ? '' : fence.details).toBe('partition 999 of q#1 is outside 0-255: nothing fenced')
      expect(server.output()).not.toMatch(/"level":(50|60)/)
    } finally {
      peer.close()
      await stop(server)
    }
  }, 90_000)
})
