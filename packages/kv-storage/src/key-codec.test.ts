import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { compareKeys, inRange } from './engine'
import { InvalidArgumentError } from './errors'
import {
  appendUint,
  compareTuples,
  decodeTuple,
  encodeTuple,
  prefixEnd,
  prefixRange,
  type TupleElement,
} from './key-codec'

const hex = (u: Uint8Array) => Buffer.from(u).toString('hex')
const sign = (n: number) => (n < 0 ? -1 : n > 0 ? 1 : 0)

const element: fc.Arbitrary<TupleElement> = fc.oneof(
  fc.nat({ max: Number.MAX_SAFE_INTEGER }),
  fc.constantFrom(0, 1, 255, 256, 65535, 65536, 2 ** 32 - 1, 2 ** 32, Number.MAX_SAFE_INTEGER),
  fc.string({ unit: 'binary', maxLength: 6 }),
  fc.constantFrom('', '\u0000', 'a', 'a\u0000', 'ab', '\uffff', '\u{10000}'),
  fc.uint8Array({ maxLength: 6 }),
  fc.constantFrom(Uint8Array.of(), Uint8Array.of(0), Uint8Array.of(0, 0xff), Uint8Array.of(0xff)),
)
const tuple = fc.array(element, { maxLength: 4 })

describe('key codec: golden bytes', () => {
  it.each([
    [[0], '20'],
    [[1], '2101'],
    [[255], '21ff'],
    [[256], '220100'],
    [[2 ** 32], '250100000000'],
    [[Number.MAX_SAFE_INTEGER], '271fffffffffffff'],
    [['a'], '406100'],
    [['a\u0000b'], '406100ff6200'],
    [[''], '4000'],
    [[Uint8Array.of(0, 1, 0xff)], '5000ff01ff00'],
    [[7, 'log', 42], '2107406c6f670021' + '2a'],
    [['é'], '40c3a900'],
  ] as [TupleElement[], string][])('%j encodes to %s', (t, bytes) => {
    expect(hex(encodeTuple(t))).toBe(bytes)
    expect(decodeTuple(Buffer.from(bytes, 'hex'))).toEqual(t)
  })
})

describe('key codec: properties', () => {
  it('decode(encode(t)) = t', () => {
    fc.assert(
      fc.property(tuple, (t) => {
        expect(decodeTuple(encodeTuple(t))).toEqual(t)
      }),
      { numRuns: 2000 },
    )
  })

  it('keeps a string that starts with U+FEFF (decode drops it by default)', () => {
    const t = ['\uFEFFa', '\uFEFF', 7]
    expect(decodeTuple(encodeTuple(t))).toEqual(t)
  })

  it('order is preserved: sign(compareKeys(enc a, enc b)) = sign(compareTuples(a, b))', () => {
    fc.assert(
      fc.property(tuple, tuple, (a, b) => {
        expect(sign(compareKeys(encodeTuple(a), encodeTuple(b)))).toBe(sign(compareTuples(a, b)))
      }),
      { numRuns: 5000 },
    )
  })

  it('appendUint(encode(t), n) = encode([...t, n])', () => {
    fc.assert(
      fc.property(tuple, fc.nat({ max: Number.MAX_SAFE_INTEGER }), (t, n) => {
        expect(hex(appendUint(encodeTuple(t), n))).toBe(hex(encodeTuple([...t, n])))
      }),
    )
  })

  it('prefixRange holds exactly the tuples that extend the prefix', () => {
    fc.assert(
      fc.property(tuple, tuple, (prefix, other) => {
        const range = prefixRange(prefix)
        expect(inRange(encodeTuple([...prefix, ...other]), range)).toBe(true)
        const extends_ =
          other.length >= prefix.length && compareTuples(other.slice(0, prefix.length), prefix) === 0
        expect(inRange(encodeTuple(other), range)).toBe(extends_)
      }),
      { numRuns: 3000 },
    )
  })
})

describe('key codec: bad input', () => {
  it('rejects what it cannot encode', () => {
    for (const bad of [-1, 1.5, Number.MAX_SAFE_INTEGER + 1, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => encodeTuple([bad])).toThrow(InvalidArgumentError)
    }
    expect(() => encodeTuple(['\ud800'])).toThrow(/lone surrogate/)
    expect(() => encodeTuple([true as unknown as number])).toThrow(InvalidArgumentError)
  })

  it.each([
    ['unknown tag', '99'],
    ['truncated integer', '2201'],
    ['non-canonical integer', '2100'],
    ['unterminated string', '4061'],
    ['bad UTF-8', '40ff00'],
    ['integer above the safe range', '2720000000000000'],
  ])('rejects a key with %s', (_why, bytes) => {
    expect(() => decodeTuple(Buffer.from(bytes, 'hex'))).toThrow(InvalidArgumentError)
  })

  it('prefixEnd skips trailing 0xff and has no end for all-0xff', () => {
    expect(hex(prefixEnd(Uint8Array.of(1, 0xff, 0xff)) as Uint8Array)).toBe('02')
    expect(prefixEnd(Uint8Array.of(0xff))).toBeUndefined()
  })
})
