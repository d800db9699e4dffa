import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { ByteWriter } from './bytes'
import {
  decodeProducer,
  encodeProducer,
  idRuns,
  PRODUCER_BATCHES_KEPT,
  type ProducerRecord,
  runIds,
} from './records'

describe('producer records', () => {
  it('round-trips up to PRODUCER_BATCHES_KEPT batches, ids in runs or not', () => {
    const batch = fc.record({
      seq: fc.nat(),
      ids: fc.array(fc.nat({ max: 2 ** 40 }), { minLength: 1, maxLength: 40 }),
    })
    fc.assert(
      fc.property(
        fc.array(batch, { minLength: 1, maxLength: PRODUCER_BATCHES_KEPT }),
        fc.nat(),
        (batches, expiresAtMs) => {
          const record: ProducerRecord = {
            batches: batches.map((b) => ({ seq: b.seq, runs: idRuns(b.ids) })),
            expiresAtMs,
          }
          const decoded = decodeProducer(encodeProducer(record))
          expect(decoded).toEqual(record)
          expect(decoded.batches.map((b) => runIds(b.runs))).toEqual(batches.map((b) => b.ids))
        },
      ),
    )
  })

  it('holds consecutive ids as one run: five batches of 512 take a few dozen bytes', () => {
    const batches = Array.from({ length: 5 }, (_, k) => ({
      seq: 100 + k,
      runs: idRuns(Array.from({ length: 512 }, (_, i) => 1_000_000 + k * 512 + i)),
    }))
    expect(batches.every((b) => b.runs.length === 2)).toBe(true)
    expect(encodeProducer({ batches, expiresAtMs: 1e12 }).length).toBeLessThan(60)
  })

  it('reads the first layout (one batch, its ids listed) as one batch', () => {
    const old = new ByteWriter(64, 1024).varint(7).varint(5000).varint(3).varint(10).varint(11).varint(13)
    expect(decodeProducer(old.finish())).toEqual({
      batches: [{ seq: 7, runs: [10, 2, 13, 1] }],
      expiresAtMs: 5000,
    })
  })
})
