import {
  appendBytes,
  type BatchOp,
  compareKeys,
  inRange,
  type KvReader,
  stagedImageKey,
  stagedImageRange,
  stateMachineRange,
} from '@mq/kv-storage'
import { type Message, MessageType } from '@mq/raft-core'
import { decodeIndex, encodeIndex } from './data-machine'
import { decodeImageHandle, type ImageHandle } from './image-handle'
import { deletePages, type KeySpan, type PageLimits, type Pair, readPage, type Start } from './key-pages'

/** Bytes a follower asks for per FetchImage page. */
export const FETCH_PAGE_BYTES = 1024 * 1024
/** Image fetches under way at once on a node; a Snap message beyond it waits for the leader's next try. */
export const FETCHES_MAX = 2
/** Pages of one fetch at most (a bound on a leader that never says done): 1 TiB of 1 MiB pages. */
export const FETCH_PAGES_MAX = 1 << 20
/** Keys deleted per write when staged images are discarded. */
const DISCARD_PAGE_KEYS = 4096

/** What the stager needs from its node. */
export interface StagerDeps {
  /** The node's engine (staged keys are read back from it). */
  readonly reader: KvReader
  /** Durable writes (the node's group commit). */
  write(ops: readonly BatchOp[]): Promise<void>
  /** Peer.FetchImage to `nodeId`: a page of image `imageId` after `after`. */
  fetch(
    nodeId: string,
    request: { groupId: number; imageId: number; after: Uint8Array | undefined; maxBytes: number },
  ): Promise<{ pairs: Pair[]; done: boolean }>
  /** Hands a Snap message (its image now staged) to the group's Raft replica. */
  deliver(groupId: number, message: Message): void
  /** Reports a fetch that failed (it is tried again at the leader's next try). */
  onError?(groupId: number, error: unknown): void
  /** Reports an image staged whole (its keys and bytes fetched by this run, and how long it took). */
  onStaged?(
    groupId: number,
    staged: { imageId: number; index: number; keys: number; bytes: number; ms: number },
  ): void
}

interface Fetch {
  readonly handle: ImageHandle
  /** The latest Snap message carrying the handle, and who sent it. */
  message: Message
  from: string
  /** The last key staged (the fetch resumes after it if it stops). */
  after: Uint8Array | undefined
  running: boolean
  done: boolean
  /** A partial image of an earlier fetch of the group, deleted before this one starts. */
  abandoned?: number
}

/** (1, g, 17, imageId, 0): the image's index, written with its last page (so: complete). */
const completeKey = (groupId: number, imageId: number) => stagedImageKey(groupId, [imageId, 0])
/** (1, g, 17, imageId, 1) ‖ key: one staged key of the image. */
const pairsPrefix = (groupId: number, imageId: number) => stagedImageKey(groupId, [imageId, 1])

/**
 * The follower side of image-handle.ts. A Snap message whose data is an image handle is held
 * back from the group's Raft replica until the image is staged on disk: its pages are fetched
 * from the node that sent it (Peer.FetchImage, `FETCH_PAGE_BYTES` each) and written under the
 * group's staged-image keys, then the message is delivered; the replica installs the snapshot
 * and the state machine copies the staged keys in (`page`); once installed, that image and any
 * older one are deleted (`installed`). Each image is staged under its own id, so a fetch of a
 * newer image never touches one that is about to be installed, nor does an install delete a
 * newer one the replica took meanwhile (it did, until a fault run showed it: "the snapshot at
 * 1786 names image …, which is not staged here"). Copies of the leader's later tries while a
 * fetch runs are dropped; a fetch that fails stops (the leader tries again at its next
 * heartbeat's reply, and the fetch resumes after the last page staged); at most
 * `FETCHES_MAX` fetches run at once.
 *
 * Bounds: one page in memory per fetch; on disk, the images staged for a group until one is
 * installed (usually one; `installed`, and `discard` at the group's removal and at start).
 */
