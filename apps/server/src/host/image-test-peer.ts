import type { MemoryEngine } from '@mq/kv-storage'
import { type Message, MessageType, message, type Snapshot } from '@mq/raft-core'
import type { ImagePort } from './data-machine'
import { ImageStager, type StagerDeps } from './image-stager'
import { ImageStore } from './image-store'
import { imagePort } from './node-images'

/**
 * Test support: one node's side of image transfers over a MemoryEngine — the images it makes
 * (`store`), the stager that fetches from `source()` (another side's store, called in
 * process instead of over Peer.FetchImage) and the Snap messages it delivered.
 */
export interface ImagePeer {
  readonly engine: MemoryEngine
  readonly store: ImageStore
  readonly stager: ImageStager
  readonly port: ImagePort
  readonly delivered: Message[]
  /** FetchImage calls made, and a hook that may fail one (throw) before it is answered. */
  readonly fetches: { count: number; before?: (n: number) => void }
}

export function imagePeer(
  engine: MemoryEngine,
  source: () => ImageStore | undefined = () => undefined,
  deps: Partial<StagerDeps> = {},
): ImagePeer {
  const delivered: Message[] = []
  const fetches: ImagePeer['fetches'] = { count: 0 }
  const store = new ImageStore(engine)
  const stager = new ImageStager({
    reader: engine,
    write: (ops) => engine.write(ops, { sync: false }),
    fetch: async (_node, req) => {
      fetches.count++
      fetches.before?.(fetches.count)
      const page = await source()?.page(req.groupId, req.imageId, req.after, req.maxBytes)
      if (!page) throw new Error(`image ${req.imageId} is gone`)
      return page
    },
    deliver: (_groupId, m) => delivered.push(m),
    ...deps,
  })
  return { engine, store, stager, port: imagePort(store, stager), delivered, fetches }
}

/** The snapshot a leader's replica would send for image `handle` at `index`. */
export function snapshotOf(handle: Uint8Array, index: number): Snapshot {
  return {
    meta: { index, term: 1, conf: { voters: [], learners: [], votersOutgoing: [], learnersNext: [] } },
    data: handle,
  }
}

/** The Snap message carrying `snapshot` whole (one chunk), from n1 to n2. */
export function snapMessage(snapshot: Snapshot): Message {
  return message({
    type: MessageType.Snap,
    from: 'n1',
    to: 'n2',
    term: 1,
    snapshot: { meta: snapshot.meta, offset: 0, totalBytes: snapshot.data.length, data: snapshot.data },
  })
}

/** Offers `snapshot`'s Snap message to `peer` (group 1) and waits until it is staged and delivered. */
export async function stage(peer: ImagePeer, snapshot: Snapshot): Promise<void> {
  const before = peer.delivered.length
  if (peer.stager.offer(1, snapMessage(snapshot), 'n1')) return
  for (let i = 0; i < 10_000 && peer.delivered.length === before; i++)
    await new Promise((r) => setImmediate(r))
  if (peer.delivered.length === before) throw new Error('the image was not staged')
}
