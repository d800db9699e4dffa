/**
 * Replicas of one log stay identical when a `configure` changes, mid-way, the settings the
 * model-based steps never change (messageTtlMs, dedupWindowMs, producerWindowMs,
 * expiryBatchMax, leaseBatchMax, visibilityMsMax, queueMessagesMax): one replica restarts and
 * installs snapshots, the other never does; same results, same ops, identical keys.
 */

import * as fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { partitionKeySpan, QUEUE_CONFIG_DEFAULT, retryBackoffMs } from '../src/index'
import { comparable, ENGINES, installSnapshot, LaggedQueue } from './harness'
import { ModelQueue } from './model'
import { CONFIG, Step, steps } from './steps'

const PREFIX = Uint8Array.of(0x53, 0x01)

const configureMore = fc
  .record({
    dt: fc.integer({ min: 0, max: 120 }),
    ttl: fc.option(fc.constantFrom(0, 30, 250, 1000), { freq: 2 }),
    dedup: fc.option(fc.constantFrom(0, 50, 400, 5000), { freq: 2 }),
    producer: fc.option(fc.constantFrom(0, 50, 600), { freq: 2 }),
    expiryBatch: fc.option(fc.constantFrom(1, 2, 1000), { freq: 2 }),
    leaseBatch: fc.option(fc.constantFrom(1, 3, 5), { freq: 3 }),
    vis: fc.option(fc.constantFrom(40, 500), { freq: 3 }),
    qmax: fc.option(fc.constantFrom(6, 14), { freq: 4 }),
    backoff: fc.option(fc.tuple(fc.constantFrom(0, 5, 40), fc.constantFrom(0, 30, 100)), { freq: 3 }),
  })
  .map(
    ({ dt, ttl, dedup, producer, expiryBatch, leaseBatch, vis, qmax, backoff }) =>
      new Step('configure+', dt, () => ({
        type: 'configure',
        config: {
          ...(ttl !== null ? { messageTtlMs: ttl } : {}),
          ...(dedup !== null ? { dedupWindowMs: dedup } : {}),
          ...(producer !== null ? { producerWindowMs: producer } : {}),
          ...(expiryBatch !== null ? { expiryBatchMax: expiryBatch } : {}),
          ...(leaseBatch !== null ? { leaseBatchMax: leaseBatch } : {}),
          ...(vis !== null ? { visibilityMsMax: vis } : {}),
          ...(qmax !== null ? { queueMessagesMax: qmax } : {}),
          ...(backoff !== null ? { retryBackoffMinMs: backoff[0], retryBackoffMaxMs: backoff[1] } : {}),
        },
      })),
  )

type Act = { kind: 'step'; step: Step } | { kind: 'reopen' } | { kind: 'install' }
const act: fc.Arbitrary<Act> = fc.oneof(
  {
    weight: 20,
    arbitrary: fc.oneof(...(steps as fc.Arbitrary<Step>[])).map((step) => ({ kind: 'step' as const, step })),
  },
  { weight: 3, arbitrary: configureMore.map((step) => ({ kind: 'step' as const, step })) },
  { weight: 1, arbitrary: fc.constant({ kind: 'reopen' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'install' as const }) },
)

