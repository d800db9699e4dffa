/** A key and its value, as read from or written to the engine. */
export type KeyPair = readonly [key: Uint8Array, value: Uint8Array]

/** Encodes key/value pairs: per pair a u32 key length, the key, a u32 value length, the value. */
export function encodePairs(pairs: readonly KeyPair[]): Uint8Array {
  let size = 0
  for (const [k, v] of pairs) size += 8 + k.length + v.length
  const out = new Uint8Array(size)
  const view = new DataView(out.buffer)
  let at = 0
  for (const [k, v] of pairs) {
    view.setUint32(at, k.length)
    out.set(k, at + 4)
    at += 4 + k.length
    view.setUint32(at, v.length)
    out.set(v, at + 4)
    at += 4 + v.length
  }
  return out
}

/** Decodes what `encodePairs` wrote. Throws an Error naming the problem when the bytes are cut short. */
export function decodePairs(bytes: Uint8Array): [Uint8Array, Uint8Array][] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const pairs: [Uint8Array, Uint8Array][] = []
  let at = 0
  const take = (): Uint8Array => {
    if (at + 4 > bytes.length) throw new Error('key/value pairs are truncated')
    const n = view.getUint32(at)
    if (at + 4 + n > bytes.length) throw new Error('key/value pairs are truncated')
    const out = bytes.slice(at + 4, at + 4 + n)
    at += 4 + n
    return out
  }
  while (at < bytes.length) pairs.push([take(), take()])
  return pairs
}
