import { decodePairs, encodePairs } from '@mq/data-service'
import { type BatchOp, ClosedError, type Engine } from '@mq/kv-storage'
import {
  type FetchImageRequest,
  type FetchImageResponse,
  PermissionDeniedError,
  UnavailableError,
} from '@mq/protocol'
import { type Message, type RaftHost, Role } from '@mq/raft-core'
import type { ImagePort } from './data-machine'
import { FETCH_PAGE_BYTES, ImageStager } from './image-stager'
import { IMAGE_IDLE_MS, ImageStore } from './image-store'
import type { PeerCalls } from './peer-calls'

/** One FetchImage call's deadline. */
const FETCH_CALL_MS = 30_000
/** How often images left unread are closed, and staged images the replicas passed by deleted. */
const SWEEP_MS = 10_000

export interface NodeImagesDeps {
  readonly nodeId: string
  readonly engine: Engine
  /** Durable writes (the node's group commit). */
  write(ops: readonly BatchOp[]): Promise<void>
  readonly calls: PeerCalls
  addressOf(nodeId: string): string | undefined
  raft(): RaftHost | undefined
  /** Logs a fetch that failed (the leader's next try starts it again), or a deletion of staged images. */
  onFetchError(groupId: number, error: unknown): void
  /** Logs an image staged whole. */
  onStaged(
    groupId: number,
    staged: { imageId: number; index: number; keys: number; bytes: number; ms: number },
  ): void
}

/**
 * A node's data-group snapshot images (image-handle.ts), both ways: the images it makes as a
 * leader (ImageStore) and serves page by page (Peer.FetchImage), and the images it fetches
 * as a follower and stages before its replica installs them (ImageStager). `port()` is what
 * each DataMachine takes and installs images through.
 */
export class NodeImages {
  readonly store: ImageStore
  readonly stager: ImageStager
  readonly #deps: NodeImagesDeps
  readonly #timer: ReturnType<typeof setInterval>
  /**
   * Per group and asker (a member of the group when it asked): the image pages served it, and
   * the highest index of an image served it whole (its last page).
   */
  readonly #served = new Map<number, Map<string, { pages: number; wholeAt?: number }>>()

