/**
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as LevelDB and iSCSI use it.
 * Table-driven, slicing by 8. `crc32c(bytes)` returns an unsigned 32-bit integer.
 */

/**
 * Eight tables of 256 entries in one array (table k at k·256): table 0 is the byte-at-a-time
 * table, table k the CRC of a byte followed by k zero bytes. Int32 entries keep the loop in
 * 32-bit integer arithmetic.
 */
const T: Int32Array = (() => {
  const t = new Int32Array(8 * 256)
  for (let n = 0; n < 256; n++) {
    let c = n
    for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1
    t[n] = c
  }
  for (let s = 1; s < 8; s++) {
    for (let n = 0; n < 256; n++) {
      const p = t[(s - 1) * 256 + n] as number
      t[s * 256 + n] = (p >>> 8) ^ (t[p & 0xff] as number)
    }
  }
  return t
})()

/** The CRC-32C of `bytes[start, end)`, continuing from `seed` (the CRC of what came before). */
export function crc32c(bytes: Uint8Array, start = 0, end = bytes.length, seed = 0): number {
  let crc = ~seed
  let i = start
  // Slicing by 8: eight bytes per step, each looked up in the table for its distance from the end.
  for (; i + 8 <= end; i += 8) {
    const a =
      crc ^
      ((bytes[i] as number) |
        ((bytes[i + 1] as number) << 8) |
        ((bytes[i + 2] as number) << 16) |
        ((bytes[i + 3] as number) << 24))
    const b =
      (bytes[i + 4] as number) |
      ((bytes[i + 5] as number) << 8) |
      ((bytes[i + 6] as number) << 16) |
      ((bytes[i + 7] as number) << 24)
    crc =
      (T[1792 + (a & 0xff)] as number) ^
      (T[1536 + ((a >>> 8) & 0xff)] as number) ^
      (T[1280 + ((a >>> 16) & 0xff)] as number) ^
      (T[1024 + (a >>> 24)] as number) ^
      (T[768 + (b & 0xff)] as number) ^
      (T[512 + ((b >>> 8) & 0xff)] as number) ^
      (T[256 + ((b >>> 16) & 0xff)] as number) ^
      (T[b >>> 24] as number)
  }
  for (; i < end; i++) crc = (T[(crc ^ (bytes[i] as number)) & 0xff] as number) ^ (crc >>> 8)
  return ~crc >>> 0
}
