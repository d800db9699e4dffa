import { type BatchOp, MemoryEngine } from '@mq/kv-storage'
import { describe, expect, it } from 'vitest'
import { type Applied, type Command, partitionKeySpan, QueuePartition } from '../src/index'
import { leasesOf } from './harness'

const PREFIX = Uint8Array.of(1, 2)
const BADNUM = [-1, 0, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '5', null, 2 ** 53, 1e300, true, {}]
const BADNAME = ['', 'x'.repeat(257), 5, null, '\uD800', {}, ['a']]

/**
 * Every field of every command, out of range or of the wrong type (negative, fractional, NaN,
 * Infinity, past 2^53, a string for a number, an empty, too long or ill-formed name, a lone
 * surrogate…), on a partition holding ready, leased and dead messages: rejected with
 * INVALID_ARGUMENT, no op but the state record's (unchanged), the same stats and the same
 * stored bytes; the unmutated commands are valid.
 */
describe('bad input', () => {
  it('rejects every bad field of every command with InvalidArgument and changes nothing', async () => {
    const engine = new MemoryEngine()
    const p = await QueuePartition.open(engine, PREFIX, {
      maxDeliveries: 1,
      visibilityMsMax: 1000,
      delayMsMax: 1000,
      leaseBatchMax: 10,
      enqueueBatchMax: 10,
      messageBytesMax: 100,
    })
    const now = 10_000
    const ap = async (c: Command) => {
      const a = await p.apply(c, now)
      await engine.write(a.ops as BatchOp[], { sync: false })
      p.release(a.generation)
      return a
    }
    await ap({
      type: 'enqueue',
      messages: [
        { body: new Uint8Array(3), weight: 2 },
        { body: new Uint8Array(3), key: 'k', dedupKey: 'd' },
        { body: new Uint8Array(1) },
        { body: new Uint8Array(1), weight: 7 },
      ],
      producerId: 'p',
      producerSeq: 3,
    })
    const l = await ap({ type: 'lease', consumerId: 'c', max: 3, visibilityMs: 500, attempt: 'a' })
    const [lid, lid2] = leasesOf(l.result).map((x) => x.leaseId) as [string, string, string]
    await ap({ type: 'nack', leaseIds: [lid2] }) // dead (maxDeliveries 1)
    const base: Record<string, Command> = {
      enqueue: {
        type: 'enqueue',
        messages: [
          {
            body: new Uint8Array(1),
            weight: 3,
            key: 'k2',
            dedupKey: 'e',
            notBeforeMs: now + 5,
            headers: { h: 'v' },
          },
        ],
        producerId: 'p',
        producerSeq: 4,
        producerBase: 4,
      },
      lease: { type: 'lease', consumerId: 'c', max: 1, visibilityMs: 10, bytesMax: 100, attempt: 'b' },
      ack: { type: 'ack', leaseIds: [lid] },
      nack: { type: 'nack', leaseIds: [lid], delayMs: 5, attempt: 'zz' },
      extend: { type: 'extend', leaseIds: [lid], visibilityMs: 10 },
      redriveDead: { type: 'redriveDead', max: 1, through: 5 },
      purgeDead: { type: 'purgeDead', max: 1, through: 5, after: 0 },
      purgeReady: { type: 'purgeReady', max: 1 },
      configure: { type: 'configure', config: { maxDeliveries: 2 } },
    }
    const variants: [string, Command][] = []
    const set = (name: string, c: Command, path: (string | number)[], v: unknown) => {
      const copy = structuredClone(c) as unknown as Record<string, unknown>
      let o: Record<string | number, unknown> = copy
      for (const k of path.slice(0, -1)) o = o[k] as Record<string | number, unknown>
      o[path.at(-1) as string] = v
      variants.push([
        `${name} ${path.join('.')}=${typeof v === 'string' ? JSON.stringify(v.slice(0, 10)) : String(v)}`,
        copy as unknown as Command,
      ])
    }
    for (const v of [...BADNUM, 1001]) set('enqueue', base.enqueue!, ['messages', 0, 'weight'], v)
    for (const v of BADNAME) set('enqueue', base.enqueue!, ['messages', 0, 'key'], v)
    for (const v of BADNAME) set('enqueue', base.enqueue!, ['messages', 0, 'dedupKey'], v)
    for (const v of [...BADNUM.filter((x) => x !== 0), now + 1001])
      set('enqueue', base.enqueue!, ['messages', 0, 'notBeforeMs'], v)
    for (const v of [null, 5, 'x', [1], { a: 5 }, { a: null }])
      set('enqueue', base.enqueue!, ['messages', 0, 'headers'], v)
    for (const v of [null, 'x', [1], new Uint8Array(101), undefined])
      set('enqueue', base.enqueue!, ['messages', 0, 'body'], v)
    for (const v of [null, [], 'x', [null], [5], new Array(11).fill({ body: new Uint8Array(1) })])
      set('enqueue', base.enqueue!, ['messages'], v)
    for (const v of BADNAME) set('enqueue', base.enqueue!, ['producerId'], v)
    for (const v of BADNUM.filter((x) => x !== 0)) set('enqueue', base.enqueue!, ['producerSeq'], v)
    for (const v of [...BADNUM.filter((x) => x !== 0), 5]) set('enqueue', base.enqueue!, ['producerBase'], v)
    for (const v of BADNAME) set('lease', base.lease!, ['consumerId'], v)
    for (const v of BADNAME) set('lease', base.lease!, ['attempt'], v)
    for (const v of [...BADNUM, 11]) set('lease', base.lease!, ['max'], v)
    for (const v of [...BADNUM, 1001]) set('lease', base.lease!, ['visibilityMs'], v)
    for (const v of BADNUM) set('lease', base.lease!, ['bytesMax'], v)
    for (const k of ['ack', 'nack', 'extend'])
      for (const v of [null, 'x', 5, {}, new Array(11).fill(lid)]) set(k, base[k]!, ['leaseIds'], v)
    for (const v of [...BADNUM.filter((x) => x !== 0 && x !== null), 1001])
      set('nack', base.nack!, ['delayMs'], v)
    for (const v of BADNAME) set('nack', base.nack!, ['attempt'], v)
    for (const v of [...BADNUM, 1001]) set('extend', base.extend!, ['visibilityMs'], v)
    for (const v of [...BADNUM.filter((x) => x !== 0), 11]) set('redriveDead', base.redriveDead!, ['max'], v)
    for (const v of BADNUM.filter((x) => x !== 0)) set('redriveDead', base.redriveDead!, ['through'], v)
    for (const v of [...BADNUM, 11]) set('purgeDead', base.purgeDead!, ['max'], v)
    for (const v of BADNUM.filter((x) => x !== 0)) set('purgeDead', base.purgeDead!, ['through'], v)
    for (const v of [...BADNUM.filter((x) => x !== 0), 2 ** 53 - 1])
      set('purgeDead', base.purgeDead!, ['after'], v)
    for (const v of [...BADNUM, 11]) set('purgeReady', base.purgeReady!, ['max'], v)
    for (const f of [
      'maxDeliveries',
      'dedupWindowMs',
      'queueMessagesMax',
      'shareWindowLeases',
      'messageTtlMs',
      'configVersion',
      'orderedKeys',
      'retryBackoffMinMs',
      'nope',
    ])
      for (const v of BADNUM.filter(
        (x) => x !== 0 || ['maxDeliveries', 'queueMessagesMax', 'shareWindowLeases', 'nope'].includes(f),
      ))
        set('configure', base.configure!, ['config', f], v)
    for (const v of [null, 5, 'x']) set('configure', base.configure!, ['config'], v)
    set('configure', base.configure!, ['config', 'scheduling'], 'nope')
    set('tick', { type: 'tick' }, ['type'], 'nope')
    const problems: string[] = []
    const span = partitionKeySpan(PREFIX)
    const before = await engine.range(span)
    const stats = await p.stats(now)
    for (const [name, cmd] of variants) {
      let a: Applied
      try {
        a = await p.apply(cmd, now)
      } catch (e) {
        problems.push(`${name}: threw ${String(e)}`)
        continue
      }
      if (a.result.type !== 'rejected') problems.push(`${name}: accepted ${JSON.stringify(a.result)}`)
      else if (a.result.error.code !== 'INVALID_ARGUMENT') problems.push(`${name}: ${a.result.error.code}`)
      if (a.ops.length > 1) problems.push(`${name}: ${a.ops.length} ops`)
      await engine.write(a.ops as BatchOp[], { sync: false })
      if (JSON.stringify(await engine.range(span)) !== JSON.stringify(before)) {
        problems.push(`${name}: engine changed`)
        break
      }
      p.release(a.generation)
      if (JSON.stringify(await p.stats(now)) !== JSON.stringify(stats))
        problems.push(`${name}: stats changed`)
    }
    expect(await engine.range(span)).toEqual(before)
    // base commands are valid
    for (const [k, c] of Object.entries(base)) {
      const a = await p.apply(c, now)
      if (a.result.type === 'rejected') problems.push(`base ${k} rejected: ${a.result.error.message}`)
      await engine.write(a.ops as BatchOp[], { sync: false })
      p.release(a.generation)
    }
    expect(variants.length).toBeGreaterThan(300)
    expect(problems).toEqual([])
  })
})
