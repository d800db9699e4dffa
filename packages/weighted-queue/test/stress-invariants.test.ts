import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type BatchOp, type Engine, LevelEngine, MemoryEngine } from '@mq/kv-storage'
import { describe, expect, it } from 'vitest'
import {
  type Command,
  type CommandResult,
  decodeCommand,
  encodeCommand,
  type Lease,
  type QueueConfig,
  QueuePartition,
} from '../src/index'
import { installSnapshot, LaggedQueue } from './harness'

/**
 * A seeded stress test without a reference model, so that it can run what the model cannot
 * follow (expiryBatchMax 1-3: expiry lagging behind time), checked against invariants instead:
 * stats add up and count exactly the messages not acked, purged or deleted by the TTL; an
 * acked message never comes back; a message is never leased twice with overlapping
 * visibility windows, nor two messages of an ordered key at once, nor a key's messages first
 * delivered out of order; each ack/nack/extend status is what the lease ids' history says; a
 * drain at the end leaves only the dead letters. A second replica applies every command
 * through the command codec, writes and releases a random prefix of its pending applies (as
 * data-service's group commit does) and now and then is replaced by a snapshot install: its
 * results, ops, stats and listings must equal the first one's (which reopens at random).
 * WQ_STRESS_SEEDS / WQ_STRESS_FIRST / WQ_STRESS_STEPS run more; WQ_STRESS_LEVEL puts the first
 * replica on LevelDB.
 */
const SEEDS = Number(process.env.WQ_STRESS_SEEDS ?? 8)
const FIRST = Number(process.env.WQ_STRESS_FIRST ?? 1)
const STEPS = Number(process.env.WQ_STRESS_STEPS ?? 300)

function rng(seed: number) {
  let s = seed >>> 0 || 1
  return () => {
    s ^= s << 13
    s >>>= 0
    s ^= s >>> 17
    s ^= s << 5
    s >>>= 0
    return s / 2 ** 32
  }
}

class PartialQueue {
  pending: { generation: number; ops: BatchOp[] }[] = []
  lastOps: readonly BatchOp[] = []
  constructor(
    readonly engine: Engine,
    readonly prefix: Uint8Array,
    public partition: QueuePartition,
    readonly r: () => number,
  ) {}
  static async open(engine: Engine, prefix: Uint8Array, config: Partial<QueueConfig>, r: () => number) {
    return new PartialQueue(engine, prefix, await QueuePartition.open(engine, prefix, config), r)
  }
  async apply(cmd: Command, now: number) {
    const a = await this.partition.apply(cmd, now)
    this.lastOps = a.ops
    this.pending.push({ generation: a.generation, ops: a.ops })
    // write a prefix of the pending applies, in order, releasing the last written
    if (this.r() < 0.5 || this.pending.length >= 30) {
      const k = 1 + Math.floor(this.r() * this.pending.length)
      const done = this.pending.splice(0, k)
      for (const d of done) await this.engine.write(d.ops, { sync: false })
      this.partition.release((done[done.length - 1] as { generation: number }).generation)
    }
    return a.result
  }
  async flush() {
    for (const d of this.pending) await this.engine.write(d.ops, { sync: false })
    if (this.pending.length > 0) this.partition.release(this.pending[this.pending.length - 1]!.generation)
    this.pending = []
  }
}

