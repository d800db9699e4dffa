/**
 * fast-check command generators shared by the model-based and snapshot suites: each Step
 * advances the clock, builds its command from the model's state (to pick issued lease ids),
 * applies it to the model and to the partition, and compares results, stats and dead letters.
 */
import * as fc from 'fast-check'
import { expect } from 'vitest'
import type { Command, EnqueueMessage, QueueConfig } from '../src/index'
import { comparable, type LaggedQueue } from './harness'
import type { ModelQueue } from './model'

/** Small limits so that the generated commands reach them. */
export const CONFIG: Partial<QueueConfig> = {
  maxDeliveries: 3,
  dedupWindowMs: 400,
  producerWindowMs: 600,
  messageBytesMax: 24,
  enqueueBatchMax: 4,
  leaseBatchMax: 5,
  queueMessagesMax: 14,
  visibilityMsMax: 500,
  delayMsMax: 400,
  expiryBatchMax: 1000,
  shareWindowLeases: 8,
}

export interface World {
  readonly model: ModelQueue
  readonly real: LaggedQueue
  nowMs: number
}

/** A command is built from the model's state at run time (to pick issued lease ids). */
type Build = (model: ModelQueue, nowMs: number) => Command

export const tally = new Map<string, number>()

export class Step implements fc.AsyncCommand<World, World> {
  constructor(
    readonly label: string,
    readonly dtMs: number,
    readonly build: Build,
  ) {}
  check(): boolean {
    return true
  }
  async run(_: World, w: World): Promise<void> {
    w.nowMs = Math.max(0, w.nowMs + this.dtMs)
    const cmd = this.build(w.model, w.nowMs)
    const want = comparable(w.model.apply(cmd, w.nowMs))
    const raw = await w.real.apply(cmd, w.nowMs)
    const got = comparable(raw)
    if (process.env.WQ_DEBUG) {
      const r = want as {
        type: string
        code?: string
        leases?: unknown[]
        statuses?: string[]
        ids?: unknown[]
      }
      const g = raw as { error?: Error }
      const k = `${g.error?.message ?? ''}${r.type}${r.code ? `:${r.code}` : ''}${r.leases ? `:${r.leases.length > 0}` : ''}${r.statuses ? `:${r.statuses.join(',')}` : ''}`
      tally.set(k, (tally.get(k) ?? 0) + 1)
    }
    expect(got, `${this.label} at ${w.nowMs}`).toEqual(want)
    w.model.checkTurns()
    await compareReads(w)
  }
  toString(): string {
    return `${this.label}+${this.dtMs}ms`
  }
}

/** What the partition answers between applies (stats, listings, dead count) against the model. */
async function compareReads(w: World): Promise<void> {
  expect(await w.real.partition.stats(w.nowMs)).toEqual(w.model.stats(w.nowMs))
  expect(await w.real.partition.listDead(10)).toEqual(w.model.listDead(10))
  expect(await w.real.partition.listReady(12)).toEqual(w.model.listReady(12))
  const stats = w.model.stats(w.nowMs)
  expect(w.real.partition.deadCount()).toBe(stats.weights.reduce((n, x) => n + x.dead, 0))
}

/**
 * A restart: the partition is opened again from its engine (caches, floors and the scheduler
 * rebuilt from what is stored) and must go on exactly as the model, which never restarts.
 */
export class ReopenStep implements fc.AsyncCommand<World, World> {
  check(): boolean {
    return true
  }
  async run(_: World, w: World): Promise<void> {
    await w.real.reopen()
    await compareReads(w)
  }
  toString(): string {
    return 'reopen'
  }
}

export const reopenStep: fc.Arbitrary<ReopenStep> = fc.constant(new ReopenStep())

const dt = fc.oneof(
  { weight: 12, arbitrary: fc.integer({ min: 0, max: 15 }) },
  { weight: 6, arbitrary: fc.integer({ min: 16, max: 150 }) },
  { weight: 1, arbitrary: fc.constant(-50) },
)
const rarely = <T>(common: fc.Arbitrary<T>, rare: fc.Arbitrary<T>) =>
  fc.oneof({ weight: 30, arbitrary: common }, { weight: 1, arbitrary: rare })
const weight = rarely(
  fc.constantFrom<number | undefined>(undefined, 1, 2, 3, 7, 1000),
  fc.constantFrom(0, 1001, 2.5),
)
const maybe = <T>(arb: fc.Arbitrary<T>, pct: number) =>
  fc.integer({ min: 0, max: 99 }).chain((n) => (n < pct ? arb : fc.constant(undefined)))
