import { MemoryEngine, stateMachineKey, stateMachineRange } from '@mq/kv-storage'
import { describe, expect, it, vi } from 'vitest'
import { decodeImageHandle } from './image-handle'
import { ImageStore } from './image-store'
import type { Pair } from './key-pages'

const key = (n: number) => stateMachineKey(1, ['k', n])

async function fill(engine: MemoryEngine, n: number, valueBytes: number): Promise<void> {
  await engine.write(
    Array.from({ length: n }, (_, i) => ({
      type: 'put' as const,
      key: key(i),
      value: new Uint8Array(valueBytes).fill(i % 251),
    })),
    { sync: false },
  )
}

async function readAll(store: ImageStore, imageId: number, maxBytes: number): Promise<Pair[][]> {
  const pages: Pair[][] = []
  let after: Uint8Array | undefined
  for (;;) {
    const page = await store.page(1, imageId, after, maxBytes)
    if (!page) throw new Error('gone')
    pages.push(page.pairs)
    if (page.done) return pages
    after = page.pairs.at(-1)?.[0]
  }
}

describe('ImageStore', () => {
  it('serves the state as it was when taken, a page at a time, bounded in bytes', async () => {
    const engine = new MemoryEngine()
    await fill(engine, 500, 1000)
    const store = new ImageStore(engine)
    const handle = decodeImageHandle(await store.take(1, 42, []))
    expect(handle).toMatchObject({ groupId: 1, index: 42 })
    const before = await engine.range(stateMachineRange(1))
    // Later writes do not reach the image.
    await engine.write(
      [
        { type: 'del', key: key(3) },
        { type: 'put', key: key(9999), value: Uint8Array.of(1) },
      ],
      { sync: false },
    )
    const pages = await readAll(store, handle?.imageId ?? 0, 100_000)
    expect(pages.flat()).toEqual(before)
    // ~100 kB per page: at most one value past it.
    for (const page of pages.slice(0, -1)) {
      const bytes = page.reduce((n, [k, v]) => n + k.length + v.length, 0)
      expect(bytes).toBeGreaterThanOrEqual(100_000)
      expect(bytes).toBeLessThan(100_000 + 1100)
    }
    expect(pages.length).toBeGreaterThanOrEqual(4)
  })

  it('passes a page bound by one value at most, with large values after small ones', async () => {
    // Small records, then 70 values of 1.1 MiB (message bodies), then small ones again: 64 of
    // the large ones in one engine call made a page of ~70 MiB, past the peers' message limit.
    const engine = new MemoryEngine()
    const sizes = [
      ...Array(100).fill(200),
      ...Array(70).fill(Math.floor(1.1 * 1024 * 1024)),
      ...Array(30).fill(200),
    ]
    await engine.write(
      sizes.map((n, i) => ({ type: 'put' as const, key: key(i), value: new Uint8Array(n).fill(i % 251) })),
      { sync: false },
    )
    const store = new ImageStore(engine)
    const handle = decodeImageHandle(await store.take(1, 42, []))
    const pages = await readAll(store, handle?.imageId ?? 0, 1 << 20)
    const largest = Math.max(...pages.map((page) => page.reduce((n, [k, v]) => n + k.length + v.length, 0)))
    expect(largest).toBeLessThan((1 << 20) + 1.2 * 1024 * 1024)
    expect(pages.flat()).toHaveLength(sizes.length)
  })

  it('leaves the garbage ranges out', async () => {
    const engine = new MemoryEngine()
    await fill(engine, 300, 10)
    const store = new ImageStore(engine)
    const garbage = { gte: key(100), lt: key(250) }
    const imageId = decodeImageHandle(await store.take(1, 1, [garbage]))?.imageId ?? 0
    const keys = (await readAll(store, imageId, 1_000)).flat().map(([k]) => k)
    expect(keys).toHaveLength(150)
    expect(keys.some((k) => Buffer.compare(k, garbage.gte) >= 0 && Buffer.compare(k, garbage.lt) < 0)).toBe(
      false,
    )
  })

  it("serves only its group's keys, whatever place a peer asks to read after", async () => {
    const engine = new MemoryEngine()
    await engine.write(
      [
        { type: 'put', key: stateMachineKey(1, ['secret', 1]), value: Uint8Array.of(7) },
        { type: 'put', key: stateMachineKey(2, ['k', 1]), value: Uint8Array.of(1) },
        { type: 'put', key: stateMachineKey(3, ['other', 1]), value: Uint8Array.of(9) },
      ],
      { sync: false },
    )
    const store = new ImageStore(engine)
    const imageId = decodeImageHandle(await store.take(2, 10, []))?.imageId ?? 0
    for (const after of [Uint8Array.of(0), stateMachineKey(1, ['secret', 1]), undefined]) {
      const page = await store.page(2, imageId, after, 1 << 20)
      expect(page?.pairs.map(([k]) => k)).toEqual([stateMachineKey(2, ['k', 1])])
    }
    expect((await store.page(2, imageId, stateMachineKey(3, []), 1 << 20))?.pairs).toEqual([])
  })

  it('answers undefined for an unknown image, another group, or one closed after its idle time', async () => {
    const engine = new MemoryEngine()
    await fill(engine, 10, 10)
    let now = 0
    const store = new ImageStore(engine, { idleMs: 1_000, now: () => now })
    const imageId = decodeImageHandle(await store.take(1, 1, []))?.imageId ?? 0
    expect(await store.page(1, imageId + 1, undefined, 1_000)).toBeUndefined()
    expect(await store.page(2, imageId, undefined, 1_000)).toBeUndefined()
    now = 900
    expect(await store.page(1, imageId, undefined, 1_000)).toBeDefined() // read: its idle time starts again
    now = 1_800
    await store.sweep()
    expect(store.size).toBe(1)
    now = 2_000
    await store.sweep()
    expect(store.size).toBe(0)
    expect(await store.page(1, imageId, undefined, 1_000)).toBeUndefined()
  })

  it('times idle images on a monotonic clock: a wall clock stepped back keeps none open past its idle time, one stepped forward closes none being read', async () => {
    const engine = new MemoryEngine()
    await fill(engine, 10, 10)
    let wall = 0
    let steady = 0
    const realDate = Date.now.bind(Date)
    const realSteady = performance.now.bind(performance)
    const dateNow = vi.spyOn(Date, 'now').mockImplementation(() => realDate() + wall)
    const steadyNow = vi.spyOn(performance, 'now').mockImplementation(() => realSteady() + steady)
    try {
      const store = new ImageStore(engine, { idleMs: 60_000 })
      const stepped = decodeImageHandle(await store.take(1, 1, []))?.imageId ?? 0
      // NTP steps the wall clock back an hour; two idle minutes later the image is closed (it
      // pinned the engine's old data on disk for the hour).
      wall = -3_600_000 + 120_000
      steady = 120_000
      await store.sweep()
      expect(store.size).toBe(0)
      expect(await store.page(1, stepped, undefined, 1_000)).toBeUndefined()
      // Stepped forward an hour, a second after its last read: the image being read stays.
      const read = decodeImageHandle(await store.take(1, 2, []))?.imageId ?? 0
      expect(await store.page(1, read, undefined, 1_000)).toBeDefined()
      wall += 3_600_000
      steady += 1_000
      await store.sweep()
      expect(store.size).toBe(1)
      expect(await store.page(1, read, undefined, 1_000)).toBeDefined()
    } finally {
      dateNow.mockRestore()
      steadyNow.mockRestore()
    }
  })

  it('keeps at most imagesMax open, closing the least recently read', async () => {
    const engine = new MemoryEngine()
    await fill(engine, 10, 10)
    const store = new ImageStore(engine, { imagesMax: 2 })
    const a = decodeImageHandle(await store.take(1, 1, []))?.imageId ?? 0
    const b = decodeImageHandle(await store.take(1, 2, []))?.imageId ?? 0
    await store.page(1, a, undefined, 10) // a read after b was taken
    const c = decodeImageHandle(await store.take(1, 3, []))?.imageId ?? 0
    expect(store.size).toBe(2)
    expect(await store.page(1, b, undefined, 10)).toBeUndefined()
    expect(await store.page(1, a, undefined, 10)).toBeDefined()
    expect(await store.page(1, c, undefined, 10)).toBeDefined()
    await store.close(1)
    expect(store.size).toBe(0)
  })
})
