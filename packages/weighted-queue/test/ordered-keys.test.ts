import type { Engine } from '@mq/kv-storage'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { decodeCommand, encodeCommand } from '../src/codec'
import { QUEUE_CONFIG_DEFAULT } from '../src/config'
import {
  DirectPartition,
  type EnqueueMessage,
  type Lease,
  partitionKeySpan,
  type QueueConfig,
} from '../src/index'
import { KeyTag } from '../src/keys'
import { decodeConfig, decodeMeta, encodeConfig, encodeMeta, MessageState } from '../src/records'
import { ENGINES, leasesOf } from './harness'

const PREFIX = Uint8Array.of(0x43, 0x01)
const text = (s: string) => new TextEncoder().encode(s)
const bodyOf = (l: Lease) => new TextDecoder().decode(l.body)

describe.each(ENGINES)('ordered keys on $name', ({ open }) => {
  let engine: Engine
  let dispose: () => Promise<void>
  beforeEach(async () => {
    ;({ engine, dispose } = await open())
  })
  afterEach(async () => {
    await dispose()
  })

  const queue = (config: Partial<QueueConfig> = {}) =>
    DirectPartition.open(engine, PREFIX, { orderedKeys: 1, ...config })
  const enqueue = (q: DirectPartition, nowMs: number, ...messages: EnqueueMessage[]) =>
    q.apply({ type: 'enqueue', messages }, nowMs)
  const msg = (body: string, key?: string, extra: Partial<EnqueueMessage> = {}): EnqueueMessage => ({
    body: text(body),
    ...(key === undefined ? {} : { key }),
    ...extra,
  })
  const lease = async (q: DirectPartition, nowMs: number, max = 10, visibilityMs = 100) =>
    leasesOf(await q.apply({ type: 'lease', consumerId: 'c1', max, visibilityMs }, nowMs))
  const ack = (q: DirectPartition, nowMs: number, ...ls: Lease[]) =>
    q.apply({ type: 'ack', leaseIds: ls.map((l) => l.leaseId) }, nowMs)
  const tagged = async (tag: number) =>
    (await engine.range(partitionKeySpan(PREFIX))).filter(([k]) => k[PREFIX.length] === tag)

  it('keeps keys whose bytes differ by a leading U+FEFF apart (through the entry codec, which drops one)', async () => {
    const q = await queue()
    const viaLog = (nowMs: number, command: Parameters<DirectPartition['apply']>[0]) =>
      q.apply(decodeCommand(encodeCommand(command)), nowMs)
    // Stored as `abc` and `\uFEFFabc`: their turns were both looked up as `abc`, and the ack of
    // the first threw an invariant violation (the head of a key's line not stored).
    await viaLog(1000, { type: 'enqueue', messages: [msg('a1', 'abc')] })
    await viaLog(1001, { type: 'enqueue', messages: [msg('b1', '\uFEFF\uFEFFabc')] })
    const leased = leasesOf(
      await viaLog(1002, { type: 'lease', consumerId: 'c1', max: 10, visibilityMs: 100 }),
    )
    expect(leased.map(bodyOf)).toEqual(['a1', 'b1']) // two keys: neither waits for the other
    expect(await viaLog(1003, { type: 'ack', leaseIds: leased.map((l) => l.leaseId) })).toMatchObject({
      type: 'ack',
    })
    expect((await q.partition.stats(1003)).messages).toBe(0)
  })

  it("delivers a key's messages one at a time, in order; other keys and keyless ones go on", async () => {
    const q = await queue()
    await enqueue(q, 1000, msg('a1', 'a'), msg('a2', 'a'), msg('b1', 'b'), msg('n1'), msg('a3', 'a'))
    expect((await q.partition.stats(1000)).waiting).toBe(2)
    const first = await lease(q, 1000)
    expect(first.map(bodyOf)).toEqual(['a1', 'b1', 'n1'])
    expect(await lease(q, 1001)).toEqual([]) // a2 waits for a1, whatever the consumer asks
    await ack(q, 1002, first[1] as Lease, first[2] as Lease)
    expect(await lease(q, 1003)).toEqual([])
    await ack(q, 1004, first[0] as Lease)
    const second = await lease(q, 1005)
    expect(second.map(bodyOf)).toEqual(['a2'])
    await ack(q, 1006, ...second)
    expect((await lease(q, 1007)).map(bodyOf)).toEqual(['a3'])
    const stats = await q.partition.stats(1007)
    expect(stats.waiting).toBe(0)
    expect(stats.messages).toBe(1)
  })

  it('keeps the turn through a nack, an expiry and a delay; hands it on at dead-lettering', async () => {
    const q = await queue({ maxDeliveries: 2 })
    await enqueue(q, 1000, msg('x1', 'x'), msg('x2', 'x'))
    const [l1] = await lease(q, 1000)
    await q.apply({ type: 'nack', leaseIds: [(l1 as Lease).leaseId], delayMs: 50 }, 1010)
    expect(await lease(q, 1020)).toEqual([]) // x1 is delayed and still holds the turn
    const [l2] = await lease(q, 1060, 10, 30)
    expect(l2 && bodyOf(l2)).toBe('x1')
    // Its lease expires past maxDeliveries: x1 is dead and x2 gets the turn in the same apply.
    const [l3] = await lease(q, 1100)
    expect(l3 && bodyOf(l3)).toBe('x2')
    expect((await q.partition.listDead(10)).map((d) => new TextDecoder().decode(d.body))).toEqual(['x1'])
    // A redriven message arrives again: behind x2, which still holds the turn.
    await q.apply({ type: 'redriveDead', max: 10 }, 1110)
    expect((await q.partition.stats(1110)).waiting).toBe(1)
    expect(await lease(q, 1111)).toEqual([])
    await ack(q, 1112, l3 as Lease)
    expect((await lease(q, 1113)).map(bodyOf)).toEqual(['x1'])
  })

  it("a waiting message keeps its not-before time for its turn; a TTL'd holder hands it on", async () => {
    const q = await queue({ messageTtlMs: 500 })
    await enqueue(q, 1000, msg('k1', 'k'), msg('k2', 'k', { notBeforeMs: 1300 }))
    const [l1] = await lease(q, 1000)
    await ack(q, 1050, l1 as Lease)
    expect(await lease(q, 1200)).toEqual([]) // k2 holds the turn, delayed until 1300
    expect((await q.partition.stats(1200)).weights[0]).toMatchObject({ delayed: 1, ready: 0 })
    await enqueue(q, 1400, msg('k3', 'k'))
    // k2 becomes ready at 1300 but is never leased; it outlives the TTL (enqueued at 1000).
    await q.apply({ type: 'tick' }, 1600)
    expect((await q.partition.stats(1600)).counters.discarded).toBe(1)
    const [l3] = await lease(q, 1601)
    expect(l3 && bodyOf(l3)).toBe('k3')
  })

  it('deletes a line of outlived messages at the tick that finds its holder outlived (ttlWaiting)', async () => {
    const q = await queue({ messageTtlMs: 1000 })
    const line = Array.from({ length: 50 }, (_, i) => msg(`k${i}`, 'k'))
    await enqueue(q, 1000, ...line)
    await enqueue(q, 1500, msg('young', 'k'), msg('other', 'o'))
    expect((await q.partition.stats(1000)).waiting).toBe(50)
    await q.apply({ type: 'tick', ttlWaiting: true }, 2000)
    const stats = await q.partition.stats(2000)
    expect(stats.counters.discarded).toBe(50)
    expect(stats.waiting).toBe(0)
    // The first one in line not outlived takes the turn, at the tail of its weight.
    expect((await lease(q, 2001)).map(bodyOf)).toEqual(['other', 'young'])
    expect(await tagged(KeyTag.KeyWaiting)).toEqual([])
  })

  it('deletes at most expiryBatchMax outlived messages per tick, down the line included', async () => {
    const q = await queue({ messageTtlMs: 1000, expiryBatchMax: 10 })
    await enqueue(q, 1000, ...Array.from({ length: 50 }, (_, i) => msg(`k${i}`, 'k')))
    for (let t = 1; t <= 5; t++) {
      await q.apply({ type: 'tick', ttlWaiting: true }, 2000 + t)
      const stats = await q.partition.stats(2000 + t)
      expect(stats.counters.discarded).toBe(10 * t)
      // Past the bound the turn goes on as before: to the next in line, outlived or not.
      expect(stats.messages).toBe(50 - 10 * t)
    }
    expect(await tagged(KeyTag.KeyTurn)).toEqual([])
    // Without the flag (ticks written before it existed) a tick hands the turn on as before.
    await enqueue(q, 3000, msg('a', 'k'), msg('b', 'k'), msg('c', 'k'))
    await q.apply({ type: 'tick' }, 4500)
    expect((await q.partition.stats(4500)).messages).toBe(2)
  })

  it('stores the dead count a redrive behind a held turn leaves (a reopen reads it back)', async () => {
    const q = await queue({ maxDeliveries: 1 })
    await enqueue(q, 1000, msg('k1', 'k'))
    await lease(q, 1000, 10, 10)
    await enqueue(q, 1010, msg('k2', 'k')) // k1 dies at 1010 first: k2 takes the free turn
    expect(q.deadCount()).toBe(1)
    await q.apply({ type: 'redriveDead', max: 10 }, 1011) // k1 waits behind k2
    expect(q.deadCount()).toBe(0)
    const reopened = await queue()
    expect(reopened.deadCount()).toBe(0)
    expect(await reopened.stats(1012)).toEqual(await q.stats(1012))
  })

  it('purges waiting messages first, then ready ones; leaves no turn behind', async () => {
    const q = await queue()
    await enqueue(q, 1000, msg('a1', 'a'), msg('a2', 'a'), msg('a3', 'a'), msg('b1', 'b'), msg('b2', 'b'))
    const [held] = await lease(q, 1000, 1)
    expect(held && bodyOf(held)).toBe('a1')
    const r1 = await q.apply({ type: 'purgeReady', max: 2 }, 1001)
    expect(r1).toEqual({ type: 'purgeReady', ids: [2, 3] }) // a2, a3 (key "a" sorts before "b")
    const r2 = await q.apply({ type: 'purgeReady', max: 10 }, 1002)
    expect(r2).toEqual({ type: 'purgeReady', ids: [5, 4] }) // b2 waiting, then b1 ready
    expect(await tagged(KeyTag.KeyWaiting)).toEqual([])
    expect((await tagged(KeyTag.KeyTurn)).length).toBe(1) // "a": a1 is leased
    await ack(q, 1003, held as Lease)
    expect(await tagged(KeyTag.KeyTurn)).toEqual([])
    expect((await q.partition.stats(1003)).messages).toBe(0)
  })

  it('keeps turns and waiting messages across a reopen', async () => {
    let q = await queue()
    await enqueue(q, 1000, msg('a1', 'a'), msg('a2', 'a'), msg('big', 'a', { body: new Uint8Array(3000) }))
    const [l1] = await lease(q, 1000)
    q = await queue()
    await ack(q, 1001, l1 as Lease)
    const [l2] = await lease(q, 1002)
    expect(l2 && bodyOf(l2)).toBe('a2')
    await ack(q, 1003, l2 as Lease)
    const [l3] = await lease(q, 1004)
    expect(l3?.body.length).toBe(3000)
  })

  it('refuses a configure that changes orderedKeys; a partition without it does not order keys', async () => {
    const q = await queue()
    const r = await q.apply({ type: 'configure', config: { orderedKeys: 0 } }, 1000)
    expect(r.type === 'rejected' && r.error.message).toMatch(
      /orderedKeys is set when the partition is created/,
    )
    expect(q.partition.config.orderedKeys).toBe(1)
    const plain = await DirectPartition.open(engine, Uint8Array.of(0x43, 0x02))
    await enqueue(plain, 1000, msg('a1', 'a'), msg('a2', 'a'))
    expect((await lease(plain, 1000)).map(bodyOf)).toEqual(['a1', 'a2'])
  })
})

