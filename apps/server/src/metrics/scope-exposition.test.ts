import { describe, expect, it } from 'vitest'
import { QUEUE_OVERFLOW } from './queue-overflow'
import { parseSample, scopeExposition } from './scope-exposition'

describe('scopeExposition', () => {
  it('drops the samples of queues the caller does not see, comments and other samples kept', () => {
    const text = [
      '# HELP m help',
      '# TYPE m counter',
      'm{node="n1",queue="a"} 1',
      'm{node="n1",queue="b"} 2',
      'm_bucket{le="0.1",queue="b"} 2',
      'n{node="n1"} 5',
      'o 7',
      'p{queue="b"} 1 1700000000000',
      '',
    ].join('\n')
    expect(scopeExposition(text, (q) => q === 'a')).toBe(
      ['# HELP m help', '# TYPE m counter', 'm{node="n1",queue="a"} 1', 'n{node="n1"} 5', 'o 7', ''].join(
        '\n',
      ),
    )
  })

  it('never shows the overflow series to a scoped caller, even one whose pattern would match its name', () => {
    const text = [`m{queue="${QUEUE_OVERFLOW}"} 9`, 'm{queue="a"} 1', ''].join('\n')
    expect(scopeExposition(text, () => true)).toBe(['m{queue="a"} 1', ''].join('\n'))
  })

  it('reads label values whole, escapes included, so a value holding queue="x" is not the label', () => {
    const line = 'm{method="a,queue=\\"x\\"",queue="b\\\\c\\nd"} 1'
    expect(parseSample(line)).toEqual({
      name: 'm',
      labels: { method: 'a,queue="x"', queue: 'b\\c\nd' },
      value: '1',
    })
    expect(parseSample('m{node="n1"} 1')?.labels).toEqual({ node: 'n1' })
    expect(parseSample('m 1')).toEqual({ name: 'm', labels: {}, value: '1' })
    expect(parseSample('not a sample')).toBeUndefined()
  })
})
