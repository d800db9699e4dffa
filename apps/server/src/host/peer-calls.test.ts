import { Server, ServerCredentials } from '@grpc/grpc-js'
import {
  type ImportPartitionRequest,
  type ImportPartitionResponse,
  InvalidArgumentError,
  PeerService,
  unaryHandler,
  NotLeaderError as WireNotLeader,
} from '@mq/protocol'
import { afterAll, describe, expect, it } from 'vitest'
import { AccessControl } from '../auth/access'
import { authInterceptor } from '../auth/auth-interceptor'
import { silentLogger } from '../log'
import { PeerCalls, type UnaryCall } from './peer-calls'

const servers: Server[] = []
afterAll(() => {
  for (const s of servers) s.forceShutdown()
})

/** A Peer server answering ImportPartition with `answer` (only that method), behind `token`. */
async function peer(
  token: string,
  answer: (req: ImportPartitionRequest) => Promise<ImportPartitionResponse>,
): Promise<string> {
  // Behind the node's access control, which checks the peer token of every Peer call.
  const access = new AccessControl({ peerToken: token, tokens: undefined })
  const server = new Server({ interceptors: [authInterceptor(access, silentLogger())] })
  server.addService(PeerService, { importPartition: unaryHandler(answer) } as never)
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) =>
      e ? reject(e) : resolve(p),
    ),
  )
  servers.push(server)
  return `127.0.0.1:${port}`
}

const importCall: UnaryCall<ImportPartitionResponse> = (c, md, opts, cb) =>
  c.peer.importPartition({ groupId: 1, command: new Uint8Array(0) }, md, opts, cb)

describe('PeerCalls', () => {
  it('ends the calls under way at close, and makes none after it (a stopping node waited for a peer that does not answer)', async () => {
    // A peer that takes the call and never answers (paused, say).
    const silent = await peer('', () => new Promise<ImportPartitionResponse>(() => {}))
    const calls = new PeerCalls('')
    const startedMs = Date.now()
    const pending = calls.call(silent, importCall, 30_000)
    const outcome = pending.then(
      () => 'answered',
      (e: { code?: string; retriable?: boolean }) => e,
    )
    await new Promise((resolve) => setTimeout(resolve, 200)) // the call is out
    calls.close()
    // It waited for its 30-s deadline: the stopping node's process lived on until then.
    expect(await outcome).toMatchObject({ code: 'UNAVAILABLE', retriable: true })
    expect(Date.now() - startedMs).toBeLessThan(5_000)
    await expect(calls.call(silent, importCall, 30_000)).rejects.toMatchObject({ code: 'UNAVAILABLE' })
  })

  it('follows a NOT_LEADER hint to the leader of a group, with the peer token', async () => {
    const leader = await peer('secret', async () => ({ complete: true }))
    const follower = await peer('secret', async () => {
      throw new WireNotLeader('not the leader', { leaderId: 'b', leaderAddress: leader, groupId: 1 })
    })
    const calls = new PeerCalls('secret')
    const r = await calls.callLeader([{ nodeId: 'a', address: follower }], importCall, 2_000)
    expect(r).toEqual({ complete: true })
    calls.close()
  })

  it('tries the other replicas when one is down, and stops at a non-retriable error', async () => {
    const refusing = await peer('', async () => {
      throw new InvalidArgumentError('bad chunk')
    })
    const calls = new PeerCalls('')
    await expect(
      calls.callLeader(
        [
          { nodeId: 'down', address: '127.0.0.1:1' },
          { nodeId: 'b', address: refusing },
        ],
        importCall,
        2_000,
      ),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/bad chunk/) })
    calls.close()
  })

  it('gives up after a bounded number of attempts with the last error', async () => {
    const calls = new PeerCalls('')
    await expect(
      calls.callLeader([{ nodeId: 'down', address: '127.0.0.1:1' }], importCall, 1_000, { attemptsMax: 3 }),
    ).rejects.toMatchObject({ retriable: true })
    calls.close()
  })

  it('sends no more calls once the request is no longer wanted', async () => {
    let answered = 0
    const leader = await peer('', async () => {
      answered++
      return { complete: true }
    })
    const calls = new PeerCalls('')
    const replicas = [
      { nodeId: 'down', address: '127.0.0.1:1' },
      { nodeId: 'b', address: leader },
    ]
    // Wanted: the second replica answers after the first is found down.
    await expect(calls.callLeader(replicas, importCall, 1_000, { stillWanted: () => true })).resolves.toEqual(
      {
        complete: true,
      },
    )
    // Abandoned after the first call failed: the leader is never called, the error is the first's.
    let asked = 0
    await expect(
      calls.callLeader(replicas, importCall, 1_000, { stillWanted: () => ++asked < 1 }),
    ).rejects.toMatchObject({ code: 'UNAVAILABLE' })
    expect({ answered, asked }).toEqual({ answered: 1, asked: 1 })
    calls.close()
  })

  it('is refused without the right peer token', async () => {
    const guarded = await peer('secret', async () => ({ complete: true }))
    const calls = new PeerCalls('wrong')
    await expect(calls.call(guarded, importCall, 2_000)).rejects.toMatchObject({
      message: expect.stringMatching(/peer token/),
    })
    calls.close()
  })
})
