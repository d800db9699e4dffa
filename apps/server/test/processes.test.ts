import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer as createHttpServer } from 'node:http'
import { createServer, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { credentials, Server, ServerCredentials } from '@grpc/grpc-js'
import { removedNodeMessage } from '@mq/meta-service'
import {
  fromGrpcError,
  HeartbeatResponse,
  InvalidArgumentError,
  MetaService,
  type MqError,
  NotLeaderError,
  PeerService,
  ProduceRequest,
  QueueClient,
  UnavailableError,
  unaryHandler,
} from '@mq/protocol'
import { afterAll, describe, expect, it } from 'vitest'
import { httpGet } from './grpc-calls'
import { freePort, singleNodeArgs, startServer, untilOutput, waitServing } from './processes'

const dir = mkdtempSync(join(tmpdir(), 'mq-server-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** `mq-server dev` of `nodes` nodes from `basePort` (HTTP from `httpBasePort`, 0: none), data under `dir/name`. */
function startDev(nodes: number, basePort: number, httpBasePort: number, name: string) {
  return startServer([
    'dev',
    '--nodes',
    String(nodes),
    '--base-port',
    String(basePort),
    '--http-base-port',
    String(httpBasePort),
    '--data-dir',
    join(dir, name),
  ])
}

/** Binds `server` to a free loopback port; resolves with its address. */
function listenLoopback(server: Server): Promise<string> {
  return new Promise((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, port) =>
      e ? reject(e) : resolve(`127.0.0.1:${port}`),
    ),
  )
}

// Real mq-server processes on loopback, each ended by its PID.
/** Starts node `nodeId` (data under `dir/<data>`) joining through `joinAddress`, with `extra` flags. */
async function startJoining(nodeId: string, data: string, joinAddress: string, ...extra: string[]) {
  const address = `127.0.0.1:${await freePort()}`
  const args = ['start', '--node-id', nodeId, '--listen', address, '--data-dir', join(dir, data)]
  return { address, server: startServer([...args, '--join', joinAddress, ...extra]) }
}

describe('mq-server processes', () => {
  it('starts, serves health, and exits 0 on SIGTERM', async () => {
    const port = await freePort()
    const address = `127.0.0.1:${port}`
    const server = startServer(singleNodeArgs('n1', address, dir))
    try {
      await waitServing(address)
    } finally {
      server.child.kill('SIGTERM')
    }
    expect(await server.exited).toEqual({ code: 0, signal: null })
    expect(server.output()).toMatch(/node n1 listening on/)
  }, 60_000)

  it('keeps the meta group its data dir was founded with when --initial-meta names more nodes later', async () => {
    const address = `127.0.0.1:${await freePort()}`
    const first = startServer(singleNodeArgs('f1', address, dir, ['--tick-ms', '20']))
    try {
      await untilOutput(first, /group 0: leader f1/)
    } finally {
      first.child.kill('SIGTERM')
    }
    expect((await first.exited).code).toBe(0)
    // Started again naming a founder that never ran: counted, {f1, f2} would have no majority.
    const founders = `f1=${address},f2=127.0.0.1:${await freePort()}`
    const again = startServer(
      singleNodeArgs('f1', address, dir, ['--tick-ms', '20', '--initial-meta', founders]),
    )
    try {
      await untilOutput(again, /group 0: leader f1/)
      expect(again.output()).toMatch(
        /--initial-meta names f1, f2, but the meta group this data dir holds was founded by f1: those are kept/,
      )
    } finally {
      again.child.kill('SIGTERM')
    }
    expect((await again.exited).code).toBe(0)
  }, 90_000)

  it('refuses --initial-meta on the data dir of a node that joined a cluster, founding no second cluster', async () => {
    const address = `127.0.0.1:${await freePort()}`
    const founder = startServer(singleNodeArgs('s1', address, dir, ['--tick-ms', '20']))
    let joined: Awaited<ReturnType<typeof startJoining>> | undefined
    try {
      await untilOutput(founder, /group 0: leader s1/)
      joined = await startJoining('s2', 's2', address, '--tick-ms', '20')
      // The meta leader accepted it: it gave it a data group.
      await untilOutput(joined.server, /node s2 hosts a replica of data group/)
    } finally {
      founder.child.kill('SIGTERM')
      joined?.server.child.kill('SIGTERM')
    }
    expect((await founder.exited).code).toBe(0)
    expect((await joined.server.exited).code).toBe(0)
    // Its cluster down, started again with an --initial-meta naming itself: it founded a meta
    // group of its own on that data dir, led it and took queues there, beside its cluster's.
    const again = startServer([
      'start',
      '--node-id',
      's2',
      '--listen',
      joined.address,
      '--data-dir',
      join(dir, 's2'),
      '--initial-meta',
      `s2=${joined.address}`,
      '--tick-ms',
      '20',
    ])
    const ended = await Promise.race([
      again.exited,
      new Promise<undefined>((r) => setTimeout(() => r(undefined), 20_000)),
    ])
    again.child.kill('SIGKILL')
    await again.exited
    expect(again.output()).not.toMatch(/group 0: leader s2/)
    expect(ended?.code).toBe(1)
    expect(again.stderr()).toMatch(
      /^mq-server: data dir .*s2: it joined a cluster through 127\.0\.0\.1:\d+; --initial-meta founds a new one/m,
    )
  }, 90_000)

  it('resumes from its data dir alone; with neither --initial-meta nor --join a new data dir exits 1', async () => {
    const address = `127.0.0.1:${await freePort()}`
    const bare = (nodeId: string, data: string) => [
      'start',
      '--node-id',
      nodeId,
      '--listen',
      address,
      '--data-dir',
      join(dir, data),
      '--tick-ms',
      '20',
    ]
    const never = startServer(bare('d9', 'never-started'))
    expect((await never.exited).code).toBe(1)
    expect(never.stderr()).toMatch(
      /^mq-server: data dir .*never-started: it records no cluster to resume .*: give --initial-meta to bootstrap a cluster or --join ADDRESS to join one/m,
    )
    expect(existsSync(join(dir, 'never-started'))).toBe(false) // nothing made for a mistyped path
    const first = startServer(singleNodeArgs('d1', address, dir, ['--tick-ms', '20']))
    try {
      await untilOutput(first, /group 0: leader d1/)
    } finally {
      first.child.kill('SIGTERM')
    }
    expect((await first.exited).code).toBe(0)
    const again = startServer(bare('d1', 'd1'))
    try {
      await waitServing(address)
      await untilOutput(again, /group 0: leader d1/)
      expect(again.output()).toMatch(
        /node d1 resumes the cluster founded by d1=127\.0\.0\.1:\d+ \(kept in its data dir\)/,
      )
    } finally {
      again.child.kill('SIGTERM')
    }
    expect((await again.exited).code).toBe(0)
  }, 90_000)

  it('exits 2 and names the problem on a bad config', async () => {
    const server = startServer(['start', '--node-id', 'n1', '--listen', '127.0.0.1:99999', '--data-dir', dir])
    expect((await server.exited).code).toBe(2)
    expect(server.output()).toMatch(
      /--listen \(config file: "listen"\): address "127.0.0.1:99999" is not host:port/,
    )
  }, 60_000)

  it('exits 0 without a stack trace when the reader of its help leaves (`--help | head -1`)', async () => {
    const server = startServer(['start', '--help'])
    // The pipe's reader is gone before the help is written: the write fails with EPIPE.
    server.child.stdout?.destroy()
    expect((await server.exited).code).toBe(0)
    expect(server.stderr()).not.toMatch(/EPIPE|Unhandled/)
  }, 60_000)

  it('exits 1 with one plain line on stderr when the data dir is a file', async () => {
    const file = join(dir, 'a-file')
    writeFileSync(file, 'x')
    const server = startServer(singleNodeArgs('f1', `127.0.0.1:${await freePort()}`, file))
    expect((await server.exited).code).toBe(1)
    expect(server.stderr()).toMatch(
      /^mq-server: data dir .*a-file\/f1 is not a directory \(a file, or under one\)/m,
    )
  }, 60_000)

  it('warns when no meta leader answers its heartbeats (a --join address nobody serves)', async () => {
    const nowhere = `127.0.0.1:${await freePort()}`
    const { server } = await startJoining('j1', 'j1', nowhere)
    try {
      await untilOutput(
        server,
        /no meta leader has answered node j1's heartbeats for \d+ s .*check the --join or --initial-meta addresses/,
        250,
      )
    } finally {
      server.child.kill('SIGTERM')
      await server.exited
    }
  }, 60_000)

  it('warns when its --advertise reaches another node, or nothing', async () => {
    const address = `127.0.0.1:${await freePort()}`
    const other = startServer(singleNodeArgs('a1', address, dir))
    const nowhere = `127.0.0.1:${await freePort()}`
    try {
      await waitServing(address)
      const wrong = await startJoining('a2', 'a2', address, '--advertise', address)
      const unreachable = await startJoining('a3', 'a3', address, '--advertise', nowhere)
      try {
        await untilOutput(wrong.server, /--advertise 127\.0\.0\.1:\d+ reaches node a1, not node a2/, 250)
        await untilOutput(
          unreachable.server,
          /node a3 cannot reach its own --advertise 127\.0\.0\.1:\d+ \(.*\): the cluster gives that address/,
          250,
        )
        // Its own address: no such warning.
        expect(other.output()).not.toMatch(/--advertise/)
      } finally {
        for (const s of [wrong.server, unreachable.server]) s.child.kill('SIGTERM')
        await Promise.all([wrong.server.exited, unreachable.server.exited])
      }
    } finally {
      other.child.kill('SIGTERM')
      await other.exited
    }
  }, 60_000)

  it('exits at once on SIGTERM while its --advertise check still probes', async () => {
    // --advertise reaches a listener that never answers: each probe waits out its deadline, so
    // the check runs for seconds after the node serves.
    const sockets: Socket[] = []
    const silent = createServer((socket) => {
      sockets.push(socket)
    })
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
    const silentAddress = `127.0.0.1:${(silent.address() as { port: number }).port}`
    const address = `127.0.0.1:${await freePort()}`
    const leader = startServer(singleNodeArgs('w1', address, dir))
    try {
      await waitServing(address)
      // A joining node leads no group: its stop hands nothing over.
      const { server } = await startJoining('w2', 'w2', address, '--advertise', silentAddress)
      try {
        await untilOutput(server, /node w2 listening on/, 20)
        const signalledMs = Date.now()
        server.child.kill('SIGTERM')
        expect(await server.exited).toEqual({ code: 0, signal: null })
        // Before, the check went on probing after the stop (a client opened after the node's
        // were closed, a second between tries) and the process exited 3 to 4 s later.
        expect(Date.now() - signalledMs).toBeLessThan(1_500)
        expect(server.output()).not.toMatch(/cannot reach its own --advertise/)
      } finally {
        server.child.kill('SIGKILL')
      }
    } finally {
      leader.child.kill('SIGTERM')
      await leader.exited
      for (const s of sockets) s.destroy()
      await new Promise((resolve) => silent.close(resolve))
    }
  }, 60_000)

  it("says a --join address that answers, but not in gRPC, may be a node's HTTP port", async () => {
    const http1 = createHttpServer((_req, res) => res.end('ok'))
    await new Promise<void>((resolve) => http1.listen(0, '127.0.0.1', resolve))
    const { port } = http1.address() as { port: number }
    const { server } = await startJoining('j2', 'j2', `127.0.0.1:${port}`)
    try {
      await untilOutput(
        server,
        /no meta leader has answered node j2's heartbeats .*Protocol error.*: the address answers, but not in gRPC: is it a node's HTTP port \(--http-listen\)/,
        250,
      )
    } finally {
      server.child.kill('SIGTERM')
      await server.exited
      http1.closeAllConnections()
      await new Promise<void>((resolve) => http1.close(() => resolve()))
    }
  }, 60_000)

  it("answers a data request whose route lookup the meta group redirected UNAVAILABLE, not with the meta group's NOT_LEADER", async () => {
    // A meta member that no longer leads the meta group: it names the new meta leader, m2.
    const metaLeader = `127.0.0.1:${await freePort()}`
    const stale = new Server()
    stale.addService(MetaService, {
      getRoutes: unaryHandler(async () => {
        throw new NotLeaderError(`not the meta leader; it is m2 at ${metaLeader}`, {
          leaderId: 'm2',
          leaderAddress: metaLeader,
          groupId: 0,
        })
      }),
    })
    const { address, server } = await startJoining('r1', 'r1', await listenLoopback(stale))
    const client = new QueueClient(address, credentials.createInsecure())
    try {
      await waitServing(address)
      const target = { queue: 'jobs', partition: 0, routeEpoch: 0 }
      const messages = [{ body: Buffer.from('m'), weight: 1 }]
      const error = await new Promise<MqError | undefined>((resolve) =>
        client.produce(ProduceRequest.fromPartial({ target, messages }), (e) =>
          resolve(e ? fromGrpcError(e) : undefined),
        ),
      )
      // The hint names the meta leader, which is no leader of the partition's group: a client
      // followed it there (and took it for the partition's leader) instead of retrying.
      expect(error).not.toBeInstanceOf(NotLeaderError)
      expect(error).toBeInstanceOf(UnavailableError)
      expect(error?.retriable).toBe(true)
      expect(error?.message).toMatch(/route of jobs.*meta/)
    } finally {
      client.close()
      server.child.kill('SIGTERM')
      await server.exited
      stale.forceShutdown()
    }
  }, 60_000)

  it('exits 1 when the cluster removes the node while it stops on SIGTERM', async () => {
    // A stand-in meta leader: it gives r1 a data group of its own (so that r1's stop waits,
    // with heartbeats still going, for a leadership transfer it cannot make), then, once r1
    // stops, answers its heartbeats that the cluster removed it.
    let removed = false
    const meta = new Server()
    meta.addService(PeerService, {
      heartbeat: unaryHandler(async () => {
        if (removed) throw new InvalidArgumentError(removedNodeMessage('r1'))
        return HeartbeatResponse.fromPartial({
          metaLeaderId: 'm1',
          groups: [{ groupId: 1, replicas: ['r1'] }],
        })
      }),
    })
    const { server } = await startJoining('r1', 'removed', await listenLoopback(meta), '--tick-ms', '20')
    try {
      await untilOutput(server, /group 1: leader r1/)
      removed = true
      server.child.kill('SIGTERM')
      const exited = await server.exited
      // It heard that the cluster removed it (mq node remove), and said so.
      expect(server.output()).toMatch(/node r1 was removed from the cluster.*; it stops/)
      // In one fatal line, not followed by a second, generic one.
      expect(server.output().match(/"level":"fatal"|level=fatal|\bfatal\b.*mq-server:/g)?.length).toBe(1)
      expect(exited).toEqual({ code: 1, signal: null })
    } finally {
      server.child.kill('SIGKILL')
      meta.forceShutdown()
    }
  }, 60_000)

  it('logs the removal of a data group the cluster removed as a JSON line, as every event', async () => {
    // A stand-in meta leader: it gives r2 a data group of its own, then removes it.
    let removed = false
    const meta = new Server()
    meta.addService(PeerService, {
      heartbeat: unaryHandler(async () =>
        HeartbeatResponse.fromPartial({
          metaLeaderId: 'm1',
          ...(removed ? { removedGroupIds: [1] } : { groups: [{ groupId: 1, replicas: ['r2'] }] }),
        }),
      ),
    })
    const { server } = await startJoining(
      'r2',
      'group-removed',
      await listenLoopback(meta),
      '--tick-ms',
      '20',
    )
    try {
      await untilOutput(server, /hosts a replica of data group 1/)
      removed = true
      await untilOutput(server, /removed data group 1 and its storage/)
      const line = server
        .output()
        .split('\n')
        .find((l) => l.includes('removed data group 1 and its storage')) as string
      expect(JSON.parse(line)).toMatchObject({ level: 'info', node: 'r2', group: 1 })
    } finally {
      server.child.kill('SIGTERM')
      await server.exited
      meta.forceShutdown()
    }
  }, 60_000)

  it('exits 1 and names the address when the port is taken', async () => {
    const port = await freePort()
    const address = `127.0.0.1:${port}`
    const args = (id: string) => singleNodeArgs(id, address, dir)
    const first = startServer(args('a'))
    try {
      await waitServing(address)
      const second = startServer(args('b'))
      expect((await second.exited).code).toBe(1)
      expect(second.output()).toMatch(new RegExp(`cannot listen on ${address}`))
    } finally {
      first.child.kill('SIGTERM')
      await first.exited
    }
  }, 60_000)

  it('exits 1 naming the HTTP address when --http-listen is taken, before serving gRPC', async () => {
    const taken = createServer()
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve))
    const httpAddress = `127.0.0.1:${(taken.address() as { port: number }).port}`
    try {
      const address = `127.0.0.1:${await freePort()}`
      const server = startServer(singleNodeArgs('h1', address, dir, ['--http-listen', httpAddress]))
      expect((await server.exited).code).toBe(1)
      expect(server.output()).toMatch(new RegExp(`cannot listen on ${httpAddress} \\(http\\)`))
    } finally {
      taken.close()
    }
  }, 60_000)

  it('runs a dev cluster of separate processes and stops them all', async () => {
    const base = await freePort()
    const httpBase = await freePort()
    const dev = startDev(2, base, httpBase, 'dev')
    try {
      await Promise.all([waitServing(`127.0.0.1:${base}`), waitServing(`127.0.0.1:${base + 1}`)])
      expect(await httpGet(`http://127.0.0.1:${httpBase + 1}/healthz`)).toEqual({ status: 200, body: 'ok\n' })
    } finally {
      dev.child.kill('SIGTERM')
    }
    expect((await dev.exited).code).toBe(0)
    // Readable lines in dev: time, level, message (not JSON).
    expect(dev.output()).toMatch(/\[n1\] \[[0-9:.]+\] INFO: mq-server: node n1 listening/)
    expect(dev.output()).toMatch(/\[n2\] .*INFO.*mq-server: node n2 stopping/)
  }, 60_000)

  it('leaves no node running when mq-server dev is killed outright (SIGKILL)', async () => {
    const base = await freePort()
    const dev = startDev(2, base, 0, 'dev-kill')
    await Promise.all([waitServing(`127.0.0.1:${base}`), waitServing(`127.0.0.1:${base + 1}`)])
    const pids = [...dev.output().matchAll(/n\d 127\.0\.0\.1:\d+ pid (\d+)/g)].map((m) => Number(m[1]))
    expect(pids).toHaveLength(2)
    try {
      dev.child.kill('SIGKILL')
      await dev.exited
      // No handler ran in dev: each node saw its IPC channel close and stopped itself.
      const deadline = Date.now() + 30_000
      while (pids.some(running) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100))
      expect(pids.filter(running)).toEqual([])
    } finally {
      for (const pid of pids.filter(running)) process.kill(pid, 'SIGKILL')
    }
    // They stopped cleanly enough to start again on the same data (ports and locks free).
    const again = startDev(2, base, 0, 'dev-kill')
    try {
      await Promise.all([waitServing(`127.0.0.1:${base}`), waitServing(`127.0.0.1:${base + 1}`)])
    } finally {
      again.child.kill('SIGTERM')
    }
    expect((await again.exited).code).toBe(0)
  }, 90_000)

  it('stops the whole dev cluster when one node fails, and on SIGHUP', async () => {
    const base = await freePort()
    // n2's port is taken: n2 fails at start, and n1 must not be left running.
    const taken = createServer().listen(base + 1, '127.0.0.1')
    await new Promise((r) => taken.once('listening', r))
    try {
      const dev = startDev(2, base, 0, 'dev-fail')
      // dev returns once every node exited: n1 too (stopped, or ended while it was starting).
      expect((await dev.exited).code).not.toBe(0)
      expect(dev.output()).toMatch(/\[n2\] .*EADDRINUSE/)
    } finally {
      taken.close()
    }
    const hupBase = await freePort()
    const hup = startDev(1, hupBase, 0, 'dev-hup')
    try {
      await waitServing(`127.0.0.1:${hupBase}`)
    } finally {
      hup.child.kill('SIGHUP')
    }
    expect((await hup.exited).code).toBe(0)
    expect(hup.output()).toMatch(/\[n1\] .*mq-server: node n1 stopping/)
  }, 60_000)
})

/** Whether `pid` is a live process (an exited one not yet reaped, a zombie, is not). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  try {
    // The state field follows the parenthesised command name.
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0] !== 'Z'
  } catch {
    return false
  }
}
