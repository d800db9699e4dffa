import type { MqClient } from '@mq/router-client'
import type { History } from './history'
import type { Prng } from './prng'

/** The queue grows to at most this many partitions (one at a time). */
export const GROWN_PARTITIONS_MAX = 8

/** Tries of a resume (one a second) before the scaler gives up: the drain then finds the queue paused. */
const RESUME_TRIES_MAX = 60

export interface ScalerResult {
  /** scaleDataGroups, setMetaVoters, setReplicationFactor, partition growth, pause, throttle and node removal calls that were accepted. */
  readonly calls: number
  /** Calls refused (no meta leader during a fault, a plan under way): the scaler goes on. */
  readonly refused: number
}

/**
 * Scales the data groups up and down while the nemesis runs its faults: every 3–8 s (drawn
 * from `prng`) calls `scaleDataGroups(n)` with n alternately above and below the current
 * count, between 2 and `groupsMax`. One call in four instead resizes the meta group
 * (`setMetaVoters`): to 5 voters when 5 nodes are alive, back to 3 when it has 5; one in five
 * sets the replication factor likewise, 3 to 5 and back (`setReplicationFactor`); and one in
 * five adds a partition to `queue` (up to GROWN_PARTITIONS_MAX; not when `grow` is false: a
 * queue with ordered keys keeps its count), which the workloads' producers
 * and consumers must find and use; one in five pauses `queue` for 0.5–2 s and resumes it, or
 * limits its deliveries to 20–500 a second for as long and lifts the limit (retried until
 * lifted: the drain needs it); and one in four removes a `removable` (retired) node that
 * is down and holds nothing, when there is one (RemoveNode). Each accepted call is recorded in the history as a fault.
 * Partitions then move between groups, and meta voters come and go, while nodes die, pause and
 * are cut off. Ends at `untilMs` (wall clock).
 */
