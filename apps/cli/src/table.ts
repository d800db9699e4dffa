/** One column of a table: its header and how to read a cell from a row. */
export interface Column<T> {
  readonly header: string
  readonly value: (row: T) => string | number | boolean
  /** Default: numbers right, everything else left. */
  readonly align?: 'left' | 'right'
}

/**
 * Renders rows as an aligned plain-text table: a header line, then one line per row, columns
 * separated by two spaces, no trailing spaces. Returns '' lines-free text ending in a newline.
 */
export function formatTable<T>(rows: readonly T[], columns: readonly Column<T>[]): string {
  const cells = rows.map((row) => columns.map((c) => c.value(row)))
  // Folded, not spread into Math.max: an argument per row overflowed the stack past ~125,000 rows.
  const widths = columns.map((c, i) =>
    cells.reduce((width, r) => Math.max(width, String(r[i]).length), c.header.length),
  )
  const right = columns.map(
    (c, i) =>
      c.align === 'right' ||
      (c.align === undefined && cells.length > 0 && cells.every((r) => typeof r[i] === 'number')),
  )
  const render = (values: readonly (string | number | boolean)[]): string =>
    values
      .map((v, i) => {
        const text = String(v)
        const width = widths[i] ?? 0
        return right[i] ? text.padStart(width) : text.padEnd(width)
      })
      .join('  ')
      .trimEnd()
  return `${[render(columns.map((c) => c.header)), ...cells.map(render)].join('\n')}\n`
}

/** Renders `label: value` pairs with the values aligned. */
export function formatFields(fields: readonly (readonly [string, string | number | boolean])[]): string {
  const width = Math.max(0, ...fields.map(([k]) => k.length + 1))
  return fields.map(([k, v]) => `${`${k}:`.padEnd(width)}  ${String(v)}`.trimEnd()).join('\n') + '\n'
}
