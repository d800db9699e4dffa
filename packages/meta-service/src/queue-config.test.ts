import { describe, expect, it } from 'vitest'
import {
  applyQueueConfigUpdate,
  QUEUE_DEFAULTS,
  RETRY_BACKOFF_MAX_DEFAULT_MS,
  resolveQueueConfig,
} from './queue-config'

describe('resolveQueueConfig', () => {
  it('fills defaults for unset fields', () => {
    expect(resolveQueueConfig({})).toEqual(QUEUE_DEFAULTS)
    expect(resolveQueueConfig({ partitions: 8, maxDeliveries: 3 })).toMatchObject({
      partitions: 8,
      maxDeliveries: 3,
    })
  })
  it('says which value is out of bounds', () => {
    expect(resolveQueueConfig({ partitions: 257 })).toBe(
      'partitions must be an integer from 1 to 256, got 257',
    )
    expect(resolveQueueConfig({ visibilityTimeoutMs: 5 })).toMatch(/visibilityTimeoutMs must be/)
    expect(resolveQueueConfig({ engine: 'rocks' })).toMatch(/engine "rocks" is unknown/)
    expect(resolveQueueConfig({ messageTtlMs: 366 * 24 * 3600_000 })).toMatch(
      /messageTtlMs must be an integer from 0 to 31536000000/,
    )
    expect(resolveQueueConfig({ messageTtlMs: 90_000 })).toMatchObject({ messageTtlMs: 90_000 })
  })
})

describe('applyQueueConfigUpdate', () => {
  it('changes only the fields that are set', () => {
    const next = applyQueueConfigUpdate(QUEUE_DEFAULTS, { maxDeliveries: 9 })
    expect(next).toEqual({ ...QUEUE_DEFAULTS, maxDeliveries: 9 })
    const paused = applyQueueConfigUpdate(QUEUE_DEFAULTS, { paused: true })
    expect(paused).toEqual({ ...QUEUE_DEFAULTS, paused: true })
    expect(applyQueueConfigUpdate(paused as typeof QUEUE_DEFAULTS, { paused: false })).toEqual(QUEUE_DEFAULTS)
  })
  it('rejects an out-of-bounds update', () => {
    expect(applyQueueConfigUpdate(QUEUE_DEFAULTS, { maxDeliveries: 0 })).toMatch(/maxDeliveries/)
    expect(applyQueueConfigUpdate(QUEUE_DEFAULTS, { messageTtlMs: -1 })).toMatch(/messageTtlMs/)
    expect(applyQueueConfigUpdate({ ...QUEUE_DEFAULTS, messageTtlMs: 5 }, { messageTtlMs: 0 })).toMatchObject(
      {
        messageTtlMs: 0,
      },
    )
  })
})

describe('ordered keys', () => {
  it('is off by default, set at creation, and must be a boolean', () => {
    expect(QUEUE_DEFAULTS.orderedKeys).toBe(false)
    expect(resolveQueueConfig({ orderedKeys: true })).toMatchObject({ orderedKeys: true })
    expect(resolveQueueConfig({ orderedKeys: 'yes' as unknown as boolean })).toBe(
      'orderedKeys must be true or false, got yes',
    )
  })
  it("keeps an ordered queue's partition count: other settings change, partitions do not", () => {
    const ordered = { ...QUEUE_DEFAULTS, orderedKeys: true }
    expect(applyQueueConfigUpdate(ordered, { partitions: 8 })).toMatch(
      /the queue orders its keys, so its partition count stays 4: with more partitions a key's next messages would go to another partition/,
    )
    expect(applyQueueConfigUpdate(ordered, { partitions: 4, maxDeliveries: 2 })).toEqual({
      ...ordered,
      maxDeliveries: 2,
    })
    expect(applyQueueConfigUpdate(QUEUE_DEFAULTS, { partitions: 8 })).toMatchObject({ partitions: 8 })
  })
})

