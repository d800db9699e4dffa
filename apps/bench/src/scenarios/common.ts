import { randomBytes } from 'node:crypto'
import { MqClient } from '@mq/router-client'
import { BenchCluster, type ClusterFacts, GIVEN_CLUSTER_FACTS } from '../cluster'
import type { ScenarioResult } from '../result'
import type { RaftTiming } from '../timing'

/** Where a scenario runs: given servers, or a local cluster the bench started. */
export interface Target {
  /** Seed addresses; absent: start a local 3-node cluster for the run. */
  readonly servers?: readonly string[]
  /** Run the local cluster's server from source (tests). */
  readonly fromSource?: boolean
  /** The local cluster's Raft timing (default BENCH_DEFAULT_TIMING); not used with `servers`. */
  readonly timing?: Partial<RaftTiming>
  /**
   * What is known of `servers` (default: nothing, GIVEN_CLUSTER_FACTS): the suite passes its
   * own local cluster's facts with its addresses.
   */
  readonly facts?: ClusterFacts
  /** The CPU time `servers` used so far (the suite passes its local cluster's); none: unknown. */
  readonly serverCpuMs?: () => number | undefined
  /** The resident set of the largest of `servers` now (the suite passes its local cluster's); none: unknown. */
  readonly serverRssBytes?: () => number | undefined
}

export interface Env {
  readonly servers: readonly string[]
  readonly cluster: BenchCluster | undefined
  /** What the report says about the cluster (ScenarioResult params and notes). */
  readonly facts: ClusterFacts
  /** The CPU time the servers used so far (CpuMeter), when the bench knows their processes. */
  readonly serverCpuMs: (() => number | undefined) | undefined
  /** The largest server's resident set now (bytes), when the bench knows their processes. */
  readonly serverRssBytes: (() => number | undefined) | undefined
}

/** Runs `fn` against `target`, starting (and always stopping) a local cluster when needed. */
export async function withTarget<T>(target: Target, fn: (env: Env) => Promise<T>): Promise<T> {
  if (target.servers && target.servers.length > 0) {
    return fn({
      servers: target.servers,
      cluster: undefined,
      facts: target.facts ?? GIVEN_CLUSTER_FACTS,
      serverCpuMs: target.serverCpuMs,
      serverRssBytes: target.serverRssBytes,
    })
  }
  const cluster = await BenchCluster.start({
    fromSource: target.fromSource ?? false,
    ...(target.timing ? { timing: target.timing } : {}),
  })
  try {
    return await fn({
      servers: cluster.servers,
      cluster,
      facts: cluster.facts(),
      serverCpuMs: () => cluster.serverCpuMs(),
      serverRssBytes: () => cluster.serverRssBytes(),
    })
  } finally {
    await cluster.stop()
  }
}

/** `result` with the cluster's facts added: its params (timing) and its caveats (notes). */
export function withFacts(result: ScenarioResult, facts: ClusterFacts): ScenarioResult {
  return {
    ...result,
    params: { ...result.params, ...facts.params },
    notes: [...facts.notes, ...(result.notes ?? [])],
  }
}

export function connect(servers: readonly string[]): Promise<MqClient> {
  return MqClient.connect({ servers, deadlineMs: 30_000 })
}

/** A fresh queue name for one run. */
export function queueName(scenario: string): string {
  return `bench-${scenario}-${randomBytes(4).toString('hex')}`
}

/** Resolves after `ms` (pacing only, never synchronisation). */
export function pause(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms))
}

/** Milliseconds since `start` (a performance.now() reading). */
export function since(start: number): number {
  return performance.now() - start
}

/** Closes every client, ignoring failures (the run's result is already known). */
export async function closeAll(clients: readonly MqClient[]): Promise<void> {
  await Promise.allSettled(clients.map((c) => c.close()))
}
