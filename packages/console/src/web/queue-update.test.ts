import { describe, expect, it } from 'vitest'
import type { QueueConfigInfo } from '../api-types'
import { changedSettings, UPDATE_FORM_KEYS, type UpdateFormKey } from './queue-update'

const drawn: QueueConfigInfo = {
  partitions: 4,
  visibilityTimeoutMs: 30_000,
  maxDeliveries: 5,
  deadLetterQueue: '',
  messageBytesMax: 0,
  queueLengthMax: 10_000,
  strictPriority: false,
  dedupWindowMs: 0,
  engine: 'leveldb',
  messageTtlMs: 60_000,
  paused: false,
  orderedKeys: false,
  deliveryRate: 0,
  retryBackoffMinMs: 0,
  retryBackoffMaxMs: 0,
}

/** The form's fields as drawn from `drawn`, with `edits` typed over them. */
function fields(edits: Partial<Record<UpdateFormKey, string>> = {}): Record<UpdateFormKey, string> {
  const asDrawn = Object.fromEntries(UPDATE_FORM_KEYS.map((k) => [k, String(drawn[k])]))
  return { ...asDrawn, ...edits } as Record<UpdateFormKey, string>
}

describe('changedSettings', () => {
  it('sends nothing for a form left as drawn', () => {
    expect(changedSettings(drawn, fields())).toEqual({})
  })

  it('sends only the fields changed, so a setting changed elsewhere since is not undone', () => {
    expect(changedSettings(drawn, fields({ maxDeliveries: '8' }))).toEqual({ maxDeliveries: 8 })
    expect(changedSettings(drawn, fields({ messageTtlMs: '0', deliveryRate: ' 25 ' }))).toEqual({
      messageTtlMs: 0,
      deliveryRate: 25,
    })
  })

  it('takes an emptied field as unchanged, not as 0', () => {
    expect(changedSettings(drawn, fields({ visibilityTimeoutMs: '', queueLengthMax: ' ' }))).toEqual({})
  })
})