const message = fc
  .record({
    weight,
    body: rarely(fc.uint8Array({ maxLength: 8 }), fc.uint8Array({ minLength: 25, maxLength: 26 })),
    headers: maybe(
      fc.dictionary(fc.constantFrom('a', 'b', 'ü'), fc.string({ maxLength: 3 }), { maxKeys: 2 }),
      15,
    ),
    key: maybe(rarely(fc.constantFrom('k', 'kk', 'ü'), fc.constant('')), 60),
    notBeforeOffsetMs: maybe(fc.integer({ min: -10, max: 300 }), 25),
    dedupKey: maybe(fc.constantFrom('x', 'y', 'z'), 20),
  })
  .map((m) => {
    const out: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(m)) if (v !== undefined) out[k] = v
    return out as { body: Uint8Array; notBeforeOffsetMs?: number } & Omit<EnqueueMessage, 'body'>
  })
/** Mostly one of the last few lease ids handed out; sometimes an old or malformed one. */
const leaseRef = fc.oneof(
  { weight: 12, arbitrary: fc.nat({ max: 7 }).map((n) => ({ recent: n })) },
  { weight: 2, arbitrary: fc.nat().map((n) => ({ any: n })) },
  { weight: 1, arbitrary: fc.constantFrom('999.1', 'nope', '1.0', '1.9', '01.1') },
)
const pickIds = (
  refs: readonly ({ recent: number } | { any: number } | string)[],
  model: ModelQueue,
): string[] =>
  refs.map((r) => {
    if (typeof r === 'string') return r
    const ids = model.issuedLeaseIds
    if (ids.length === 0) return '1.1'
    return 'recent' in r
      ? (ids[Math.max(0, ids.length - 1 - r.recent)] as string)
      : (ids[r.any % ids.length] as string)
  })

