import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  decodeChunk,
  decodeClockOffset,
  decodeEntry,
  decodeHardState,
  decodeLogStart,
  decodeSnapshotMeta,
  encodeChunk,
  encodeClockOffset,
  encodeEntry,
  encodeHardState,
  encodeLogStart,
  encodeSnapshotMeta,
  sealRecord,
} from './log-codec'

const hex = (u: Uint8Array) => Buffer.from(u).toString('hex')

describe('log record codec', () => {
  it('encodes an entry to the golden bytes', () => {
    const rec = encodeEntry({ index: 300, term: 2, type: 1, timestampMs: 5, data: Uint8Array.of(0xaa, 0xbb) })
    // crc32c | format 1 | type 1 | index 300 = ac 02 | term 2 | ts 5 | data
    expect(hex(rec.subarray(4))).toBe('0101ac020205aabb')
    expect(hex(rec.subarray(0, 4))).toBe('074794b4')
    expect(decodeEntry(rec)).toEqual({
      ok: true,
      value: { index: 300, term: 2, type: 1, timestampMs: 5, data: Uint8Array.of(0xaa, 0xbb) },
    })
  })

  it('round-trips every record kind', () => {
    fc.assert(
      fc.property(
        fc.nat({ max: Number.MAX_SAFE_INTEGER }),
        fc.nat({ max: Number.MAX_SAFE_INTEGER }),
        fc.uint8Array({ maxLength: 40 }),
        fc.string({ unit: 'grapheme' }),
        (a, b, data, s) => {
          const e = { index: a, term: b, type: 0 as const, timestampMs: a, data }
          expect(decodeEntry(encodeEntry(e))).toEqual({ ok: true, value: e })
          const hs = { term: a, vote: s, commit: b }
          expect(decodeHardState(encodeHardState(hs))).toEqual({ ok: true, value: hs })
          for (const ms of [a, -a, b - a]) {
            expect(decodeClockOffset(encodeClockOffset(ms))).toEqual({ ok: true, value: ms === 0 ? 0 : ms })
          }
          expect(decodeLogStart(encodeLogStart({ index: a, term: b }))).toEqual({
            ok: true,
            value: { index: a, term: b },
          })
          const meta = {
            meta: {
              index: a,
              term: b,
              conf: { voters: ['n1', 'n2'], learners: [], votersOutgoing: ['n9'], learnersNext: [] },
            },
            dataBytes: data.length,
            chunkCount: 1,
            dataCrc: 0xffffffff,
          }
          expect(decodeSnapshotMeta(encodeSnapshotMeta(meta))).toEqual({ ok: true, value: meta })
          // With the timestamp of its last entry (trailing: a record without it reads as before).
          const stamped = { ...meta, meta: { ...meta.meta, timestampMs: b } }
          expect(decodeSnapshotMeta(encodeSnapshotMeta(stamped))).toEqual({ ok: true, value: stamped })
          expect(decodeChunk(encodeChunk(data))).toEqual({ ok: true, value: data })
        },
      ),
    )
  })

  it('keeps a vote for an id that starts with U+FEFF (decode drops it by default)', () => {
    const hs = { term: 3, vote: '\uFEFFn1', commit: 2 }
    expect(decodeHardState(encodeHardState(hs))).toEqual({ ok: true, value: hs })
  })

  it('refuses a clock offset whose sign byte is neither 0 nor 1, or with bytes after it', () => {
    const rec = encodeClockOffset(-1234)
    expect(decodeClockOffset(rec)).toEqual({ ok: true, value: -1234 })
    const w = rec.slice()
    w[5] = 2 // the sign byte; then the checksum is made right again, so only the body is wrong
    const fixed = sealRecord(w)
    expect(decodeClockOffset(fixed)).toMatchObject({ ok: false, reason: /sign byte 2/ })
    expect(decodeClockOffset(sealRecord(concat(rec, new Uint8Array([0]))))).toMatchObject({ ok: false })
  })

  it('detects any single flipped bit, and truncation', () => {
    const rec = encodeEntry({
      index: 7,
      term: 3,
      type: 0,
      timestampMs: 1_700_000_000_000,
      data: new Uint8Array(20),
    })
    for (let bit = 0; bit < rec.length * 8; bit++) {
      const bad = rec.slice()
      bad[bit >> 3] = (bad[bit >> 3] as number) ^ (1 << (bit & 7))
      const d = decodeEntry(bad)
      expect(d.ok).toBe(false)
    }
    expect(decodeEntry(rec.subarray(0, 3))).toMatchObject({ ok: false, reason: /shorter than its header/ })
    expect(decodeEntry(rec.subarray(0, rec.length - 1))).toMatchObject({
      ok: false,
      reason: /checksum mismatch/,
    })
  })
})
function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length)
  out.set(a)
  out.set(b, a.length)
  return out
}
