import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Entry } from '@mq/raft-core'
import { afterEach, beforeEach } from 'vitest'
import type { BatchOp, Engine, EngineSnapshot, KeyRange, KeyValue, WriteOptions } from '../src/engine'

/** A fresh temporary directory; `remove()` deletes it. */
export async function tempDir(prefix: string): Promise<{ path: string; remove: () => Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), `${prefix}-`))
  return { path, remove: () => rm(path, { recursive: true, force: true }) }
}

/** In a describe block: a fresh temporary directory for each test (`dir.path`), removed after it. */
export function useTempDir(prefix: string): { readonly path: string } {
  let current: { path: string; remove: () => Promise<void> } | undefined
  beforeEach(async () => {
    current = await tempDir(prefix)
  })
  afterEach(async () => {
    await current?.remove()
    current = undefined
  })
  return {
    get path(): string {
      if (!current) throw new Error('useTempDir: the directory exists only inside a test')
      return current.path
    },
  }
}

export function entry(index: number, term: number, text = `e${index}`): Entry {
  return {
    index,
    term,
    type: 0,
    timestampMs: 1_700_000_000_000 + index,
    data: new TextEncoder().encode(text),
  }
}

export function entries(lo: number, hi: number, term: number): Entry[] {
  const out: Entry[] = []
  for (let i = lo; i < hi; i++) out.push(entry(i, term))
  return out
}

/**
 * An engine wrapper whose writes can be held at a gate (to observe what gathers while a
 * batch is in flight) or made to fail. Counts writes.
 */
export class GatedEngine implements Engine {
  writes: { ops: readonly BatchOp[]; sync: boolean }[] = []
  failNext: Error | undefined
  private gate: Promise<void> | undefined
  private openGate: (() => void) | undefined
  private arrivedWaiters: (() => void)[] = []

  constructor(private readonly inner: Engine) {}

  hold(): void {
    this.gate = new Promise((resolve) => {
      this.openGate = resolve
    })
  }

  release(): void {
    this.openGate?.()
    this.gate = undefined
  }

  /** Resolves once a write has arrived at the engine (held or not). */
  arrived(count: number): Promise<void> {
    if (this.writes.length >= count) return Promise.resolve()
    return new Promise((resolve) => {
      const check = () => (this.writes.length >= count ? resolve() : this.arrivedWaiters.push(check))
      this.arrivedWaiters.push(check)
    })
  }

  async write(ops: readonly BatchOp[], options: WriteOptions): Promise<void> {
    this.writes.push({ ops, sync: options.sync })
    for (const w of this.arrivedWaiters.splice(0)) w()
    if (this.gate) await this.gate
    if (this.failNext) {
      const err = this.failNext
      this.failNext = undefined
      throw err
    }
    return this.inner.write(ops, options)
  }

  get(key: Uint8Array): Promise<Uint8Array | undefined> {
    return this.inner.get(key)
  }
  getMany(keys: readonly Uint8Array[]): Promise<(Uint8Array | undefined)[]> {
    return this.inner.getMany(keys)
  }
  range(range: KeyRange): Promise<KeyValue[]> {
    return this.inner.range(range)
  }
  keys(range: KeyRange): Promise<Uint8Array[]> {
    return this.inner.keys(range)
  }
  snapshot(): Promise<EngineSnapshot> {
    return this.inner.snapshot()
  }
  close(): Promise<void> {
    return this.inner.close()
  }
}