describe('delivery rate', () => {
  it('is off by default, bounded, and changed by an update like any setting', () => {
    expect(QUEUE_DEFAULTS.deliveryRate).toBe(0)
    expect(resolveQueueConfig({ deliveryRate: 1_000_001 })).toBe(
      'deliveryRate must be an integer from 0 to 1000000, got 1000001',
    )
    const limited = applyQueueConfigUpdate(QUEUE_DEFAULTS, { deliveryRate: 50 })
    expect(limited).toEqual({ ...QUEUE_DEFAULTS, deliveryRate: 50 })
    expect(applyQueueConfigUpdate(limited as typeof QUEUE_DEFAULTS, { deliveryRate: 0 })).toEqual(
      QUEUE_DEFAULTS,
    )
  })
})

describe('retry backoff', () => {
  it('is off by default; a minimum alone gets a 10-minute maximum (or the minimum, if longer)', () => {
    expect(QUEUE_DEFAULTS).toMatchObject({ retryBackoffMinMs: 0, retryBackoffMaxMs: 0 })
    expect(resolveQueueConfig({ retryBackoffMinMs: 2_000 })).toMatchObject({
      retryBackoffMinMs: 2_000,
      retryBackoffMaxMs: RETRY_BACKOFF_MAX_DEFAULT_MS,
    })
    expect(resolveQueueConfig({ retryBackoffMinMs: 3_600_000 })).toMatchObject({
      retryBackoffMaxMs: 3_600_000,
    })
    expect(applyQueueConfigUpdate(QUEUE_DEFAULTS, { retryBackoffMinMs: 500 })).toMatchObject({
      retryBackoffMinMs: 500,
      retryBackoffMaxMs: RETRY_BACKOFF_MAX_DEFAULT_MS,
    })
  })

  it('raises a maximum below a new minimum when the update gives none; refuses one it gives', () => {
    const filled = resolveQueueConfig({ retryBackoffMinMs: 1_000 }) as typeof QUEUE_DEFAULTS
    expect(filled.retryBackoffMaxMs).toBe(RETRY_BACKOFF_MAX_DEFAULT_MS)
    expect(applyQueueConfigUpdate(filled, { retryBackoffMinMs: 900_000 })).toMatchObject({
      retryBackoffMinMs: 900_000,
      retryBackoffMaxMs: 900_000,
    })
    expect(applyQueueConfigUpdate(filled, { retryBackoffMinMs: 2_000 })).toMatchObject({
      retryBackoffMaxMs: RETRY_BACKOFF_MAX_DEFAULT_MS,
    })
    expect(applyQueueConfigUpdate(filled, { retryBackoffMinMs: 900_000, retryBackoffMaxMs: 60_000 })).toMatch(
      /retryBackoffMaxMs \(60000\) is below retryBackoffMinMs \(900000\)/,
    )
    expect(applyQueueConfigUpdate(filled, { retryBackoffMaxMs: 500 })).toMatch(/is below retryBackoffMinMs/)
  })

  it('refuses a maximum below the minimum and bounds past a day; turning it off keeps the maximum', () => {
    expect(resolveQueueConfig({ retryBackoffMinMs: 5_000, retryBackoffMaxMs: 1_000 })).toBe(
      'retryBackoffMaxMs (1000) is below retryBackoffMinMs (5000); set the longest backoff at least as long as the shortest',
    )
    expect(resolveQueueConfig({ retryBackoffMinMs: 86_400_001 })).toMatch(
      /^retryBackoffMinMs must be an integer from 0 to 86400000, got 86400001/,
    )
    const on = applyQueueConfigUpdate(QUEUE_DEFAULTS, { retryBackoffMinMs: 100, retryBackoffMaxMs: 900 })
    expect(on).toMatchObject({ retryBackoffMinMs: 100, retryBackoffMaxMs: 900 })
    expect(applyQueueConfigUpdate(on as typeof QUEUE_DEFAULTS, { retryBackoffMinMs: 0 })).toMatchObject({
      retryBackoffMinMs: 0,
      retryBackoffMaxMs: 900,
    })
  })
})
