import { describe, expect, it } from 'vitest'
import { ProduceRequest } from './generated/mq/v1/queue'

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex')

describe('wire encoding (golden bytes)', () => {
  const request: ProduceRequest = {
    target: { queue: 'q', partition: 1, routeEpoch: 2 },
    producerId: 'p',
    sequence: 3,
    messages: [{ body: Uint8Array.of(0xaa), weight: 5, headers: {}, key: '', delayMs: 0, dedupKey: '' }],
  }

  it('encodes a ProduceRequest to the bytes protobuf specifies', () => {
    // target{queue="q",partition=1,route_epoch=2} producer_id="p" sequence=3 messages[{body=aa,weight=5}]
    expect(hex(ProduceRequest.encode(request).finish())).toBe('0a070a017110011802120170180322050a01aa1005')
  })

  it('decodes what it encodes', () => {
    expect(ProduceRequest.decode(ProduceRequest.encode(request).finish())).toEqual(request)
  })

  it('encodes 64-bit fields beyond 2^32 exactly', () => {
    const big = { ...request, sequence: 2 ** 40 + 7 }
    expect(ProduceRequest.decode(ProduceRequest.encode(big).finish()).sequence).toBe(2 ** 40 + 7)
  })
})