describe.each(ENGINES.slice(0, 1))('replicas with config changes on $name', ({ open }) => {
  it('same results, ops and keys whatever restarts and snapshot installs', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(act, { minLength: 30, maxLength: 150 }),
        fc.integer({ min: 0, max: 1 }),
        fc.integer({ min: 0, max: 250 }),
        async (acts, orderedKeys, messageTtlMs) => {
          const config = { ...CONFIG, orderedKeys, messageTtlMs }
          const a = await open()
          const b = await open()
          try {
            const qa = await LaggedQueue.open(a.engine, PREFIX, config, 1)
            let qb = await LaggedQueue.open(b.engine, PREFIX, config, 3)
            const model = new ModelQueue(config)
            let nowMs = 10_000
            let partNow = 0
            let ttl = messageTtlMs
            const acked = new Set<number>()
            const active = new Map<number, { leaseId: string; deadlineMs: number; key?: string }>()
            const notBefore = new Map<number, number>()
            const restarted = new Set<number>()
            const seen = new Set<number>()
            const dedup = new Map<string, { id: number; expiresAtMs: number }>()
            let win = CONFIG.dedupWindowMs as number
            let cfgNow = { ...QUEUE_CONFIG_DEFAULT, ...config }
            const attempts = new Map<number, number>()
            for (const x of acts) {
              if (x.kind === 'reopen') {
                await qb.reopen()
                continue
              }
              if (x.kind === 'install') {
                await qa.flush()
                await qb.flush()
                await b.engine.write([], { sync: false })
                await installSnapshot(a.engine, b.engine, PREFIX, 2)
                qb = await LaggedQueue.open(b.engine, PREFIX, config, 3)
                continue
              }
              nowMs = Math.max(0, nowMs + x.step.dtMs)
              const cmd = x.step.build(model, nowMs)
              try {
                model.apply(cmd, nowMs)
              } catch {}
              const raw = await qa.apply(cmd, nowMs)
              partNow = Math.max(partNow, nowMs)
              const ra = comparable(raw)
              // Safety, as the real partition answers (not the model).
              if (raw.type === 'enqueue' && cmd.type === 'enqueue' && !raw.duplicate) {
                const batchFirst = new Map<string, number>()
                raw.ids.forEach((id, i) => {
                  const dk = cmd.messages[i]?.dedupKey
                  if (dk !== undefined) {
                    const rec = dedup.get(dk)
                    const what = `enqueue of ${dk} at ${partNow} (window ${win}, record ${JSON.stringify(rec)})`
                    if (rec && rec.expiresAtMs > partNow) expect(id, what).toBe(rec.id)
                    else if (batchFirst.has(dk)) expect(id, what).toBe(batchFirst.get(dk))
                    else {
                      batchFirst.set(dk, id)
                      expect(seen.has(id), `${what}: got old ${id}`).toBe(false)
                      if (win > 0) dedup.set(dk, { id, expiresAtMs: partNow + win })
                      else dedup.delete(dk)
                    }
                  }
                  const nb = cmd.messages[i]?.notBeforeMs
                  if (!seen.has(id) && nb !== undefined) notBefore.set(id, nb)
                  seen.add(id)
                })
              }
              if (
                raw.type === 'configure' &&
                cmd.type === 'configure' &&
                cmd.config.messageTtlMs !== undefined
              )
                ttl = cmd.config.messageTtlMs
              if (
                raw.type === 'configure' &&
                cmd.type === 'configure' &&
                cmd.config.dedupWindowMs !== undefined
              )
                win = cmd.config.dedupWindowMs
              if (raw.type === 'configure' && cmd.type === 'configure') cfgNow = { ...cfgNow, ...cmd.config }
              if (raw.type === 'redriveDead' && cmd.type === 'redriveDead')
                for (const id of raw.ids) {
                  notBefore.delete(id)
                  attempts.set(id, 0)
                }
              if (raw.type === 'redriveDead' && cmd.type === 'redriveDead' && cmd.restartTtl)
                for (const id of raw.ids) restarted.add(id)
              if (raw.type === 'lease') {
                for (const l of raw.leases) {
                  const what = `lease of ${l.messageId} (${l.leaseId}) at ${partNow}`
                  expect(acked.has(l.messageId), `${what}: acked`).toBe(false)
                  const held = active.get(l.messageId)
                  if (held && held.leaseId !== l.leaseId)
                    expect(
                      held.deadlineMs <= partNow,
                      `${what}: held by ${held.leaseId} until ${held.deadlineMs}`,
                    ).toBe(true)
                  if (held?.leaseId !== l.leaseId) {
                    expect(
                      (notBefore.get(l.messageId) ?? 0) <= partNow,
                      `${what}: not before ${notBefore.get(l.messageId)}`,
                    ).toBe(true)
                    if (ttl > 0 && !restarted.has(l.messageId))
                      expect(
                        l.enqueuedAtMs + ttl > partNow,
                        `${what}: outlived ttl ${ttl} from ${l.enqueuedAtMs}`,
                      ).toBe(true)
                  }
                  if (l.key !== undefined && l.key !== '' && orderedKeys === 1)
                    for (const [id, h] of active)
                      if (id !== l.messageId && h.key === l.key)
                        expect(
                          h.deadlineMs <= partNow,
                          `${what}: key ${l.key} held by ${id} until ${h.deadlineMs}`,
                        ).toBe(true)
                  if (held?.leaseId !== l.leaseId)
                    attempts.set(l.messageId, (attempts.get(l.messageId) ?? 0) + 1)
                  active.set(l.messageId, { leaseId: l.leaseId, deadlineMs: l.deadlineMs, key: l.key })
                }
              }
              if ((raw.type === 'ack' || raw.type === 'nack' || raw.type === 'extend') && 'leaseIds' in cmd) {
                cmd.leaseIds.forEach((leaseId, i) => {
                  if (raw.statuses[i] !== 'ok') return
                  const id = Number(leaseId.split('.')[0])
                  if (raw.type === 'ack') acked.add(id)
                  if (raw.type === 'ack' || raw.type === 'nack') active.delete(id)
                  if (raw.type === 'nack' && cmd.type === 'nack' && cmd.release === true)
                    attempts.set(id, (attempts.get(id) ?? 1) - 1)
                  if (raw.type === 'nack' && cmd.type === 'nack' && (cmd.delayMs ?? 0) > 0)
                    notBefore.set(id, partNow + (cmd.delayMs as number))
                  else if (raw.type === 'nack' && cmd.type === 'nack' && cmd.release !== true) {
                    const n = attempts.get(id) ?? 0
                    if (n < cfgNow.maxDeliveries) notBefore.set(id, partNow + retryBackoffMs(cfgNow, n))
                  }
                  if (raw.type === 'extend') {
                    const h = active.get(id)
                    const d = raw.deadlinesMs[i]
                    if (h && d !== undefined) h.deadlineMs = d
                  }
                })
              }
              const rb = comparable(await qb.apply(cmd, nowMs))
              expect(rb, `${x.step.label} at ${nowMs}`).toEqual(ra)
              expect(qb.lastOps).toEqual(qa.lastOps)
              expect(await qb.partition.stats(nowMs)).toEqual(await qa.partition.stats(nowMs))
              expect(await qb.partition.ttlDue(nowMs)).toEqual(await qa.partition.ttlDue(nowMs))
            }
            await qa.flush()
            await qb.flush()
            const span = partitionKeySpan(PREFIX)
            expect(await b.engine.range(span)).toEqual(await a.engine.range(span))
          } finally {
            await a.dispose()
            await b.dispose()
          }
        },
      ),
      {
        numRuns: Number(process.env.RUNS ?? 200),
        seed: process.env.SEED ? Number(process.env.SEED) : undefined,
      },
    )
  }, 300_000)
})
