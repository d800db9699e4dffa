/**
 * LevelDB's write-ahead log framing (its doc/log_format.md), read for fault injection and
 * diagnostics: the file is a sequence of 32 KiB blocks of physical records, each a 7-byte
 * header — masked CRC32C (4 bytes), payload length (2, little-endian), type (1: full, 2: first,
 * 3: middle, 4: last fragment of a logical record) — and its payload; a block's tail shorter
 * than a header is zero padding. One logical record is one write batch.
 */
const BLOCK_BYTES = 32 * 1024
const HEADER_BYTES = 7
const RecordType = { Full: 1, First: 2, Middle: 3, Last: 4 } as const

/** A logical record (one write batch) of a write-ahead log: where it starts and ends (exclusive). */
export interface WalRecord {
  readonly start: number
  readonly end: number
}

/**
 * The logical records of the write-ahead log `bytes`, in order, up to the first header that
 * is not a valid fragment (a torn tail) or the end. Checksums are not verified.
 */
export function walRecords(bytes: Uint8Array): WalRecord[] {
  const records: WalRecord[] = []
  let at = 0
  let start: number | undefined
  while (at < bytes.length) {
    const left = BLOCK_BYTES - (at % BLOCK_BYTES)
    if (left < HEADER_BYTES) {
      at += left
      continue
    }
    if (at + HEADER_BYTES > bytes.length) break
    const length = (bytes[at + 4] as number) | ((bytes[at + 5] as number) << 8)
    const type = bytes[at + 6] as number
    const end = at + HEADER_BYTES + length
    if (end > bytes.length || HEADER_BYTES + length > left) break
    if (type === RecordType.Full || type === RecordType.First) start = at
    else if (type !== RecordType.Middle && type !== RecordType.Last) break
    if (start === undefined) break
    if (type === RecordType.Full || type === RecordType.Last) {
      records.push({ start, end })
      start = undefined
    }
    at = end
  }
  return records
}
