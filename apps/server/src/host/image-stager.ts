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
  /**
   * The index the group's replica has applied (0 when not known): no image at or below it can
   * be installed any more (its Raft core takes no snapshot at or below its commit index).
   */
  applied?(groupId: number): number
  /**
   * Reports a fetch that failed (it is tried again at the leader's next try), or a deletion of
   * staged images that failed (tried again at the next sweep).
   */
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
 * and the state machine copies the staged keys in (`page`). Each image is staged under its own
 * id, so a fetch of a newer image never touches one that is about to be installed, nor does an
 * install delete a newer one the replica took meanwhile (it did, until a fault run showed it:
 * "the snapshot at 1786 names image …, which is not staged here"). Copies of the leader's
 * later tries while a fetch runs are dropped, and a Snap at or below what the replica applied
 * or installed fetches nothing (a late copy fetched the whole image again); a fetch that fails
 * stops (the leader tries again at its next heartbeat's reply, and the fetch resumes after the
 * last page staged); at most `FETCHES_MAX` fetches run at once.
 *
 * Bounds: one page in memory per fetch; on disk, per group, the image being fetched and the
 * complete ones the replica may still install (above what it applied or installed). Every
 * other staged image is deleted when a fetch starts, after each install and at each `sweep`
 * (until 2026-12-02 a fetch replaced while its call was pending, one replaced again before its
 * successor started, and a complete image the replica never took stayed until a restart or
 * the group's removal); a fetch replaced while it runs deletes its own pages once its page or
 * its failed call returns; all of them go with the group's removal (`forget`, then its range
 * clear) and when the group is opened (`discard`).
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
  /** The highest index installed per group (the replica's applied index may not show it yet). */
  readonly #installed = new Map<number, number>()
  /** Groups whose last pruning failed part way (the images it forgot may still be staged). */
  readonly #pruneAgain = new Set<number>()
  /** The page writes in flight per group (`forget` waits for them). */
  readonly #writes = new Map<number, Set<Promise<void>>>()
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
    // An image that can never be installed (a late copy of a Snap installed already, or the
    // replica caught up from the log): nothing to fetch, and the replica answers it with its
    // commit index, installing nothing (raft.ts, #handleSnapshotChunk).
    if (handle.index <= this.#floor(groupId)) return true
    if (this.#complete.get(groupId)?.has(handle.imageId)) return true
    const current = this.#fetches.get(groupId)
    let fetch = current
    if (current?.handle.imageId === handle.imageId) {
      if (current.done) return true
      current.message = message
      current.from = fromNode
    } else {
      // Another image (a new leader's, or a fresh one): it replaces the fetch under way, which
      // stops after its page and deletes what it staged; one that had stopped is deleted when
      // the new one starts (`#prune`). A complete one stays (it may be about to be installed).
      fetch = { handle, message, from: fromNode, after: undefined, running: false, done: false }
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
   * An image of `groupId` at `index` was installed: deletes every staged image of the group
   * but the one being fetched and the complete ones above `index` (the replica may have taken
   * one of them already, to install next). Paged writes. A deletion that fails is reported
   * (`onError`) and left to the next sweep: it holds no state, and failing the install over it
   * (a full group-commit queue, say) stopped the node.
   */
  async installed(groupId: number, index: number): Promise<void> {
    this.#installed.set(groupId, Math.max(index, this.#installed.get(groupId) ?? 0))
    await this.#prune(groupId).catch((error: unknown) => this.#deps.onError?.(groupId, error))
  }

  /**
   * Deletes the staged images that can no longer be installed of every group that has one at
   * or below what its replica applied: an image the replica passed by without installing it
   * (it had the entries already, or caught up from the log), or a stopped fetch's. A deletion
   * that fails is reported (`onError`) and tried again at the next sweep.
   */
  async sweep(): Promise<void> {
    const groups = new Set([...this.#complete.keys(), ...this.#fetches.keys(), ...this.#pruneAgain])
    for (const groupId of groups) {
      if (this.#stopped) return
      const floor = this.#floor(groupId)
      const indexes = [...(this.#complete.get(groupId)?.values() ?? [])]
      const current = this.#fetches.get(groupId)
      if (current) indexes.push(current.handle.index)
      if (!this.#pruneAgain.has(groupId) && !indexes.some((index) => index <= floor)) continue
      await this.#prune(groupId).catch((error: unknown) => this.#deps.onError?.(groupId, error))
    }
  }

  /** Deletes every staged image of `groupId` (the group left this node, or the node starts). */
  async discard(groupId: number): Promise<void> {
    await this.forget(groupId)
    await this.#deleteRange(stagedImageRange(groupId))
  }

  /**
   * Stops the fetch of a group that left this node (its staged keys go with the group: its
   * range clear, or `discard`). Resolves once none of its page writes is in flight: one
   * waiting for room in the group commit landed after a range clear staged meanwhile, and the
   * removed group was back on disk at the next start.
   */
  async forget(groupId: number): Promise<void> {
    this.#fetches.delete(groupId)
    this.#complete.delete(groupId)
    this.#installed.delete(groupId)
    await Promise.allSettled([...(this.#writes.get(groupId) ?? [])])
  }

  /** Stops every fetch after its current page (the node is stopping). */
  stop(): void {
    this.#stopped = true
  }

  #start(groupId: number, fetch: Fetch): void {
    fetch.running = true
    this.#running++
    void this.#run(groupId, fetch)
      .catch(async (error: unknown) => {
        this.stats.failed++
        this.#deps.onError?.(groupId, error)
        // Replaced while its call was pending, or the group left: no later try resumes it, so
        // what it staged goes now (it stayed until restart or the group's removal).
        if (!this.#stopped && this.#fetches.get(groupId) !== fetch)
          await this.#deleteStale(groupId, stagedImageRange(groupId, [fetch.handle.imageId]))
      })
      .catch((error: unknown) => this.#deps.onError?.(groupId, error))
      .finally(() => {
        fetch.running = false
        this.#running--
      })
  }

  async #run(groupId: number, fetch: Fetch): Promise<void> {
    const { imageId, index } = fetch.handle
    // A new image: the images it replaces go first (the partial ones of earlier fetches, and
    // complete ones the replica can no longer install).
    if (fetch.after === undefined) await this.#prune(groupId)
    const own = stateMachineRange(groupId)
    const prefix = pairsPrefix(groupId, imageId)
    const startedMs = Date.now()
    let keys = 0
    let bytes = 0
    for (let pages = 0; pages < FETCH_PAGES_MAX; pages++) {
      if (this.#fetches.get(groupId) !== fetch) {
        // Replaced by another image's fetch, or the group left: what this one staged goes.
        await this.#deleteStale(groupId, stagedImageRange(groupId, [imageId]))
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
      if (ops.length > 0) await this.#pageWrite(groupId, ops)
      fetch.after = last
      this.stats.pagesFetched++
      if (page.done) {
        // Replaced or the group left while the last page was written: deleted at the next turn.
        if (this.#fetches.get(groupId) !== fetch) continue
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

  /** The index at or below which no image of `groupId` can be installed any more. */
  #floor(groupId: number): number {
    return Math.max(this.#installed.get(groupId) ?? 0, this.#deps.applied?.(groupId) ?? 0)
  }

  /** The images of `groupId` still wanted: the one being fetched, the complete ones. */
  #wanted(groupId: number): number[] {
    const ids = [...(this.#complete.get(groupId)?.keys() ?? [])]
    const current = this.#fetches.get(groupId)
    if (current) ids.push(current.handle.imageId)
    return ids
  }

  /**
   * Deletes every staged image of `groupId` but the one being fetched and the complete ones
   * the replica may still install (above `#floor`); forgets the fetch and the complete images
   * at or below it (a running fetch then stops after its page and deletes its own).
   */
  async #prune(groupId: number): Promise<void> {
    // The images forgotten below are deleted after: a failure part way leaves the group to the
    // next sweep, which would not know of them otherwise.
    this.#pruneAgain.add(groupId)
    await this.#pruneOnce(groupId)
    this.#pruneAgain.delete(groupId)
  }

  async #pruneOnce(groupId: number): Promise<void> {
    const floor = this.#floor(groupId)
    const complete = this.#complete.get(groupId)
    for (const [imageId, at] of [...(complete ?? [])]) if (at <= floor) complete?.delete(imageId)
    if ((this.#fetches.get(groupId)?.handle.index ?? Number.POSITIVE_INFINITY) <= floor)
      this.#fetches.delete(groupId)
    // The gaps between the images kept, whatever they hold: the other images' ids are not known
    // here (a fetch replaced before it started, a failed one).
    const kept = this.#wanted(groupId)
      .map((imageId) => stagedImageRange(groupId, [imageId]))
      .sort((a, b) => compareKeys(a.gte, b.gte))
    const all = stagedImageRange(groupId)
    let gte = all.gte
    for (const span of [...kept, { gte: all.lt, lt: all.lt }]) {
      if (compareKeys(gte, span.gte) < 0) await this.#deleteStale(groupId, { gte, lt: span.gte })
      gte = span.lt
    }
  }

  /**
   * Deletes the staged keys of `groupId` in `range`, a page per write, but those of an image
   * wanted when its page is deleted: an image offered again meanwhile (a new fetch of it
   * writes its pages after, in the group commit's call order) keeps what it stages.
   */
  #deleteStale(groupId: number, range: KeySpan): Promise<void> {
    const spans = new Map<number, KeySpan>()
    const wanted = (key: Uint8Array) =>
      this.#wanted(groupId).some((imageId) => {
        let span = spans.get(imageId)
        if (!span) {
          span = stagedImageRange(groupId, [imageId])
          spans.set(imageId, span)
        }
        return inRange(key, span)
      })
    return deletePages(this.#deps.reader, (ops) => this.#deps.write(ops), range, DISCARD_PAGE_KEYS, wanted)
  }

  /** Deletes the keys of `range`, a page per write. */
  #deleteRange(range: KeySpan): Promise<void> {
    return deletePages(this.#deps.reader, (ops) => this.#deps.write(ops), range, DISCARD_PAGE_KEYS)
  }

  /** A page's write, counted in flight for its group until it lands (see `forget`). */
  #pageWrite(groupId: number, ops: readonly BatchOp[]): Promise<void> {
    const written = this.#deps.write(ops)
    const writes = this.#writes.get(groupId) ?? new Set<Promise<void>>()
    this.#writes.set(groupId, writes)
    writes.add(written)
    const landed = () => {
      writes.delete(written)
      if (writes.size === 0 && this.#writes.get(groupId) === writes) this.#writes.delete(groupId)
    }
    written.then(landed, landed)
    return written
  }
}
