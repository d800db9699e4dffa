import type { ProbeResponse } from '@mq/protocol'

/** Tries of the check, and the wait between two (a listener just opened, a resolver warming up). */
const TRIES = 3
const RETRY_MS = 1_000

/**
 * What is wrong with the address this node gives the cluster (`--advertise`, by default
 * `--listen`), asked of the node itself once it serves: the meta group hands that address to
 * every peer and client, so one that reaches another node, or nothing, made a node that looked
 * alive (its heartbeats answered) while every replica change to it waited, unexplained (an
 * operator's walkthrough). Probes it (Peer.Probe) up to 3 times; undefined when it answers
 * with this node's id. Only a warning: a node may not reach its own public address (a NAT
 * without hairpinning) where others do. Tries no more, and says nothing (undefined), once
 * `wanted` says no: a node that stops meanwhile probed on after its stop, over a client opened
 * after its clients were closed, and exited up to seconds late (and a probe closed under it
 * says the address is unreachable); the wait between tries holds no process up.
 */
export async function advertiseProblem(
  self: string,
  advertise: string,
  probe: (address: string) => Promise<Pick<ProbeResponse, 'nodeId'>>,
  options: { readonly wait?: (ms: number) => Promise<void>; readonly wanted?: () => boolean } = {},
): Promise<string | undefined> {
  const wait = options.wait ?? ((ms) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref()))
  const wanted = options.wanted ?? (() => true)
  let last: unknown
  for (let i = 0; i < TRIES; i++) {
    if (i > 0) await wait(RETRY_MS)
    if (!wanted()) return undefined
    try {
      const { nodeId } = await probe(advertise)
      if (nodeId === self || !wanted()) return undefined
      return `--advertise ${advertise} reaches node ${nodeId || '(an unnamed one)'}, not node ${self}: the cluster sends what is meant for ${self} there; give this node an address of its own (--advertise, default --listen)`
    } catch (error) {
      last = error
    }
  }
  if (!wanted()) return undefined
  return `node ${self} cannot reach its own --advertise ${advertise} (${(last as Error)?.message ?? last}): the cluster gives that address to its peers and clients, which may not reach it either; check --advertise (default --listen)`
}