export class ImageStager {
  /** Counters since start: images staged whole, pages and bytes fetched, fetches that failed. */
  readonly stats = { staged: 0, pagesFetched: 0, bytesFetched: 0, failed: 0 }
  readonly #deps: StagerDeps
  /** The fetch per group (running, failed, or done and not yet discarded). */
  readonly #fetches = new Map<number, Fetch>()
  /**
   * The images staged whole per group (image id → index), until discarded: several may be,
   * and the replica may take a second snapshot while it installs the first.
   */
  readonly #complete = new Map<number, Map<number, number>>()
  #running = 0
  #stopped = false

  constructor(deps: StagerDeps) {
    this.#deps = deps
  }

  /** Fetches running now. */
  get running(): number {
    return this.#running
  }

  /**
   * A Raft message for `groupId` sent by `fromNode`: true when it can go to the replica now
   * (not a Snap message carrying an image handle, or its image is staged already); false
   * when it is held (its image is being fetched, and it is delivered once staged) or dropped.
   */
  offer(groupId: number, message: Message, fromNode: string): boolean {
    const chunk = message.type === MessageType.Snap ? message.snapshot : null
    // A handle is small: always one whole chunk at offset 0.
    if (chunk?.offset !== 0 || chunk.data.length !== chunk.totalBytes) return true
    const handle = decodeImageHandle(chunk.data)
    if (!handle) return true
    if (this.#stopped || handle.groupId !== groupId || handle.index !== chunk.meta.index) return false
    if (this.#complete.get(groupId)?.has(handle.imageId)) return true
    const current = this.#fetches.get(groupId)
    let fetch = current
    if (current?.handle.imageId === handle.imageId) {
      if (current.done) return true
      current.message = message
      current.from = fromNode
    } else {
      // Another image (a new leader's, or a fresh one): it replaces the fetch under way, which
      // stops after its page and deletes what it staged; one that had stopped is deleted
      // before the new one starts. A complete one stays (it may be about to be installed).
      fetch = { handle, message, from: fromNode, after: undefined, running: false, done: false }
      if (current && !current.done && !current.running) fetch.abandoned = current.handle.imageId
      this.#fetches.set(groupId, fetch)
    }
    if (fetch && !fetch.running && this.#running < FETCHES_MAX) this.#start(groupId, fetch)
    return false
  }

  /** Whether image `imageId` of `groupId` is staged whole, with `index`. */
  async staged(groupId: number, imageId: number, index: number): Promise<boolean> {
    const value = await this.#deps.reader.get(completeKey(groupId, imageId))
    return value !== undefined && decodeIndex(value) === index
  }

  /**
   * A page of staged image `imageId` of `groupId`, under the group's own keys (the image's
   * keys as the leader read them), from `from` (a key of that image, or its start).
   */
  async page(
    groupId: number,
    imageId: number,
    from: Start | undefined,
    limits: PageLimits,
  ): Promise<{ pairs: Pair[]; next: Start | undefined }> {
    const prefix = pairsPrefix(groupId, imageId)
    const { gte, lt } = stagedImageRange(groupId, [imageId, 1])
    const at: Start =
      from === undefined
        ? { gte }
        : 'gt' in from
          ? { gt: appendBytes(prefix, from.gt) }
          : { gte: appendBytes(prefix, from.gte) }
    const { pairs, next } = await readPage(this.#deps.reader, at, lt, limits)
    const strip = (key: Uint8Array) => key.subarray(prefix.length)
    return {
      pairs: pairs.map(([k, v]) => [strip(k), v] as const),
      next: next === undefined ? undefined : 'gt' in next ? { gt: strip(next.gt) } : { gte: strip(next.gte) },
    }
  }

  /**
   * An image of `groupId` at `index` was installed: deletes the staged images at or below it
   * (none of them can be installed any more) and keeps the later ones (the replica may have
   * taken one of them already, to install next). Paged writes.
   */
  async installed(groupId: number, index: number): Promise<void> {
    const complete = this.#complete.get(groupId)
    for (const [imageId, at] of [...(complete ?? [])]) {
      if (at > index) continue
      complete?.delete(imageId)
      const current = this.#fetches.get(groupId)
      if (current?.handle.imageId === imageId) this.#fetches.delete(groupId)
      await this.#deleteRange(stagedImageRange(groupId, [imageId]))
    }
  }

  /** Deletes every staged image of `groupId` (the group left this node, or the node starts). */
  async discard(groupId: number): Promise<void> {
    this.forget(groupId)
    await this.#deleteRange(stagedImageRange(groupId))
  }

  /** Stops the fetch of a group that left this node (its staged keys go with the group). */
  forget(groupId: number): void {
    this.#fetches.delete(groupId)
    this.#complete.delete(groupId)
  }

  /** Stops every fetch after its current page (the node is stopping). */
  stop(): void {
    this.#stopped = true
  }

  #start(groupId: number, fetch: Fetch): void {
    fetch.running = true
    this.#running++
    void this.#run(groupId, fetch)
      .catch((error: unknown) => {
        this.stats.failed++
        this.#deps.onError?.(groupId, error)
      })
      .finally(() => {
        fetch.running = false
        this.#running--
      })
  }

  async #run(groupId: number, fetch: Fetch): Promise<void> {
    const { imageId, index } = fetch.handle
    if (fetch.abandoned !== undefined) {
      await this.#deleteRange(stagedImageRange(groupId, [fetch.abandoned]))
      fetch.abandoned = undefined
    }
    const own = stateMachineRange(groupId)
    const prefix = pairsPrefix(groupId, imageId)
    const startedMs = Date.now()
    let keys = 0
    let bytes = 0
    for (let pages = 0; pages < FETCH_PAGES_MAX; pages++) {
      if (this.#fetches.get(groupId) !== fetch) {
        // Replaced by another image's fetch, or the group left: what this one staged goes.
        await this.#deleteRange(stagedImageRange(groupId, [imageId]))
        return
      }
      if (this.#stopped) return
      const page = await this.#deps.fetch(fetch.from, {
        groupId,
        imageId,
        after: fetch.after,
        maxBytes: FETCH_PAGE_BYTES,
      })
      const ops: BatchOp[] = []
      let last = fetch.after
      for (const [key, value] of page.pairs) {
        if (!inRange(key, own) || (last !== undefined && compareKeys(key, last) <= 0)) {
          throw new Error(
            `image ${imageId} of group ${groupId} from ${fetch.from}: a page holds a key out of order or outside the group`,
          )
        }
        ops.push({ type: 'put', key: appendBytes(prefix, key), value })
        last = key
        keys++
        bytes += key.length + value.length
        this.stats.bytesFetched += key.length + value.length
      }
      if (page.done) ops.push({ type: 'put', key: completeKey(groupId, imageId), value: encodeIndex(index) })
      // Replaced or the group left while the page came: nothing written (the group's removal
      // may have cleared its range meanwhile, and a key written after would outlive it).
      if (this.#stopped || this.#fetches.get(groupId) !== fetch) continue
      if (ops.length > 0) await this.#deps.write(ops)
      fetch.after = last
      this.stats.pagesFetched++
      if (page.done) {
        fetch.done = true
        let complete = this.#complete.get(groupId)
        if (!complete) {
          complete = new Map()
          this.#complete.set(groupId, complete)
        }
        complete.set(imageId, index)
        this.stats.staged++
        this.#deps.onStaged?.(groupId, { imageId, index, keys, bytes, ms: Date.now() - startedMs })
        if (!this.#stopped && this.#fetches.get(groupId) === fetch) this.#deps.deliver(groupId, fetch.message)
        return
      }
      if (page.pairs.length === 0)
        throw new Error(`image ${imageId} of group ${groupId}: an empty page before the end`)
    }
    throw new Error(`image ${imageId} of group ${groupId}: more than ${FETCH_PAGES_MAX} pages`)
  }

  /** Deletes the keys of `range`, a page per write. */
  #deleteRange(range: KeySpan): Promise<void> {
    return deletePages(this.#deps.reader, (ops) => this.#deps.write(ops), range, DISCARD_PAGE_KEYS)
  }
}
