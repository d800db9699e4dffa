import { compareKeys, isEmptyRange, type KeyRange, type KeyValue, lowerBoundOf, upperBoundOf } from './engine'

/**
 * A copy-on-write B+tree from byte keys to byte values: O(log n) get, set and delete,
 * ordered range scans, and O(1) frozen views (`freeze()`) for snapshot isolation.
 *
 * Every node carries the generation that owns it. A write mutates nodes of the current
 * generation in place and copies any older node on its path first; `freeze()` starts a new
 * generation, so every node reachable from the frozen root is never mutated again.
 *
 * Invariants: in a branch, `keys.length === children.length - 1` and every key of
 * `children[i]` < `keys[i]` <= every key of `children[i + 1]`; a leaf's keys are strictly
 * increasing; no node below the root is empty.
 */

/** Entries per node at most; a node above this splits in two. */
const NODE_ENTRIES_MAX = 64
/** A node below this after a delete merges with a neighbour when the two fit in one. */
const NODE_ENTRIES_MIN = 16

export interface Leaf {
  readonly leaf: true
  gen: number
  keys: Uint8Array[]
  vals: Uint8Array[]
}

export interface Branch {
  readonly leaf: false
  gen: number
  keys: Uint8Array[]
  children: Node[]
}

/** A node of the tree (opaque outside this file). */
export type MapNode = Leaf | Branch
type Node = MapNode

/** A frozen, immutable view of the map: its root and entry count. */
export interface FrozenMap {
  readonly root: MapNode
  readonly size: number
}

/**
 * Compares `a` with `b` knowing that their first `from` bytes are equal: 0 when equal, else
 * ±(1 + the length of their common prefix), negative when `a` < `b` (bytewise order).
 */
function compareFrom(a: Uint8Array, b: Uint8Array, from: number): number {
  const n = Math.min(a.length, b.length)
  let i = from
  while (i < n && a[i] === b[i]) i++
  if (i < n) return (a[i] as number) < (b[i] as number) ? -(i + 1) : i + 1
  return a.length === b.length ? 0 : a.length < b.length ? -(i + 1) : i + 1
}

/*
 * The binary searches below skip the prefix that `key` is known to share with every key
 * between the current bounds: keys sorted between two keys that both start with P start
 * with P too, so each comparison starts at the shorter of the common prefixes of `key`
 * with the keys just outside the bounds (the keys under one partition share long prefixes).
 */

/** First position in `keys` whose key is >= `key`. */
function lowerBound(keys: readonly Uint8Array[], key: Uint8Array): number {
  let lo = 0
  let hi = keys.length
  let sharedLo = 0
  let sharedHi = 0
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    const c = compareFrom(keys[mid] as Uint8Array, key, Math.min(sharedLo, sharedHi))
    if (c < 0) {
      lo = mid + 1
      sharedLo = -c - 1
    } else {
      hi = mid
      sharedHi = c === 0 ? key.length : c - 1
    }
  }
  return lo
}

/** First position in `keys` whose key is > `key`. */
function upperBound(keys: readonly Uint8Array[], key: Uint8Array): number {
  let lo = 0
  let hi = keys.length
  let sharedLo = 0
  let sharedHi = 0
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    const c = compareFrom(keys[mid] as Uint8Array, key, Math.min(sharedLo, sharedHi))
    if (c <= 0) {
      lo = mid + 1
      sharedLo = c === 0 ? key.length : -c - 1
    } else {
      hi = mid
      sharedHi = c - 1
    }
  }
  return lo
}

/** Inserts `item` at `i` of `list` (Array#splice allocates the array of removed items). */
function insertAt<T>(list: T[], i: number, item: T): void {
  let j = list.length
  list.push(item)
  for (; j > i; j--) list[j] = list[j - 1] as T
  list[i] = item
}

/** Removes the item at `i` of `list`. */
function removeAt<T>(list: T[], i: number): void {
  const last = list.length - 1
  for (let j = i; j < last; j++) list[j] = list[j + 1] as T
  list.pop()
}

function nodeLength(node: Node): number {
  return node.leaf ? node.keys.length : node.children.length
}

export class OrderedMap {
  private root: Node
  private gen = 1
  private count = 0

  constructor() {
    this.root = { leaf: true, gen: this.gen, keys: [], vals: [] }
  }

  get size(): number {
    return this.count
  }

  /** Returns an immutable view of the current contents; later writes do not show in it. */
  freeze(): FrozenMap {
    const view = { root: this.root, size: this.count }
    this.gen++
    return view
  }