export async function runScaler(
  client: MqClient,
  queue: string,
  prng: Prng,
  groupsMax: number,
  history: History,
  untilMs: number,
  log: (line: string) => void,
  removable: (nodeId: string) => boolean = () => false,
  grow = true,
): Promise<ScalerResult> {
  const sleep = (ms: number) =>
    new Promise((r) => setTimeout(r, Math.max(0, Math.min(ms, untilMs - Date.now()))))
  let calls = 0
  let refused = 0
  let up = true
  /** Lifts a pause or a rate limit: retried until it is lifted (the drain needs it). */
  const release = async (update: { paused: false } | { deliveryRate: 0 }): Promise<void> => {
    for (let tries = 1; ; tries++) {
      try {
        await client.admin.updateQueue(queue, update)
        return
      } catch (error) {
        if (tries >= RESUME_TRIES_MAX) throw error
        await new Promise((r) => setTimeout(r, 1_000))
      }
    }
  }
  await sleep(prng.int(3_000, 8_000))
  while (Date.now() < untilMs) {
    const startMs = Date.now()
    let groups = 0
    let what = 'scale-data-groups'
    try {
      if (prng.int(0, 4) === 0 && grow) {
        const partitions = (await client.admin.describeQueue(queue)).partitions.length
        if (partitions < GROWN_PARTITIONS_MAX) {
          what = `grow-partitions ${partitions + 1}`
          await client.admin.updateQueue(queue, { partitions: partitions + 1 })
          const description = `grow-partitions ${queue} ${partitions} -> ${partitions + 1}`
          history.add({ kind: 'fault', worker: 'scaler', startMs, endMs: Date.now(), description })
          log(`scaler: ${description}`)
          calls++
          await sleep(prng.int(3_000, 8_000))
          continue
        }
      }
      if (prng.int(0, 4) === 0) {
        // Held back for 0.5–2 s: paused, or its deliveries limited to 20–500 a second.
        const heldMs = prng.int(500, 2_000)
        const rate = prng.int(0, 1) === 0 ? prng.int(20, 500) : 0
        what = rate > 0 ? 'throttle-queue' : 'pause-queue'
        try {
          await client.admin.updateQueue(queue, rate > 0 ? { deliveryRate: rate } : { paused: true })
          await new Promise((r) => setTimeout(r, heldMs))
        } finally {
          // Also when the change failed: its answer may be what was lost.
          what = rate > 0 ? 'unthrottle-queue' : 'resume-queue'
          await release(rate > 0 ? { deliveryRate: 0 } : { paused: false })
        }
        const description =
          rate > 0
            ? `throttle-queue ${queue} to ${rate}/s for ${heldMs} ms, lifted after ${Date.now() - startMs} ms`
            : `pause-queue ${queue} for ${heldMs} ms, resumed after ${Date.now() - startMs} ms`
        history.add({ kind: 'fault', worker: 'scaler', startMs, endMs: Date.now(), description })
        log(`scaler: ${description}`)
        calls++
        await sleep(prng.int(3_000, 8_000))
        continue
      }
      if (prng.int(0, 3) === 0) {
        // A retired node (`removable`: never started again, which a removed node may not be)
        // that is down and holds nothing once its replicas were replaced: removed.
        const s = await client.admin.clusterStatus()
        const meta = new Set([...s.metaVoters, ...s.metaLearners, s.metaChange?.add ?? ''])
        const idle = s.nodes.find(
          (n) => removable(n.nodeId) && !n.alive && n.groupIds.length === 0 && !meta.has(n.nodeId),
        )
        if (idle) {
          what = `remove-node ${idle.nodeId}`
          await client.admin.removeNode(idle.nodeId)
          const description = `remove-node ${idle.nodeId}`
          history.add({ kind: 'fault', worker: 'scaler', startMs, endMs: Date.now(), description })
          log(`scaler: ${description}`)
          calls++
          await sleep(prng.int(3_000, 8_000))
          continue
        }
      }
      if (prng.int(0, 4) === 0) {
        // The replication factor: to 5 when 5 nodes are alive, back to 3 from 5 (only between
        // the two: a group of 1 or 2 replicas does not survive the faults a run injects).
        const s = await client.admin.clusterStatus()
        const factor = s.replicationFactor
        const wanted =
          factor >= 5 ? 3 : factor === 3 && s.nodes.filter((n) => n.alive).length >= 5 ? 5 : factor
        if (wanted !== factor) {
          what = `set-replication-factor ${wanted}`
          const r = await client.admin.setReplicationFactor(wanted)
          const description = `set-replication-factor ${r.previous} -> ${wanted}`
          history.add({ kind: 'fault', worker: 'scaler', startMs, endMs: Date.now(), description })
          log(`scaler: ${description}`)
          calls++
          await sleep(prng.int(3_000, 8_000))
          continue
        }
      }
      if (prng.int(0, 3) === 0) {
        const s = await client.admin.clusterStatus()
        const voters = s.metaVotersWanted || s.metaVoters.length
        const wanted = voters >= 5 ? 3 : s.nodes.filter((n) => n.alive).length >= 5 ? 5 : voters
        if (wanted !== voters) {
          what = `set-meta-voters ${wanted}`
          await client.admin.setMetaVoters(wanted)
          const description = `set-meta-voters ${voters} -> ${wanted}`
          history.add({ kind: 'fault', worker: 'scaler', startMs, endMs: Date.now(), description })
          log(`scaler: ${description}`)
          calls++
          await sleep(prng.int(3_000, 8_000))
          continue
        }
      }
      const current = (await client.admin.clusterStatus()).groups.filter((g) => g.groupId !== 0).length
      if (up && current >= groupsMax) up = false
      else if (!up && current <= 2) up = true
      groups = up
        ? prng.int(current + 1, Math.max(current + 1, groupsMax))
        : prng.int(2, Math.max(2, current - 1))
      const plan = await client.admin.scaleDataGroups(groups)
      const description = `scale-data-groups ${current} -> ${groups} (${plan ? `${plan.movesTotal} moves, ${plan.state}` : 'no plan'})`
      history.add({ kind: 'fault', worker: 'scaler', startMs, endMs: Date.now(), description })
      log(`scaler: ${description}`)
      calls++
      up = !up
    } catch (error) {
      log(
        `scaler: ${what === 'scale-data-groups' ? `${what} to ${groups}` : what} refused: ${(error as Error).message}`,
      )
      refused++
    }
    await sleep(prng.int(3_000, 8_000))
  }
  return { calls, refused }
}
