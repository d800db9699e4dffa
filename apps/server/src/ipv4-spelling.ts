/** A part of an IPv4 address in a form the resolver reads (inet_aton): decimal, octal (0…) or hex (0x…). */
const IPV4_PART = /^(?:0x[0-9a-f]+|0[0-7]*|[1-9][0-9]*)$/i

/**
 * `host` as the dotted IPv4 address the resolver reads it as (inet_aton: one to four parts,
 * decimal, octal or hex, the last filling the bytes left: 127.1, 0x7f.1, 2130706433), or
 * undefined when it is none.
 */
export function ipv4Of(host: string): string | undefined {
  const parts = host.split('.')
  if (parts.length > 4 || !parts.every((part) => IPV4_PART.test(part))) return undefined
  const values = parts.map((part) =>
    Number.parseInt(part, /^0x/i.test(part) ? 16 : part.length > 1 && part.startsWith('0') ? 8 : 10),
  )
  const last = values.pop() as number
  if (values.some((v) => v > 255) || last >= 256 ** (4 - values.length)) return undefined
  const n = values.reduce((sum, v, i) => sum + v * 256 ** (3 - i), last)
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.')
}
