import { describe, expect, it } from 'vitest'
import { Progress, renderProgress } from './progress'

describe('renderProgress', () => {
  it('draws a bar, a percentage, the counts and the rate when the total is known', () => {
    expect(renderProgress({ label: 'produce', done: 50, total: 100, elapsedMs: 2_000 })).toBe(
      `produce [${'#'.repeat(15)}${'-'.repeat(15)}]  50%  50/100  25 msg/s`,
    )
  })
  it('draws a counter when the total is unknown', () => {
    expect(renderProgress({ label: 'consumed', done: 3_000, total: undefined, elapsedMs: 1_000 })).toBe(
      'consumed 3000  3.0k msg/s',
    )
  })
})

describe('Progress', () => {
  const stream = (isTTY: boolean) => {
    const writes: string[] = []
    return { writes, write: (s: string) => writes.push(s), isTTY }
  }

  it('draws nothing when the stream is not a TTY', () => {
    const s = stream(false)
    const p = new Progress(s, () => 0, 'x', 10)
    p.update(5)
    p.finish()
    expect(s.writes).toEqual([])
  })

  it('redraws at most once per interval and ends with a newline', () => {
    const s = stream(true)
    let now = 0
    const p = new Progress(s, () => now, 'x', 10, 100)
    p.update(1)
    now = 50
    p.update(2)
    now = 150
    p.update(3)
    p.finish()
    expect(s.writes).toHaveLength(4)
    expect(s.writes[1]).toContain('3/10')
    expect(s.writes[2]).toContain('3/10')
    expect(s.writes[3]).toBe('\n')
  })
})
