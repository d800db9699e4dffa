import { round } from './histogram'

/**
 * The Raft timing of a cluster: a tick's length and how many ticks make an election timeout and
 * a heartbeat interval. Failover stalls are bound by it (a follower waits an election timeout
 * before it stands), so every figure taken on a cluster says which timing it ran with.
 */
export interface RaftTiming {
  readonly tickMs: number
  readonly electionTicks: number
  readonly heartbeatTicks: number
}

/**
 * mq-server's own defaults (apps/server/src/config.ts, `CONFIG_DEFAULTS`): what a deployment
 * runs with unless it sets them. A test reads that file so that a change there shows here.
 */
export const SERVER_DEFAULT_TIMING: RaftTiming = { tickMs: 50, electionTicks: 10, heartbeatTicks: 2 }

/**
 * What mq-bench's own clusters run with unless `--tick-ms` says otherwise: a 20 ms tick (the
 * figures in the README were taken with it, so it stays for comparability) and the server's
 * election and heartbeat ticks, set explicitly so that the report states them as run.
 */
export const BENCH_DEFAULT_TIMING: RaftTiming = {
  tickMs: 20,
  electionTicks: SERVER_DEFAULT_TIMING.electionTicks,
  heartbeatTicks: SERVER_DEFAULT_TIMING.heartbeatTicks,
}

/** "a 20 ms Raft tick, election timeout 10 ticks (200 ms), heartbeat 2 ticks". */
export function describeTiming(t: RaftTiming): string {
  return `a ${t.tickMs} ms Raft tick, election timeout ${t.electionTicks} ticks (${t.tickMs * t.electionTicks} ms), heartbeat ${t.heartbeatTicks} ticks`
}

/**
 * One line that puts `t` next to mq-server's default, e.g. for a report header: how much
 * faster (or slower) elections are here than in a default deployment.
 */
export function timingAgainstDefault(t: RaftTiming): string {
  const d = SERVER_DEFAULT_TIMING
  const here = t.tickMs * t.electionTicks
  const there = d.tickMs * d.electionTicks
  const ratio = there / here
  const relation =
    here === there
      ? 'the same election timeout as'
      : `elections time out ${ratio > 1 ? `${round(ratio, 2)}× sooner` : `${round(1 / ratio, 2)}× later`} than with`
  return `${describeTiming(t)}: ${relation} mq-server's default (${describeTiming(d)})`
}
