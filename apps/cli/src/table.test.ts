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
