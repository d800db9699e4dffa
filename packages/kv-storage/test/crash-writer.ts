/**
 * The child process of the crash-safety test (run with `node --conditions=source --import
 * tsx`). Opens the database at argv[2], recovers `GROUPS` groups and appends to each of them
 * concurrently through one LogStore, so the group commit batches several groups per fsync.
 * Each group's loop: append a few entries (sometimes replacing the ones it just appended with
 * a higher term, to exercise truncation), set the hard state, sometimes compact, write a
 * state-machine key (stage + flush, or the async write), then print `ack <json>` with the
 * group's state. Its batches are stamped for a durability mark, as a node's are.
 * It runs until killed (or for ROUNDS_MAX cycles, a bound that a test never reaches).
 */
import type { Entry } from '@mq/raft-core'
import { DurabilityMark } from '../src/durability-mark'
import type { BatchOp } from '../src/engine'
import { LevelEngine } from '../src/level-engine'
import { stateMachineKey } from '../src/log-keys'
import { LogStore } from '../src/log-store'

const GROUPS = 4
const ROUNDS_MAX = 1_000_000

const path = process.argv[2]
const seed = Number(process.argv[3] ?? 1)
if (!path) throw new Error('usage: crash-writer <db path> <seed>')

let state = seed >>> 0 || 1
function random(n: number): number {
  state ^= state << 13
  state >>>= 0
  state ^= state >>> 17
  state ^= state << 5
  state >>>= 0
  return state % n
}

export function entryText(groupId: number, index: number, term: number): string {
  return `g${groupId}:i${index}:t${term}`
}

function makeEntry(groupId: number, index: number, term: number): Entry {
  return {
    index,
    term,
    type: 0,
    timestampMs: index,
    data: new TextEncoder().encode(entryText(groupId, index, term).padEnd(64 + random(64), '.')),
  }
}

const engine = await LevelEngine.open(path)
const store = new LogStore(engine, { mark: await DurabilityMark.open(engine, path) })
const groups = await Promise.all(Array.from({ length: GROUPS }, (_, g) => store.openGroup(g + 1)))
process.stdout.write('ready\n')

await Promise.all(
  groups.map(async (log) => {
    let term =
      log.lastIndex() >= log.firstIndex() ? log.term(log.lastIndex()) : log.term(log.firstIndex() - 1)
    for (let round = 0; round < ROUNDS_MAX; round++) {
      term++
      const from = log.lastIndex() + 1
      const n = 1 + random(20)
      log.append(Array.from({ length: n }, (_, i) => makeEntry(log.groupId, from + i, term)))
      if (random(4) === 0 && n > 1) {
        // Replace the tail appended this cycle (not yet acknowledged) with a higher term.
        term++
        const at = from + random(n)
        log.append(Array.from({ length: 1 + random(5) }, (_, i) => makeEntry(log.groupId, at + i, term)))
      }
      const last = log.lastIndex()
      const commit = Math.max(log.initialState().hardState.commit, last - random(3))
      log.setHardState({ term, vote: 'n1', commit })
      if (random(10) === 0 && commit >= log.firstIndex()) {
        const snapIndex = commit - random(3)
        if (snapIndex >= log.firstIndex()) {
          const snap = {
            meta: {
              index: snapIndex,
              term: log.term(snapIndex),
              conf: { voters: ['n1'], learners: [], votersOutgoing: [], learnersNext: [] },
            },
            data: new TextEncoder().encode(`snapshot of g${log.groupId} at ${snapIndex}`),
          }
          log.compact(snap, snapIndex - random(3))
        }
      }
      const applied: BatchOp = {
        type: 'put',
        key: stateMachineKey(log.groupId, ['applied']),
        value: new TextEncoder().encode(String(commit)),
      }
      // Odd groups stage their state-machine op and flush; even groups use the async write
      // (stage, waiting for room, then flush) as the data service does.
      if (log.groupId % 2 === 1) {
        store.stage([applied])
        await store.durability.flush()
      } else {
        await store.commit.write([applied])
      }
      const ack = { g: log.groupId, first: log.firstIndex(), last, lastTerm: log.term(last), commit }
      process.stdout.write(`ack ${JSON.stringify(ack)}\n`)
    }
  }),
)
