import type { BatchOp } from './engine'
import { InvalidArgumentError } from './errors'

/**
 * A synchronous builder of one atomic write: collect puts, dels and range clears, then hand
 * `ops` to `Engine.write` (or to the group commit). Tracks its size so callers can bound it.
 * Keys and values are kept by reference: do not mutate them until the write has resolved.
 */
export class WriteBatch {
  private readonly list: BatchOp[] = []
  private bytes = 0

  put(key: Uint8Array, value: Uint8Array): this {
    this.list.push({ type: 'put', key, value })
    this.bytes += key.length + value.length
    return this
  }

  del(key: Uint8Array): this {
    this.list.push({ type: 'del', key })
    this.bytes += key.length
    return this
  }

  /** Removes every key in [gte, lt) when the batch is applied (after the ops before it). */
  clear(gte: Uint8Array, lt: Uint8Array): this {
    this.list.push({ type: 'clear', gte, lt })
    this.bytes += gte.length + lt.length
    return this
  }

  /** Appends already-built ops, in order. */
  add(ops: readonly BatchOp[]): this {
    for (const op of ops) {
      this.list.push(op)
      this.bytes += opBytes(op)
    }
    return this
  }

  get ops(): readonly BatchOp[] {
    return this.list
  }

  get length(): number {
    return this.list.length
  }

  /** Key and value bytes in the batch. */
  get byteLength(): number {
    return this.bytes
  }
}

/** Key and value bytes of one op. */
export function opBytes(op: BatchOp): number {
  switch (op.type) {
    case 'put':
      return op.key.length + op.value.length
    case 'del':
      return op.key.length
    case 'clear':
      return op.gte.length + op.lt.length
  }
}

/**
 * Throws InvalidArgumentError unless every op is well formed: a known type, Uint8Array
 * keys and values. Engines call it before applying anything, so a bad batch changes nothing.
 */
export function checkOps(ops: readonly BatchOp[]): void {
  if (!Array.isArray(ops)) throw new InvalidArgumentError('write: ops must be an array of BatchOp')
  for (let i = 0; i < ops.length; i++) {
    const op = ops[i] as BatchOp
    const ok =
      op !== null &&
      typeof op === 'object' &&
      (op.type === 'put'
        ? op.key instanceof Uint8Array && op.value instanceof Uint8Array
        : op.type === 'del'
          ? op.key instanceof Uint8Array
          : op.type === 'clear'
            ? op.gte instanceof Uint8Array && op.lt instanceof Uint8Array
            : false)
    if (!ok) {
      throw new InvalidArgumentError(
        `write: op ${i} is not a put {key, value}, del {key} or clear {gte, lt} with Uint8Array fields`,
      )
    }
  }
}

/** Throws InvalidArgumentError unless `range` has Uint8Array bounds and a limit >= 0 (integer). */
export function checkRange(range: {
  gte?: unknown
  gt?: unknown
  lte?: unknown
  lt?: unknown
  limit?: unknown
  bytesMax?: unknown
}): void {
  for (const b of ['gte', 'gt', 'lte', 'lt'] as const) {
    const v = range[b]
    if (v !== undefined && !(v instanceof Uint8Array)) {
      throw new InvalidArgumentError(`range: ${b} must be a Uint8Array when given`)
    }
  }
  const { limit } = range
  if (limit !== undefined && !(typeof limit === 'number' && Number.isInteger(limit) && limit >= 0)) {
    throw new InvalidArgumentError(`range: limit must be an integer >= 0 when given, got ${String(limit)}`)
  }
  const { bytesMax } = range
  if (bytesMax !== undefined && !(typeof bytesMax === 'number' && bytesMax > 0)) {
    throw new InvalidArgumentError(`range: bytesMax must be a number > 0 when given, got ${String(bytesMax)}`)
  }
}
