import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { waitServing } from '@mq/protocol'
import { MqClient } from '@mq/router-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { builtMain } from '../src/built'
import { freePort, LocalCluster } from '../src/cluster'
import { consumeAll } from '../src/consume-all'

// A node started with --join becomes part of a running cluster: it registers with the meta
// leader through its heartbeats and is given data-group replicas.
describe('joining a running cluster', () => {
  let cluster: LocalCluster
  let client: MqClient
  let joiner: ChildProcess | undefined
  const dir = mkdtempSync(join(tmpdir(), 'mq-join-'))

  beforeAll(async () => {
    cluster = await LocalCluster.start({ nodes: 3 })
    client = await MqClient.connect({ servers: cluster.servers, deadlineMs: 30_000 })
  })

  afterAll(async () => {
    if (joiner && joiner.exitCode === null && joiner.signalCode === null) {
      const exited = new Promise((r) => joiner?.once('exit', r))
      joiner.kill('SIGTERM')
      await exited
    }
    await client?.close()
    await cluster?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  it('registers, is seen alive, and hosts a replica of a new data group', async () => {
    const address = `127.0.0.1:${await freePort()}`
    joiner = spawn(
      process.execPath,
      [
        builtMain('server'),
        'start',
        '--node-id',
        'n4',
        '--listen',
        address,
        '--data-dir',
        join(dir, 'n4'),
        '--join',
        cluster.servers[0] as string,
        '--tick-ms',
        '20',
      ],
      { stdio: 'ignore' },
    )
    await waitServing(address)
    const deadline = Date.now() + 30_000
    let status = await client.admin.clusterStatus()
    const hostsReplica = () => status.groups.some((g) => g.replicas.some((r) => r.nodeId === 'n4'))
    while (
      Date.now() < deadline &&
      !(status.nodes.some((n) => n.nodeId === 'n4' && n.alive) && hostsReplica())
    ) {
      await new Promise((r) => setTimeout(r, 250))
      status = await client.admin.clusterStatus()
    }
    expect(status.nodes.find((n) => n.nodeId === 'n4')).toMatchObject({ address, alive: true })
    expect(hostsReplica()).toBe(true)
    // Queues created now may land on the new node's group, and work.
    await client.admin.createQueue('after-join', { partitions: 4 })
    const producer = client.producer('after-join')
    const sent = await Promise.all(Array.from({ length: 20 }, (_, i) => producer.send({ body: `j${i}` })))
    expect(new Set(sent.map((r) => `${r.partition}/${r.id}`)).size).toBe(20)
  })

  it('drained, holds nothing and takes no new group; undrained, takes one again', async () => {
    const holds = (status: Awaited<ReturnType<typeof client.admin.clusterStatus>>) =>
      status.groups.some((g) => g.replicas.some((r) => r.nodeId === 'n4'))
    const until = async (
      what: string,
      ok: (s: Awaited<ReturnType<typeof client.admin.clusterStatus>>) => boolean,
    ) => {
      const deadline = Date.now() + 60_000
      let status = await client.admin.clusterStatus()
      while (!ok(status)) {
        if (Date.now() > deadline)
          throw new Error(`not ${what} within 60 s: ${JSON.stringify(status.groups)}`)
        await new Promise((r) => setTimeout(r, 250))
        status = await client.admin.clusterStatus()
      }
      return status
    }
    await client.admin.drainNode('n4')
    let status = await until('drained', (s) => !holds(s))
    expect(status.nodes.find((n) => n.nodeId === 'n4')?.draining).toBe(true)
    const groups = status.groups.filter((g) => g.groupId !== 0).length
    // A new group goes to the three other nodes while n4 drains.
    await client.admin.scaleDataGroups(groups + 1)
    status = await until('grown', (s) => s.groups.filter((g) => g.groupId !== 0).length === groups + 1)
    expect(holds(status)).toBe(false)
    expect(await client.admin.undrainNode('n4')).toBe(true)
    expect(await client.admin.undrainNode('n4')).toBe(false)
    status = await client.admin.clusterStatus()
    expect(status.nodes.find((n) => n.nodeId === 'n4')?.draining).toBe(false)
    // The least loaded node again: the next group has a replica there.
    await client.admin.scaleDataGroups(groups + 2)
    status = await until('given a replica of the new group', holds)
    expect(status.groups.filter((g) => g.groupId !== 0)).toHaveLength(groups + 2)
  })

  it('killed, then drained: its replicas are replaced at once, and removed it is forgotten; nothing is lost', async () => {
    const status = await client.admin.clusterStatus()
    const dataGroups = status.groups.filter((g) => g.groupId !== 0)
    expect(dataGroups.some((g) => g.replicas.some((r) => r.nodeId === 'n4'))).toBe(true)
    // A partition in every group, n4's among them.
    await client.admin.createQueue('on-n4', { partitions: dataGroups.length })
    const producer = client.producer('on-n4')
    await Promise.all(Array.from({ length: 30 }, (_, i) => producer.send({ body: `d${i}` })))
    const exited = new Promise((r) => joiner?.once('exit', r))
    joiner?.kill('SIGKILL')
    await exited
    const killedAt = Date.now()
    // Dead replicas wait --replace-dead-after-ms (300 s here) to be replaced; a drain moves them now.
    await client.admin.drainNode('n4')
    const deadline = killedAt + 90_000
    let held = true
    while (held && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 250))
      // Being added to a group counts: a balance onto n4 may have been under way at the kill.
      held = (await client.admin.clusterStatus()).groups.some(
        (g) => g.replicas.some((r) => r.nodeId === 'n4') || g.change?.add === 'n4',
      )
    }
    expect(held, 'n4 still holds replicas 90 s after its kill').toBe(false)
    // Forgotten once the meta leader counts it dead (5 s of silence): it is refused while alive.
    const removeBy = Date.now() + 30_000
    for (;;) {
      const failure = await client.admin.removeNode('n4').catch((e: Error) => e)
      if (failure === undefined) break
      if (Date.now() > removeBy || !/alive/.test(failure.message)) throw failure
      await new Promise((r) => setTimeout(r, 500))
    }
    expect((await client.admin.clusterStatus()).nodes.map((n) => n.nodeId)).not.toContain('n4')
    const received = await consumeAll(client, 'on-n4', 30, 30_000)
    expect(received.size).toBe(30)
  }, 180_000)
})