  get(key: Uint8Array): Uint8Array | undefined {
    return OrderedMap.getIn(this.root, key)
  }

  static getIn(root: Node, key: Uint8Array): Uint8Array | undefined {
    let node = root
    while (!node.leaf) node = node.children[upperBound(node.keys, key)] as Node
    const i = lowerBound(node.keys, key)
    const k = node.keys[i]
    return k !== undefined && compareKeys(k, key) === 0 ? node.vals[i] : undefined
  }

  /** Sets `key` to `value` (both stored as given: the caller must not mutate them later). */
  set(key: Uint8Array, value: Uint8Array): void {
    this.root = this.own(this.root)
    const split = this.insert(this.root, key, value)
    if (split) {
      this.root = { leaf: false, gen: this.gen, keys: [split[0]], children: [this.root, split[1]] }
    }
  }

  /** Removes `key`; returns whether it was present. */
  delete(key: Uint8Array): boolean {
    // One descent: nodes are made owned on the way down only once the key is known to be
    // in the leaf (see remove), so a miss copies nothing.
    if (!this.remove(this.root, key, true)) return false
    while (!this.root.leaf && this.root.children.length === 1) this.root = this.root.children[0] as Node
    return true
  }

  /** Removes every key in [gte, lt); returns how many. */
  deleteRange(gte: Uint8Array, lt: Uint8Array): number {
    if (compareKeys(gte, lt) >= 0) return 0
    const doomed: Uint8Array[] = []
    OrderedMap.scan(this.root, { gte, lt }, (k) => {
      doomed.push(k)
      return true
    })
    for (const k of doomed) this.delete(k)
    return doomed.length
  }

  /** The entries of `range` of this map (see `scan`). */
  range(range: KeyRange): KeyValue[] {
    return OrderedMap.collect(this.root, range)
  }

  static collect(root: Node, range: KeyRange): KeyValue[] {
    const out: KeyValue[] = []
    const limit = range.limit ?? Number.POSITIVE_INFINITY
    const bytesMax = range.bytesMax ?? Number.POSITIVE_INFINITY
    if (limit <= 0) return out
    let bytes = 0
    OrderedMap.scan(root, range, (k, v) => {
      out.push([k, v])
      bytes += k.length + v.length
      return out.length < limit && bytes < bytesMax
    })
    return out
  }

  /**
   * Visits the entries of `root` inside `range`'s bounds in key order (descending when
   * `range.reverse`), until `visit` returns false. Ignores `range.limit`.
   */
  static scan(root: Node, range: KeyRange, visit: (key: Uint8Array, value: Uint8Array) => boolean): void {
    const lo = lowerBoundOf(range)
    const hi = upperBoundOf(range)
    if (isEmptyRange(lo, hi)) return
    if (range.reverse) OrderedMap.scanBackward(root, lo, hi, visit)
    else OrderedMap.scanForward(root, lo, hi, visit)
  }

  private static scanForward(
    node: Node,
    lo: { key: Uint8Array; inclusive: boolean } | undefined,
    hi: { key: Uint8Array; inclusive: boolean } | undefined,
    visit: (key: Uint8Array, value: Uint8Array) => boolean,
  ): boolean {
    if (!node.leaf) {
      const start = lo ? upperBound(node.keys, lo.key) : 0
      for (let i = start; i < node.children.length; i++) {
        // Only the first child visited can hold keys below the lower bound.
        if (!OrderedMap.scanForward(node.children[i] as Node, i === start ? lo : undefined, hi, visit))
          return false
      }
      return true
    }
    const keys = node.keys
    let i = lo ? (lo.inclusive ? lowerBound(keys, lo.key) : upperBound(keys, lo.key)) : 0
    for (; i < keys.length; i++) {
      const k = keys[i] as Uint8Array
      if (hi) {
        const c = compareKeys(k, hi.key)
        if (c > 0 || (c === 0 && !hi.inclusive)) return false
      }
      if (!visit(k, node.vals[i] as Uint8Array)) return false
    }
    return true
  }

  private static scanBackward(
    node: Node,
    lo: { key: Uint8Array; inclusive: boolean } | undefined,
    hi: { key: Uint8Array; inclusive: boolean } | undefined,
    visit: (key: Uint8Array, value: Uint8Array) => boolean,
  ): boolean {
    if (!node.leaf) {
      const start = hi ? upperBound(node.keys, hi.key) : node.children.length - 1
      for (let i = start; i >= 0; i--) {
        if (!OrderedMap.scanBackward(node.children[i] as Node, lo, i === start ? hi : undefined, visit))
          return false
      }
      return true
    }
    const keys = node.keys
    let i = hi ? (hi.inclusive ? upperBound(keys, hi.key) : lowerBound(keys, hi.key)) - 1 : keys.length - 1
    for (; i >= 0; i--) {
      const k = keys[i] as Uint8Array
      if (lo) {
        const c = compareKeys(k, lo.key)
        if (c < 0 || (c === 0 && !lo.inclusive)) return false
      }
      if (!visit(k, node.vals[i] as Uint8Array)) return false
    }
    return true
  }

