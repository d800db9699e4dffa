/**
 * `${messageId}.${delivery}` → [messageId, delivery], or undefined when malformed: both
 * safe integers ≥ 1 written in canonical decimal (no sign, no leading zero).
 */
export function parseLeaseId(leaseId: string): readonly [number, number] | undefined {
  if (typeof leaseId !== 'string' || leaseId.length > 40) return undefined
  const dot = leaseId.indexOf('.')
  if (dot <= 0) return undefined
  const id = parseDecimal(leaseId, 0, dot)
  const delivery = parseDecimal(leaseId, dot + 1, leaseId.length)
  return id === undefined || delivery === undefined ? undefined : [id, delivery]
}

/** The canonical decimal integer ≥ 1 in `text` [from, to), if it is one and safe. */
function parseDecimal(text: string, from: number, to: number): number | undefined {
  if (from >= to || text.charCodeAt(from) === 0x30) return undefined
  let n = 0
  for (let i = from; i < to; i++) {
    const digit = text.charCodeAt(i) - 0x30
    if (digit < 0 || digit > 9) return undefined
    n = n * 10 + digit
  }
  return Number.isSafeInteger(n) ? n : undefined
}
