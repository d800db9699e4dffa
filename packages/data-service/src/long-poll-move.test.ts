import { EventEmitter } from 'node:events'
import { MemoryEngine } from '@mq/kv-storage'
import { describe, expect, it } from 'vitest'
import { encodeDataCommand } from './data-command'
import { DataGroupMachine } from './data-group'
import { type DataGroupPort, type DataNodePort, queueHandlers } from './queue-handlers'

async function group(id: number): Promise<DataGroupPort> {
  const engine = new MemoryEngine()
  const machine = await DataGroupMachine.open(id, engine)
  const port: DataGroupPort = {
    groupId: id,
    machine,
    nowMs: () => 1_000,
    assertLeader: () => id,
    propose: async (command) => {
      const applied = await machine.apply(encodeDataCommand(command), 1_000)
      await engine.write(applied.ops, { sync: false })
      applied.written()
      return applied.result
    },
    settled: async () => {},
  } as DataGroupPort
  await port.propose({ type: 'open', queue: 'jobs', partition: 0, config: { messageBytesMax: 100 } } as never)
  return port
}
const CONFIG = {
  partitions: 1,
  visibilityTimeoutMs: 30_000,
  maxDeliveries: 5,
  deadLetterQueue: '',
  messageBytesMax: 150,
  queueLengthMax: 1000,
  strictPriority: false,
  dedupWindowMs: 0,
  engine: 'leveldb',
  messageTtlMs: 0,
  paused: false,
  orderedKeys: false,
  deliveryRate: 0,
  retryBackoffMinMs: 0,
  retryBackoffMaxMs: 0,
}
// biome-ignore lint/suspicious/noExplicitAny: the handlers' grpc-js call shapes, faked
function call(h: any, method: string, request: unknown): Promise<any> {
  const c = Object.assign(new EventEmitter(), { request, cancelled: false })
  return new Promise((resolve, reject) =>
    h[method](c, (e: unknown, r: unknown) => (e ? reject(e) : resolve(r))),
  )
}
const target = { queue: 'jobs', partition: 0, routeEpoch: 4 }
const msg = { body: new TextEncoder().encode('x'), weight: 1, headers: {}, key: '', delayMs: 0, dedupKey: '' }

// A long poll whose partition moved to another group this node also leads (a move between
// groups on one node) takes its place among the new group's polls: that group's writes wake it.
// (Found by the review of 2026-12-02: it stayed among the old group's, woken by the recheck only.)
describe('long poll after its partition moved to another group led by the same node', () => {
  it('is woken by a write to the new group, not only by its recheck', async () => {
    const g1 = await group(1)
    const g2 = await group(2)
    let current = g1
    const node: DataNodePort = {
      formatLevel: () => 2,
      groupFor: async (q, p) =>
        q === 'jobs' && p === 0 ? { group: current, storedAs: 'jobs', config: CONFIG as never } : undefined,
      routeEpoch: () => 4,
    } as DataNodePort
    const RECHECK = 400
    const h = queueHandlers(node, { leaseRecheckMs: RECHECK })
    const polling = call(h, 'lease', {
      target,
      consumerId: 'c',
      max: 10,
      visibilityMs: 5_000,
      waitMs: 10_000,
    })
    await new Promise((r) => setTimeout(r, 50))
    current = g2 // the move completes; the node's route now names group 2
    await new Promise((r) => setTimeout(r, RECHECK + 100)) // the poll's recheck: it now leases from group 2
    const t0 = Date.now()
    await call(h, 'produce', { target, producerId: '', sequence: 0, messages: [msg] })
    const leased = await polling
    const ms = Date.now() - t0
    expect(leased.messages).toHaveLength(1)
    expect(ms).toBeLessThan(RECHECK / 2) // woken by the produce, not at the next recheck
  })
})
