import { InvalidArgumentError } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { checkedEntry, ENTRY_BYTES_MAX } from './entry-size'

describe('checkedEntry', () => {
  it('passes an entry up to ENTRY_BYTES_MAX and refuses a bigger one, saying how big it was', () => {
    const fits = new Uint8Array(ENTRY_BYTES_MAX)
    expect(checkedEntry(3, fits)).toBe(fits)
    const over = new Uint8Array(ENTRY_BYTES_MAX + 1)
    expect(() => checkedEntry(3, over)).toThrow(InvalidArgumentError)
    expect(() => checkedEntry(3, over)).toThrow(
      `the request makes a Raft entry of ${ENTRY_BYTES_MAX + 1} bytes for group 3, over the ${ENTRY_BYTES_MAX}-byte limit`,
    )
  })
})