  /** Returns `node` if this generation owns it, else a shallow copy that it owns. */
  private own<N extends Node>(node: N): N {
    if (node.gen === this.gen) return node
    if (node.leaf) return { leaf: true, gen: this.gen, keys: node.keys.slice(), vals: node.vals.slice() } as N
    return { leaf: false, gen: this.gen, keys: node.keys.slice(), children: node.children.slice() } as N
  }

  /** Inserts into an owned node; returns [separator, right half] when it split. */
  private insert(node: Node, key: Uint8Array, value: Uint8Array): [Uint8Array, Node] | undefined {
    if (node.leaf) {
      const i = lowerBound(node.keys, key)
      const k = node.keys[i]
      if (k !== undefined && compareKeys(k, key) === 0) {
        node.vals[i] = value
        return undefined
      }
      insertAt(node.keys, i, key)
      insertAt(node.vals, i, value)
      this.count++
      if (node.keys.length <= NODE_ENTRIES_MAX) return undefined
      const mid = node.keys.length >>> 1
      const right: Leaf = {
        leaf: true,
        gen: this.gen,
        keys: node.keys.slice(mid),
        vals: node.vals.slice(mid),
      }
      node.keys.length = mid
      node.vals.length = mid
      return [right.keys[0] as Uint8Array, right]
    }
    const i = upperBound(node.keys, key)
    const child = this.own(node.children[i] as Node)
    node.children[i] = child
    const split = this.insert(child, key, value)
    if (!split) return undefined
    insertAt(node.keys, i, split[0])
    insertAt(node.children, i + 1, split[1])
    if (node.children.length <= NODE_ENTRIES_MAX) return undefined
    const mid = node.children.length >>> 1
    const sep = node.keys[mid - 1] as Uint8Array
    const right: Branch = {
      leaf: false,
      gen: this.gen,
      keys: node.keys.slice(mid),
      children: node.children.slice(mid),
    }
    node.keys.length = mid - 1
    node.children.length = mid
    return [sep, right]
  }

  /**
   * Removes `key` from the subtree at `node` (the root when `isRoot`), merging underfull
   * children; returns whether it was present. Only when it is does it make the nodes on the
   * path owned (replacing them in their parents; the root in `this.root`).
   */
  private remove(node: Node, key: Uint8Array, isRoot: boolean): Node | undefined {
    if (node.leaf) {
      const i = lowerBound(node.keys, key)
      const k = node.keys[i]
      if (k === undefined || compareKeys(k, key) !== 0) return undefined
      const owned = this.own(node)
      if (isRoot) this.root = owned
      removeAt(owned.keys, i)
      removeAt(owned.vals, i)
      this.count--
      return owned
    }
    const i = upperBound(node.keys, key)
    const found = this.remove(node.children[i] as Node, key, false)
    if (found === undefined) return undefined
    const parent = this.own(node)
    if (isRoot) this.root = parent
    parent.children[i] = found
    const n = nodeLength(found)
    if (n === 0) {
      parent.children.splice(i, 1)
      parent.keys.splice(i > 0 ? i - 1 : 0, 1)
      return parent
    }
    if (n >= NODE_ENTRIES_MIN || parent.children.length < 2) return parent
    // Merge the child with a neighbour when both fit in one node: left = j, right = j + 1.
    const j = i + 1 < parent.children.length ? i : i - 1
    const left = parent.children[j] as Node
    const right = parent.children[j + 1] as Node
    if (nodeLength(left) + nodeLength(right) > NODE_ENTRIES_MAX) return parent
    const merged = this.own(left)
    if (merged.leaf && right.leaf) {
      merged.keys.push(...right.keys)
      merged.vals.push(...right.vals)
    } else if (!merged.leaf && !right.leaf) {
      merged.keys.push(parent.keys[j] as Uint8Array, ...right.keys)
      merged.children.push(...right.children)
    } else {
      throw new Error('ordered-map invariant: siblings differ in depth')
    }
    parent.children.splice(j, 2, merged)
    parent.keys.splice(j, 1)
    return parent
  }
}
