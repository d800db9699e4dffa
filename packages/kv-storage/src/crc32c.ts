/**
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as LevelDB and iSCSI use it.
 * Table-driven, slicing by 4. `crc32c(bytes)` returns an unsigned 32-bit integer.
 */

const TABLES: Uint32Array[] = (() => {
  const t0 = new Uint32Array(256)
  for (let n = 0; n < 256; n++) {
    let c = n
    for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1
    t0[n] = c >>> 0
  }
  const tables = [t0]
  for (let s = 1; s < 4; s++) {
    const prev = tables[s - 1] as Uint32Array
    const t = new Uint32Array(256)
    for (let n = 0; n < 256; n++) {
      const p = prev[n] as number
      t[n] = ((p >>> 8) ^ (t0[p & 0xff] as number)) >>> 0
    }
    tables.push(t)
  }
  return tables
})()

const [t0, t1, t2, t3] = TABLES as [Uint32Array, Uint32Array, Uint32Array, Uint32Array]

/** The CRC-32C of `bytes[start, end)`, continuing from `seed` (the CRC of what came before). */
export function crc32c(bytes: Uint8Array, start = 0, end = bytes.length, seed = 0): number {
  let crc = ~seed >>> 0
  let i = start
  for (; i + 4 <= end; i += 4) {
    crc ^=
      (bytes[i] as number) |
      ((bytes[i + 1] as number) << 8) |
      ((bytes[i + 2] as number) << 16) |
      ((bytes[i + 3] as number) << 24)
    crc =
      (t3[crc & 0xff] as number) ^
      (t2[(crc >>> 8) & 0xff] as number) ^
      (t1[(crc >>> 16) & 0xff] as number) ^
      (t0[crc >>> 24] as number)
  }
  for (; i < end; i++) crc = (t0[(crc ^ (bytes[i] as number)) & 0xff] as number) ^ (crc >>> 8)
  return ~crc >>> 0
}
