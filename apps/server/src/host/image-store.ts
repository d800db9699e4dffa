import { randomInt } from 'node:crypto'
import { compareKeys, type EngineSnapshot, stateMachineRange } from '@mq/kv-storage'
import { encodeImageHandle } from './image-handle'
import { type KeySpan, type Pair, readPage } from './key-pages'

/** An image unread for this long is closed (an open engine snapshot pins old data on disk). */
export const IMAGE_IDLE_MS = 60_000
/** Images open at once on a node; the least recently read is closed beyond it. */
export const IMAGES_MAX = 16
/** The most a page may hold (bytes of keys and values), whatever the caller asks. */
export const IMAGE_PAGE_BYTES_MAX = 4 * 1024 * 1024
/** Keys per page at most. */
export const IMAGE_PAGE_KEYS_MAX = 65_536

interface Image {
  readonly groupId: number
  readonly index: number
  readonly snapshot: EngineSnapshot
  readonly garbage: readonly KeySpan[]
  lastUsedMs: number
}

/**
 * The images this node made for its data groups' followers (the leader side of
 * image-handle.ts): each an engine snapshot of one group's state-machine keys at the image's
 * index, read a page at a time by followers, and closed when unread for `idleMs`, or when
 * more than `imagesMax` are open (the least recently read first). A follower asking for a
 * closed image gets `undefined` (NOT_FOUND): the group's leader then makes a new one.
 */
export class ImageStore {
  /** Counters since start: images taken, pages and bytes served, asks for an image not held. */
  readonly stats = { taken: 0, pagesServed: 0, bytesServed: 0, notHeld: 0 }
  readonly #images = new Map<number, Image>()
  readonly #engine: { snapshot(): Promise<EngineSnapshot> }
  readonly #idleMs: number
  readonly #imagesMax: number
  readonly #now: () => number

  constructor(
    engine: { snapshot(): Promise<EngineSnapshot> },
    options: { idleMs?: number; imagesMax?: number; now?: () => number } = {},
  ) {
    this.#engine = engine
    this.#idleMs = options.idleMs ?? IMAGE_IDLE_MS
    this.#imagesMax = options.imagesMax ?? IMAGES_MAX
    // Monotonic: a wall clock stepped back kept images open (their engine snapshots pinning old
    // data on disk) for the step, and one stepped forward closed those being read.
    this.#now = options.now ?? (() => performance.now())
  }

  /** Images open now. */
  get size(): number {
    return this.#images.size
  }

  /**
   * Takes an image of group `groupId` as the engine holds it now (the caller makes sure that
   * is the state of `index`: every earlier write stored, no later one yet), leaving out the
   * `garbage` ranges (dropped partitions being swept). Returns its handle.
   */
  async take(groupId: number, index: number, garbage: readonly KeySpan[]): Promise<Uint8Array> {
    const snapshot = await this.#engine.snapshot()
    let imageId = randomInt(1, 2 ** 47)
    while (this.#images.has(imageId)) imageId = randomInt(1, 2 ** 47)
    this.#images.set(imageId, { groupId, index, snapshot, garbage: [...garbage], lastUsedMs: this.#now() })
    this.stats.taken++
    await this.sweep()
    return encodeImageHandle({ groupId, imageId, index })
  }

  /**
   * The page of image `imageId` (of group `groupId`) after key `after` (the first page when
   * undefined): at most `maxBytes` (capped at IMAGE_PAGE_BYTES_MAX) give or take a few values.
   * Undefined when this node has no such image (closed, never made here, or another group's).
   */
  async page(
    groupId: number,
    imageId: number,
    after: Uint8Array | undefined,
    maxBytes: number,
  ): Promise<{ pairs: Pair[]; done: boolean } | undefined> {
    const image = this.#images.get(imageId)
    if (!image || image.groupId !== groupId) {
      this.stats.notHeld++
      return undefined
    }
    image.lastUsedMs = this.#now()
    // Most recently read last: the eviction below closes from the front.
    this.#images.delete(imageId)
    this.#images.set(imageId, image)
    const { gte, lt } = stateMachineRange(groupId)
    const bytes = Math.max(1, Math.min(maxBytes, IMAGE_PAGE_BYTES_MAX))
    // An `after` outside the group's range (a peer's bad or hostile ask) reads from its start,
    // never other groups' keys (an audit: one below it served them).
    const from = after && compareKeys(after, gte) >= 0 ? { gt: after } : { gte }
    const { pairs, next } = await readPage(image.snapshot, from, lt, {
      keys: IMAGE_PAGE_KEYS_MAX,
      bytes,
      skip: image.garbage,
    })
    this.stats.pagesServed++
    for (const [k, v] of pairs) this.stats.bytesServed += k.length + v.length
    return { pairs, done: next === undefined }
  }

  /** The index of open image `imageId` of group `groupId` (undefined: not held). */
  indexOf(groupId: number, imageId: number): number | undefined {
    const image = this.#images.get(imageId)
    return image?.groupId === groupId ? image.index : undefined
  }

  /** Closes the images unread for `idleMs`, and the least recently read beyond `imagesMax`. */
  async sweep(): Promise<void> {
    const now = this.#now()
    const closing: Image[] = []
    for (const [id, image] of this.#images) {
      // Deleted as it goes: `size` counts the images still open.
      if (now - image.lastUsedMs >= this.#idleMs || this.#images.size > this.#imagesMax) {
        closing.push(image)
        this.#images.delete(id)
      }
    }
    await Promise.all(closing.map((image) => image.snapshot.close().catch(() => {})))
  }

  /** Closes every image of group `groupId` (it left this node), or every image at all. */
  async close(groupId?: number): Promise<void> {
    const closing: Image[] = []
    for (const [id, image] of this.#images) {
      if (groupId !== undefined && image.groupId !== groupId) continue
      closing.push(image)
      this.#images.delete(id)
    }
    await Promise.all(closing.map((image) => image.snapshot.close().catch(() => {})))
  }
}