describe('seeded stress: invariants, with expiry lagging behind time', () => {
  it('hold on every step, and a codec-fed, partially flushed, snapshot-installed replica agrees', async () => {
    for (let seed = FIRST; seed < FIRST + SEEDS; seed++) {
      const r = rng(seed * 7919)
      const int = (a: number, b: number) => a + Math.floor(r() * (b - a + 1))
      const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)] as T
      const ordered = seed % 2
      const config = {
        expiryBatchMax: pick([1, 2, 3]),
        maxDeliveries: pick([1, 2, 3]),
        visibilityMsMax: 1000,
        delayMsMax: 1000,
        leaseBatchMax: 6,
        enqueueBatchMax: 5,
        queueMessagesMax: 40,
        dedupWindowMs: 300,
        producerWindowMs: 300,
        shareWindowLeases: 10,
        orderedKeys: ordered,
        retryBackoffMinMs: pick([0, 0, 10]),
        retryBackoffMaxMs: 50,
        messageTtlMs: seed % 3 === 0 ? 500 : 0,
      }
      const prefix = Uint8Array.of(7)
      const dir = mkdtempSync(join(tmpdir(), 'wqinv-'))
      const engineA = process.env.WQ_STRESS_LEVEL ? await LevelEngine.open(dir) : new MemoryEngine()
      const a = await LaggedQueue.open(engineA, prefix, config, int(1, 4))
      let b = await PartialQueue.open(new MemoryEngine(), prefix, config, r)
      let now = 1000
      const live = new Set<number>()
      const acked = new Set<number>()
      const gone = new Set<number>()
      const keyOf = new Map<number, string>()
      const seenIds = new Set<number>()
      const redriven = new Set<number>()
      const firstDelivered = new Map<string, number>()
      const leases = new Map<number, { delivery: number; deadline: number; settled: boolean }>()
      const issued: string[] = []
      const log: string[] = []
      const apply = async (cmd: Command): Promise<CommandResult> => {
        const ra = await a.apply(cmd, now)
        const opsA = a.lastOps
        let viaCodec: Command = cmd
        try {
          viaCodec = decodeCommand(encodeCommand(cmd))
        } catch {}
        const rb = await b.apply(viaCodec, now)
        log.push(`${now} ${JSON.stringify(cmd)} -> ${JSON.stringify(ra).slice(0, 300)}`)
        const ctx = `seed ${seed} step ${log.length}\n${log.slice(-15).join('\n')}`
        expect(JSON.stringify(rb), ctx).toBe(JSON.stringify(ra))
        expect(b.lastOps, ctx).toEqual(opsA)
        return ra
      }
      for (let step = 0; step < STEPS; step++) {
        now += pick([0, 0, 1, 5, 20, 100, 400])
        const kind = pick([
          'enq',
          'enq',
          'lease',
          'lease',
          'ack',
          'ack',
          'nack',
          'extend',
          'tick',
          'redrive',
          'purge',
          'purgeReady',
          'reopen',
          'snap',
          'conf',
        ])
        const ctx = () => `seed ${seed} step ${log.length}\n${log.slice(-15).join('\n')}`
        const ref = () =>
          issued.length === 0
            ? '1.1'
            : r() < 0.8
              ? issued[issued.length - 1 - Math.min(issued.length - 1, int(0, 6))]!
              : pick(issued)
        if (kind === 'enq') {
          const n = int(1, 4)
          const cmd: Command = {
            type: 'enqueue',
            messages: Array.from({ length: n }, () => ({
              weight: pick([1, 2, 5, 1000]),
              body: Uint8Array.of(int(0, 255)),
              ...(r() < 0.4 ? { key: pick(['a', 'b']) } : {}),
              ...(r() < 0.2 ? { notBeforeMs: now + int(0, 200) } : {}),
              ...(r() < 0.2 ? { dedupKey: pick(['x', 'y']) } : {}),
            })),
          }
          const res = await apply(cmd)
          if (res.type === 'enqueue')
            for (const id of res.ids) if (!acked.has(id) && !gone.has(id)) live.add(id)
          if (res.type === 'enqueue' && !res.duplicate)
            res.ids.forEach((id, i) => {
              const kk = cmd.messages[i]!.key
              if (res.ids.indexOf(id) === i && !seenIds.has(id) && kk !== undefined) keyOf.set(id, kk)
              seenIds.add(id)
            })
        } else if (kind === 'lease') {
          const res = await apply({
            type: 'lease',
            consumerId: 'c',
            max: int(1, 6),
            visibilityMs: pick([10, 50, 300]),
            ...(r() < 0.3 ? { bytesMax: int(1, 3) } : {}),
            ...(r() < 0.3
              ? {
                  attempt: pick(['t1', 't2']),
                  ...pick([{}, { repeat: true }, { repeat: true, repeatOnly: true }]),
                }
              : {}),
          })
          if (res.type !== 'lease') throw new Error(ctx())
          for (const l of res.leases as Lease[]) {
            expect(acked.has(l.messageId), `acked ${l.messageId} came back\n${ctx()}`).toBe(false)
            expect(live.has(l.messageId), ctx()).toBe(true)
            const prev = leases.get(l.messageId)
            const [, d] = l.leaseId.split('.').map(Number)
            if (prev && prev.delivery === d) {
              // a repeat answer: same lease
              expect(prev.deadline, ctx()).toBe(l.deadlineMs)
              continue
            }
            if (prev && !prev.settled)
              expect(prev.deadline <= now, `overlapping leases of ${l.messageId}\n${ctx()}`).toBe(true)
            const kk = keyOf.get(l.messageId)
            if (ordered && kk !== undefined) {
              for (const [oid, ol] of leases) {
                if (
                  oid !== l.messageId &&
                  keyOf.get(oid) === kk &&
                  !ol.settled &&
                  ol.deadline > now &&
                  !acked.has(oid)
                )
                  throw new Error(`key ${kk}: ${l.messageId} leased while ${oid} holds a lease\n${ctx()}`)
              }
              if (!prev && !redriven.has(l.messageId)) {
                const last = firstDelivered.get(kk) ?? 0
                if (l.messageId < last)
                  throw new Error(`key ${kk}: ${l.messageId} first delivered after ${last}\n${ctx()}`)
                firstDelivered.set(kk, l.messageId)
              }
            }
            if (prev) expect(d, ctx()).toBe(prev.delivery + 1)
            leases.set(l.messageId, { delivery: d!, deadline: l.deadlineMs, settled: false })
            issued.push(l.leaseId)
          }
        } else if (kind === 'ack' || kind === 'nack' || kind === 'extend') {
          const ids = Array.from({ length: int(1, 3) }, ref)
          const cmd: Command =
            kind === 'ack'
              ? { type: 'ack', leaseIds: ids }
              : kind === 'nack'
                ? {
                    type: 'nack',
                    leaseIds: ids,
                    ...(r() < 0.3 ? { delayMs: int(1, 100) } : {}),
                    ...(r() < 0.3 ? { release: true } : {}),
                    ...(r() < 0.2
                      ? { attempt: pick(['t1', 't2']), ...(r() < 0.5 ? { lapses: true } : {}) }
                      : {}),
                  }
                : { type: 'extend', leaseIds: ids, visibilityMs: pick([10, 100]) }
          const res = await apply(cmd)
          if (res.type === 'rejected') throw new Error(ctx())
          const statuses = (res as unknown as { statuses: string[] }).statuses
          const seen = new Set<number>()
          // A give-back under an attempt that answered more than once changes nothing (all expired).
          const superseded = kind === 'nack' && 'attempt' in cmd && statuses.every((x) => x !== 'ok')
          ids.forEach((lid, i) => {
            if (superseded) return
            const [id, d] = lid.split('.').map(Number) as [number, number]
            const st = leases.get(id)
            const valid =
              st !== undefined && st.delivery === d && !st.settled && st.deadline > now && !acked.has(id)
            if (seen.has(id) && kind !== 'extend') {
              expect(statuses[i], ctx()).not.toBe('ok')
              return
            }
            if (valid) seen.add(id)
            expect(statuses[i], `${lid} status\n${ctx()}`).toBe(
              valid ? 'ok' : statuses[i] === 'unknown' ? 'unknown' : 'expired',
            )
            if (valid && kind !== 'extend') {
              st.settled = true
              if (kind === 'ack') {
                acked.add(id)
                live.delete(id)
              }
            }
            if (valid && kind === 'extend') st.deadline = now + (cmd as { visibilityMs: number }).visibilityMs
          })
        } else if (kind === 'tick') {
          await apply(r() < 0.5 ? { type: 'tick' } : { type: 'tick', ttlWaiting: true })
        } else if (kind === 'redrive') {
          const res = await apply({
            type: 'redriveDead',
            max: int(0, 3),
            ...(r() < 0.3 ? { restartTtl: true } : {}),
            ...(r() < 0.3 ? { through: int(0, 10) } : {}),
          })
          if (res.type === 'redriveDead') for (const id of res.ids) redriven.add(id)
        } else if (kind === 'purge') {
          const res = await apply({
            type: 'purgeDead',
            max: int(1, 2),
            ...(r() < 0.3 ? { through: int(0, 10) } : {}),
            ...(r() < 0.3 ? { after: int(0, 5) } : {}),
          })
          if (res.type === 'purgeDead')
            for (const id of res.ids) {
              live.delete(id)
              gone.add(id)
            }
        } else if (kind === 'purgeReady') {
          if (r() < 0.3) {
            const res = await apply({ type: 'purgeReady', max: 1 })
            if (res.type === 'purgeReady')
              for (const id of res.ids) {
                live.delete(id)
                gone.add(id)
              }
          }
        } else if (kind === 'conf') {
          const c: Record<string, unknown> = {}
          if (r() < 0.3) c.scheduling = pick(['fair', 'strict'])
          if (r() < 0.3) c.maxDeliveries = int(1, 3)
          if (r() < 0.3) c.expiryBatchMax = int(1, 3)
          if (r() < 0.3) c.messageTtlMs = pick([0, 300, 800])
          if (r() < 0.3) c.shareWindowLeases = int(1, 12)
          if (r() < 0.3) c.configVersion = int(0, 3)
          if (r() < 0.2) {
            c.retryBackoffMinMs = pick([0, 5])
            c.retryBackoffMaxMs = pick([0, 40])
          }
          const res = await apply({ type: 'configure', config: c })
          expect(res.type, ctx()).toBe('configure')
        } else if (kind === 'reopen') {
          await a.reopen()
        } else if (kind === 'snap') {
          await b.flush()
          const e = new MemoryEngine()
          await installSnapshot(b.engine, e, prefix, int(1, 5))
          b = await PartialQueue.open(e, prefix, config, r)
        }
        const st = await a.partition.stats(now)
        const stb = await b.partition.stats(now)
        expect(stb, ctx()).toEqual(st)
        expect(st.messages, `messages\n${ctx()}`).toBe(live.size - st.counters.discarded)
        let sum = st.waiting
        for (const w of st.weights) sum += w.ready + w.delayed + w.leased + w.dead
        expect(sum, `sum of states\n${ctx()}`).toBe(st.messages)
        for (const m of await a.partition.listReady(50)) expect(live.has(m.messageId), ctx()).toBe(true)
        expect(await b.partition.listDead(50), ctx()).toEqual(await a.partition.listDead(50))
        expect(await b.partition.listReady(50), ctx()).toEqual(await a.partition.listReady(50))
      }
      // drain: time passes, everything comes back, leased and acked
      for (let i = 0; i < 200; i++) {
        now += 500
        const res = await apply({ type: 'lease', consumerId: 'c', max: 6, visibilityMs: 1000 })
        if (res.type !== 'lease') throw new Error('x')
        const ids = res.leases.map((l) => l.leaseId)
        for (const l of res.leases) expect(acked.has(l.messageId)).toBe(false)
        if (ids.length > 0) {
          const ack = await apply({ type: 'ack', leaseIds: ids })
          expect(
            (ack as unknown as { statuses: string[] }).statuses.every((s) => s === 'ok'),
            `drain ack seed ${seed}`,
          ).toBe(true)
          for (const l of res.leases) {
            live.delete(l.messageId)
            acked.add(l.messageId)
          }
        }
      }
      const st = await a.partition.stats(now)
      const dead = st.weights.reduce((n, w) => n + w.dead, 0)
      expect(st.messages, `end seed ${seed}`).toBe(dead)
      expect(live.size - st.counters.discarded, `end seed ${seed}`).toBe(dead)
      expect(st.waiting).toBe(0)
      await engineA.close()
      rmSync(dir, { recursive: true, force: true })
    }
  }, 600_000)
})