  constructor(deps: NodeImagesDeps) {
    this.#deps = deps
    this.store = new ImageStore(deps.engine)
    this.stager = new ImageStager({
      reader: deps.engine,
      write: (ops) => deps.write(ops),
      fetch: async (nodeId, request) => {
        const address = deps.addressOf(nodeId)
        if (!address) throw new UnavailableError(`no address known for node ${nodeId}`)
        const response = await deps.calls.call<FetchImageResponse>(
          address,
          (c, md, opts, cb) =>
            c.peer.fetchImage(
              {
                groupId: request.groupId,
                imageId: request.imageId,
                after: request.after ?? new Uint8Array(0),
                maxBytes: request.maxBytes,
                nodeId: deps.nodeId,
              },
              md,
              opts,
              cb,
            ),
          FETCH_CALL_MS,
        )
        return { pairs: decodePairs(response.pairs), done: response.done }
      },
      deliver: (groupId, message) => deps.raft()?.receive(groupId, message),
      applied: (groupId) => {
        try {
          return deps.raft()?.status(groupId).applied ?? 0
        } catch {
          return 0 // not hosted here (yet, or any more): nothing is known
        }
      },
      onError: (groupId, error) => deps.onFetchError(groupId, error),
      onStaged: (groupId, staged) => deps.onStaged(groupId, staged),
    })
    this.#timer = setInterval(() => {
      this.#forgetLeft()
      void this.store.sweep()
      void this.stager.sweep()
    }, SWEEP_MS)
    this.#timer.unref()
  }

  /** What a data group's DataMachine takes and installs images through. */
  port(): ImagePort {
    return imagePort(this.store, this.stager)
  }

  /** A Raft message for a data group: true to hand it to the replica now (see ImageStager.offer). */
  offer(groupId: number, message: Message, fromNode: string): boolean {
    return this.stager.offer(groupId, message, fromNode)
  }

  /**
   * Peer.FetchImage: a page of an image this node made. When the image is gone, a leader of
   * the group makes a new one and stops sending the old one to the asker (which gets the new
   * handle at the next try); the answer is UNAVAILABLE either way.
   */
  async fetch(req: FetchImageRequest): Promise<FetchImageResponse> {
    const conf = this.#checkAsker(req)
    const page = await this.store
      .page(
        req.groupId,
        req.imageId,
        req.after.length > 0 ? req.after : undefined,
        req.maxBytes || FETCH_PAGE_BYTES,
      )
      .catch((error: unknown) => {
        if (error instanceof ClosedError) return undefined // closed while read: as if gone
        throw error
      })
    if (page) {
      if (req.nodeId && conf) {
        // Read before the answer goes (an image unread for a while may close meanwhile).
        const index = page.done ? this.store.indexOf(req.groupId, req.imageId) : undefined
        this.#countServed(req.groupId, req.nodeId, conf, index)
      }
      return { pairs: encodePairs(page.pairs), done: page.done }
    }
    try {
      const raft = this.#deps.raft()
      if (raft?.status(req.groupId).role === Role.Leader)
        raft.refreshImage(req.groupId, req.nodeId || undefined)
    } catch {
      // Not hosted here (any more), or the host stopped: the group's leader will tell the asker.
    }
    throw new UnavailableError(
      `image ${req.imageId} of group ${req.groupId} is not held here (closed after ${IMAGE_IDLE_MS / 1000} s unread, or made before a restart); the group's leader sends a new one at its next try`,
    )
  }

  /**
   * Refuses (PERMISSION_DENIED) an asker that is no member of the group, voter or learner, in
   * this node's view of its configuration: a group's state goes to its replicas only (any
   * cluster member could read any group's messages before; under --tls-peer-ids the asker is
   * the caller's certificate's node). An asker not named (an earlier version) is not checked.
   * A group not hosted here any more is answered as an image not held: its images close only
   * once its removal has settled its machine (node.ts #removeDataGroup, minutes while its
   * partitions are swept), and until then they were served to any asker unchecked.
   */
  #checkAsker(req: FetchImageRequest): GroupConf | undefined {
    if (!req.nodeId) return undefined
    let conf: GroupConf | undefined
    try {
      conf = this.#deps.raft()?.status(req.groupId).conf
    } catch {
      throw new UnavailableError(
        `group ${req.groupId} is not hosted here (any more): its images are not served; the group's leader sends a new one at its next try`,
      )
    }
    if (!conf || conf.voters.includes(req.nodeId) || conf.learners.includes(req.nodeId)) return conf
    throw new PermissionDeniedError(
      `node ${req.nodeId} holds no replica of group ${req.groupId}: a group's images go to its replicas only`,
    )
  }

  /**
   * The image pages of group `groupId` this node served to `nodeId` (a progress mark of a
   * joining replica: a large image installs minutes after its first page).
   */
  pagesServed(groupId: number, nodeId: string): number {
    return this.#served.get(groupId)?.get(nodeId)?.pages ?? 0
  }

  /**
   * The highest index of an image of group `groupId` this node served `nodeId` whole (its last
   * page): until its match reaches it, the replica installs that image, a rewrite of the
   * group's keys that shows the leader no progress (no page asked for, no match).
   */
  wholeImageServed(groupId: number, nodeId: string): number | undefined {
    return this.#served.get(groupId)?.get(nodeId)?.wholeAt
  }

  /**
   * Counts a page served (the last one of an image at `wholeAt`); askers no longer members of
   * the group (`conf`) are forgotten.
   */
  #countServed(groupId: number, nodeId: string, conf: GroupConf, wholeAt?: number): void {
    const served = this.#served.get(groupId) ?? new Map<string, { pages: number; wholeAt?: number }>()
    this.#served.set(groupId, served)
    forgetNonMembers(served, conf)
    const asker = served.get(nodeId) ?? { pages: 0 }
    served.set(nodeId, asker)
    asker.pages++
    if (wholeAt !== undefined) asker.wholeAt = Math.max(wholeAt, asker.wholeAt ?? 0)
  }

  /**
   * Forgets, at each sweep, the askers no longer members of their group: one removed and added
   * again later is a new, empty learner, and the image its earlier replica was served whole
   * exempted it from the stall watch (replica-changer.ts) for good when it made no progress
   * (only a page served of that group forgot it before).
   */
  #forgetLeft(): void {
    for (const [groupId, served] of this.#served) {
      try {
        const conf = this.#deps.raft()?.status(groupId).conf
        if (conf) forgetNonMembers(served, conf)
      } catch {
        // Not hosted here (any more): `forget` drops the group.
      }
    }
  }

  /**
   * A data group left this node: its fetch stops and its images close. Resolves once no page
   * write of its fetch is in flight (see ImageStager.forget): the group's range clear comes after.
   */
  async forget(groupId: number): Promise<void> {
    this.#served.delete(groupId)
    const stopped = this.stager.forget(groupId)
    await this.store.close(groupId)
    await stopped
  }

  async close(): Promise<void> {
    clearInterval(this.#timer)
    this.stager.stop()
    await this.store.close()
  }
}

type GroupConf = { readonly voters: readonly string[]; readonly learners: readonly string[] }

/** Drops the askers of `served` that are no members of `conf`. */
function forgetNonMembers(served: Map<string, unknown>, conf: GroupConf): void {
  for (const id of served.keys())
    if (!conf.voters.includes(id) && !conf.learners.includes(id)) served.delete(id)
}

/** The ImagePort of a node's image store (images it makes) and stager (images it installs). */
export function imagePort(store: ImageStore, stager: ImageStager): ImagePort {
  return {
    take: (groupId, index, garbage) => store.take(groupId, index, garbage),
    staged: (groupId, imageId, index) => stager.staged(groupId, imageId, index),
    page: (groupId, imageId, from, limits) => stager.page(groupId, imageId, from, limits),
    installed: (groupId, index) => stager.installed(groupId, index),
  }
}
