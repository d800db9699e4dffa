import { describe, expect, it } from 'vitest'
import { formatFields, formatTable } from './table'

describe('formatTable', () => {
  const rows = [
    { name: 'jobs', partitions: 4, strict: false },
    { name: 'emails-long-name', partitions: 16, strict: true },
  ]
  const columns = [
    { header: 'NAME', value: (r: (typeof rows)[number]) => r.name },
    { header: 'PARTITIONS', value: (r: (typeof rows)[number]) => r.partitions },
    { header: 'STRICT', value: (r: (typeof rows)[number]) => r.strict },
  ]

  it('aligns columns, numbers to the right, with no trailing spaces', () => {
    expect(formatTable(rows, columns)).toBe(
      [
        'NAME              PARTITIONS  STRICT',
        'jobs                       4  false',
        'emails-long-name          16  true',
        '',
      ].join('\n'),
    )
  })

  it('prints only the header when there are no rows', () => {
    expect(formatTable([], columns)).toBe('NAME  PARTITIONS  STRICT\n')
  })

  // The widths spread every row into Math.max: past ~125,000 rows (`mq queue dlq Q --limit
  // 10000` over 16 partitions, `mq queue list --limit 1000000`) it threw "Maximum call stack
  // size exceeded" and mq exited 4 instead of printing the table.
  it('renders a table of 300,000 rows', () => {
    const many = Array.from({ length: 300_000 }, (_, i) => ({ name: `q${i}`, partitions: i, strict: false }))
    const lines = formatTable(many, columns).split('\n')
    expect(lines).toHaveLength(300_002)
    expect(lines[1]).toBe(`q0${' '.repeat(16)}0  false`)
    expect(lines[300_000]).toBe(`q299999${' '.repeat(6)}299999  false`)
  })
})

describe('formatFields', () => {
  it('aligns the values', () => {
    expect(
      formatFields([
        ['queue', 'jobs'],
        ['partitions', 4],
      ]),
    ).toBe('queue:       jobs\npartitions:  4\n')
  })
})
