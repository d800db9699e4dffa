/** `1234567` → `1,234,567`. */
export function count(n: number): string {
  return Math.round(n).toLocaleString('en-US')
}

/** A duration in ms as the two largest units: `850 ms`, `12.3 s`, `4m 05s`, `2h 07m`, `3d 04h`. */
export function duration(ms: number): string {
  if (ms < 1_000) return `${Math.round(ms)} ms`
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)} s`
  const s = Math.floor(ms / 1_000)
  const pad = (n: number) => String(n).padStart(2, '0')
  if (s < 3_600) return `${Math.floor(s / 60)}m ${pad(s % 60)}s`
  if (s < 86_400) return `${Math.floor(s / 3_600)}h ${pad(Math.floor(s / 60) % 60)}m`
  return `${Math.floor(s / 86_400)}d ${pad(Math.floor(s / 3_600) % 24)}h`
}

/** A share in [0, 1] as a percentage with one decimal. */
export function percent(share: number): string {
  return `${(share * 100).toFixed(1)}%`
}

/** A rate per second with a sign: `+12.5/s`, `-3.0/s`, `0/s`. */
export function rate(perS: number): string {
  if (Math.abs(perS) < 0.05) return '0/s'
  return `${perS > 0 ? '+' : ''}${perS.toFixed(1)}/s`
}

/** A rate per second without a sign: `12.5/s`, `0/s`. */
export function perSecond(perS: number): string {
  return perS < 0.05 ? '0/s' : `${perS.toFixed(1)}/s`
}