describe('ordered keys in records', () => {
  it('encodes a config without orderedKeys as before it existed, and reads it back', () => {
    const plain = encodeConfig(QUEUE_CONFIG_DEFAULT)
    const ordered = encodeConfig({ ...QUEUE_CONFIG_DEFAULT, orderedKeys: 1 })
    expect(ordered.length).toBe(plain.length + 2) // messageTtlMs 0, then orderedKeys 1
    expect(decodeConfig(plain)).toEqual(QUEUE_CONFIG_DEFAULT)
    expect(decodeConfig(ordered).orderedKeys).toBe(1)
  })

  it('carries orderedKeys in a configure command only when set', () => {
    const plain = encodeCommand({ type: 'configure', config: { maxDeliveries: 2 } })
    const ordered = encodeCommand({ type: 'configure', config: { maxDeliveries: 2, orderedKeys: 1 } })
    // Unset trailing fields are left out: configVersion and messageTtlMs (a 0 flag each) and
    // orderedKeys (a 1 flag and the varint) are all the set one adds.
    expect(ordered.length - plain.length).toBe(4)
    expect(decodeCommand(plain)).toEqual({ type: 'configure', config: { maxDeliveries: 2 } })
    expect(decodeCommand(ordered)).toEqual({
      type: 'configure',
      config: { maxDeliveries: 2, orderedKeys: 1 },
    })
  })

  it('encodes a message record without an order key as before, and one with it', () => {
    const meta = {
      weight: 3,
      state: MessageState.Waiting,
      deliveries: 0,
      attempts: 0,
      enqueuedAtMs: 5,
      slot: 0,
      band: 0,
      group: 0,
      inlineBody: Uint8Array.of(1, 2, 3),
      orderKey: undefined,
      ttlFromMs: undefined,
    }
    const plain = encodeMeta(meta)
    expect(plain.at(-4)).toBe(1) // the inline flag of before
    expect(decodeMeta(plain)).toEqual(meta)
    const keyed = { ...meta, orderKey: text('ü') }
    expect(decodeMeta(encodeMeta(keyed))).toEqual(keyed)
    const noBody = { ...keyed, inlineBody: undefined }
    expect(decodeMeta(encodeMeta(noBody))).toEqual(noBody)
    // A redrive's TTL start (restartTtl): flag 4, its varint after the key, before the body.
    const redriven = { ...keyed, ttlFromMs: 300 }
    const bytes = encodeMeta(redriven)
    expect(Array.from(bytes.subarray(-9))).toEqual([1 | 2 | 4, 2, 0xc3, 0xbc, 0xac, 0x02, 1, 2, 3])
    expect(decodeMeta(bytes)).toEqual(redriven)
    for (const m of [
      { ...redriven, orderKey: undefined },
      { ...redriven, inlineBody: undefined },
    ])
      expect(decodeMeta(encodeMeta(m))).toEqual(m)
  })
})