const [
  enqueueStep,
  leaseStep,
  ackStep,
  nackStep,
  extendStep,
  tickStep,
  deadStep,
  purgeSpanStep,
  purgeReadyStep,
  configureStep,
] = [
  fc
    .record({
      dt,
      messages: rarely(
        fc.array(message, { minLength: 1, maxLength: 4 }),
        fc.array(message, { maxLength: 5 }),
      ),
      producer: fc.option(
        fc.record({
          id: fc.constantFrom('p', 'q'),
          seq: fc.nat({ max: 8 }),
          base: fc.option(fc.nat({ max: 8 }), { nil: undefined }),
        }),
      ),
    })
    .map(
      ({ dt, messages, producer }) =>
        new Step('enqueue', dt, (_, now) => {
          const msgs: EnqueueMessage[] = messages.map((m) => {
            const { notBeforeOffsetMs, ...rest } = m
            return notBeforeOffsetMs === undefined
              ? rest
              : { ...rest, notBeforeMs: Math.max(0, now + notBeforeOffsetMs) }
          })
          return producer
            ? producer.base === undefined
              ? { type: 'enqueue', messages: msgs, producerId: producer.id, producerSeq: producer.seq }
              : {
                  type: 'enqueue',
                  messages: msgs,
                  producerId: producer.id,
                  producerSeq: producer.seq,
                  producerBase: producer.base,
                }
            : { type: 'enqueue', messages: msgs }
        }),
    ),
  fc
    .record({
      dt,
      max: rarely(fc.integer({ min: 1, max: 5 }), fc.constantFrom(0, 6)),
      vis: rarely(fc.constantFrom(30, 100, 250), fc.constant(0)),
      // A byte budget (bodies are up to 24 bytes): cut after the first, second or third one.
      bytesMax: fc.option(rarely(fc.constantFrom(1, 12, 30, 60), fc.constant(0)), { freq: 3 }),
      // An attempt id from a small pool, so that attempts are repeated (rarely not a name).
      attempt: fc.option(rarely(fc.constantFrom('a1', 'a2', 'a3'), fc.constant('')), { freq: 2 }),
      // A repeat, or one that only repeats (leases nothing new).
      repeat: fc.constantFrom(false, true, 'only' as const),
    })
    .map(
      ({ dt, max, vis, bytesMax, attempt, repeat }) =>
        new Step('lease', dt, () => ({
          type: 'lease',
          consumerId: 'c',
          max,
          visibilityMs: vis,
          ...(bytesMax !== null ? { bytesMax } : {}),
          ...(attempt !== null
            ? {
                attempt,
                ...(repeat === 'only' ? { repeat: true, repeatOnly: true } : repeat ? { repeat } : {}),
              }
            : {}),
        })),
    ),
  fc
    .record({ dt, refs: fc.array(leaseRef, { maxLength: 4 }) })
    .map(({ dt, refs }) => new Step('ack', dt, (m) => ({ type: 'ack', leaseIds: pickIds(refs, m) }))),
  fc
    .record({
      dt,
      refs: fc.array(leaseRef, { maxLength: 4 }),
      delay: rarely(fc.constantFrom(undefined, 0, 50, 300), fc.constant(500)),
      release: fc.boolean(),
      // A give-back of one answer of a lease attempt (see the lease step's pool).
      attempt: fc.option(fc.constantFrom('a1', 'a2'), { freq: 3 }),
      // From format level 38: past the attempt's record, it changes nothing either.
      lapses: fc.boolean(),
    })
    .map(
      ({ dt, refs, delay, release, attempt, lapses }) =>
        new Step('nack', dt, (m) => ({
          type: 'nack',
          leaseIds: pickIds(refs, m),
          ...(delay === undefined ? {} : { delayMs: delay }),
          ...(release ? { release: true } : {}),
          ...(attempt !== null ? { attempt, ...(lapses ? { lapses: true } : {}) } : {}),
        })),
    ),
  fc
    .record({
      dt,
      refs: fc.array(leaseRef, { maxLength: 4 }),
      vis: rarely(fc.constantFrom(40, 200), fc.constant(0)),
    })
    .map(
      ({ dt, refs, vis }) =>
        new Step('extend', dt, (m) => ({ type: 'extend', leaseIds: pickIds(refs, m), visibilityMs: vis })),
    ),
  fc
    .record({ dt, ttlWaiting: fc.boolean() })
    .map(
      ({ dt, ttlWaiting }) =>
        new Step(ttlWaiting ? 'tick+ttlWaiting' : 'tick', dt, () =>
          ttlWaiting ? { type: 'tick', ttlWaiting } : { type: 'tick' },
        ),
    ),
  fc
    .record({
      dt,
      max: rarely(fc.integer({ min: 1, max: 3 }), fc.constant(0)),
      purge: fc.boolean(),
      restartTtl: fc.boolean(),
    })
    .map(
      ({ dt, max, purge, restartTtl }) =>
        new Step(purge ? 'purge' : restartTtl ? 'redrive+restartTtl' : 'redrive', dt, () =>
          purge
            ? { type: 'purgeDead', max }
            : restartTtl
              ? { type: 'redriveDead', max, restartTtl }
              : { type: 'redriveDead', max },
        ),
    ),
  // A purge of the dead listed up to a place in the list (what a dead-letter forwarder sends).
  fc
    .record({
      dt,
      max: fc.integer({ min: 1, max: 3 }),
      through: fc.integer({ min: 0, max: 12 }),
      after: fc.option(fc.integer({ min: 0, max: 8 }), { nil: undefined }),
    })
    .map(
      ({ dt, max, through, after }) =>
        new Step('purgeSpan', dt, () => ({
          type: 'purgeDead',
          max,
          through,
          ...(after === undefined ? {} : { after }),
        })),
    ),
  // A redrive of the dead up to a place in the list (what a Redrive call sends from level 24).
  fc
    .record({
      dt,
      max: fc.integer({ min: 0, max: 3 }),
      through: fc.integer({ min: 0, max: 12 }),
      restartTtl: fc.boolean(),
    })
    .map(
      ({ dt, max, through, restartTtl }) =>
        new Step('redriveSpan', dt, () => ({
          type: 'redriveDead',
          max,
          through,
          ...(restartTtl ? { restartTtl } : {}),
        })),
    ),
  fc
    .record({ dt, max: rarely(fc.integer({ min: 1, max: 4 }), fc.constant(0)) })
    .map(({ dt, max }) => new Step('purgeReady', dt, () => ({ type: 'purgeReady', max }))),
  fc
    .record({
      dt,
      scheduling: fc.constantFrom<'fair' | 'strict' | undefined>('fair', 'strict', undefined),
      md: fc.option(fc.integer({ min: 1, max: 3 })),
      win: fc.option(fc.constantFrom(4, 8, 70), { freq: 4 }),
      ordered: fc.option(fc.constantFrom(0, 1), { freq: 4 }),
      backoff: fc.option(fc.tuple(fc.constantFrom(0, 5, 40), fc.constantFrom(0, 30, 100)), { freq: 4 }),
    })
    .map(
      ({ dt, scheduling, md, win, ordered, backoff }) =>
        new Step('configure', dt, () => ({
          type: 'configure',
          config: {
            ...(scheduling ? { scheduling } : {}),
            ...(md !== null ? { maxDeliveries: md } : {}),
            ...(win !== null ? { shareWindowLeases: win } : {}),
            // Set at creation: a configure that would change it is rejected, changing nothing.
            ...(ordered !== null ? { orderedKeys: ordered } : {}),
            ...(backoff !== null ? { retryBackoffMinMs: backoff[0], retryBackoffMaxMs: backoff[1] } : {}),
          },
        })),
    ),
]

/** Repeats set how often each command is drawn. */
export const steps = [
  enqueueStep,
  enqueueStep,
  enqueueStep,
  leaseStep,
  leaseStep,
  leaseStep,
  ackStep,
  ackStep,
  nackStep,
  extendStep,
  tickStep,
  deadStep,
  purgeSpanStep,
  purgeReadyStep,
  configureStep,
]
