/**
 * What a data group's Raft snapshot carries instead of its state: a handle naming an image
 * that the node which made it keeps open (an engine snapshot of the group's keys at the
 * image's index, see ImageStore), from which the follower fetches pages (Peer.FetchImage) and
 * stages them on disk before its Raft replica installs the snapshot (ImageStager). So no image
 * is ever held whole in memory, on either side, whatever the group's backlog.
 *
 * Layout: MAGIC ‖ u64 group id ‖ u64 image id ‖ u64 index (big-endian), 31 bytes.
 */

const MAGIC = new TextEncoder().encode('mqimage')
const BYTES = MAGIC.length + 24

export interface ImageHandle {
  readonly groupId: number
  /** Unique among the images any node makes (random), so a follower can resume a fetch by it. */
  readonly imageId: number
  /** The Raft index the image is the state of. */
  readonly index: number
}

export function encodeImageHandle(h: ImageHandle): Uint8Array {
  const out = new Uint8Array(BYTES)
  out.set(MAGIC, 0)
  const view = new DataView(out.buffer)
  view.setBigUint64(MAGIC.length, BigInt(h.groupId))
  view.setBigUint64(MAGIC.length + 8, BigInt(h.imageId))
  view.setBigUint64(MAGIC.length + 16, BigInt(h.index))
  return out
}

/** The handle in `data`, or undefined when `data` is not one (a snapshot carrying its state). */
export function decodeImageHandle(data: Uint8Array): ImageHandle | undefined {
  if (data.length !== BYTES) return undefined
  for (let i = 0; i < MAGIC.length; i++) if (data[i] !== MAGIC[i]) return undefined
  const view = new DataView(data.buffer, data.byteOffset, data.length)
  return {
    groupId: Number(view.getBigUint64(MAGIC.length)),
    imageId: Number(view.getBigUint64(MAGIC.length + 8)),
    index: Number(view.getBigUint64(MAGIC.length + 16)),
  }
}
