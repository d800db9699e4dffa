import type { PeerCertificate } from 'node:tls'
import { isRefusedRequest, PermissionDeniedError } from '@mq/protocol'

/**
 * The node ids a peer's certificate names: its subject's common name(s). Not its subject
 * alternative names: those name hosts (localhost, shared host names), which a node id may
 * equal, so every certificate valid for that host would speak for that node.
 * `mq-server dev-certs --node-ids` writes each node's certificate with CN = its id.
 */
export function certificateNames(cert: PeerCertificate | undefined): Set<string> {
  const cn = cert?.subject?.CN
  return new Set(Array.isArray(cn) ? cn : cn ? [cn] : [])
}

/**
 * The node ids a peer call speaks for, read from its request message: a Raft batch's sender
 * and the sender of each of its messages, a heartbeat's node, an image fetch's asker. Empty
 * for other methods (they act for the cluster, not for one node), and for bytes that did not
 * decode (a RefusedRequest).
 */
export function claimedNodes(method: string, message: unknown): string[] {
  // Bytes that did not decode: their handler answers INVALID_ARGUMENT, acting for no node.
  if (isRefusedRequest(message)) return []
  if (method === 'mq.v1.Peer/Raft') {
    const batch = message as { fromNode?: unknown; messages?: readonly { from?: unknown }[] }
    const ids = new Set<string>([String(batch?.fromNode ?? '')])
    for (const m of batch?.messages ?? []) ids.add(String(m?.from ?? ''))
    return [...ids]
  }
  if (method === 'mq.v1.Peer/Heartbeat') return [String((message as { nodeId?: unknown })?.nodeId ?? '')]
  if (method === 'mq.v1.Peer/FetchImage') {
    // The asking follower: only a replica of the group is served (NodeImages.fetch), so it
    // must be named (an empty name went unchecked, and any member read any group's images).
    return [String((message as { nodeId?: unknown })?.nodeId ?? '')]
  }
  return []
}

/**
 * Throws PermissionDeniedError unless the caller's certificate (`cert`) names every node the
 * call speaks for (`--tls-peer-ids`): a cluster member, holding the peer secret and a
 * certificate of the CA, still cannot vote, replicate or heartbeat as another node.
 */
export function checkPeerIdentity(method: string, message: unknown, cert: PeerCertificate | undefined): void {
  const claimed = claimedNodes(method, message)
  if (claimed.length === 0) return
  const names = certificateNames(cert)
  const foreign = claimed.find((id) => !names.has(id))
  if (foreign === undefined) return
  if (foreign === '')
    throw new PermissionDeniedError(
      `${method} names no node it speaks for (--tls-peer-ids: the call must name its node, whose id the caller's certificate must name)`,
    )
  const held = quotedNames(names) || 'no name (or no certificate)'
  throw new PermissionDeniedError(
    `${method} speaks for node ${JSON.stringify(foreign)}, but the caller's certificate names ${held} (--tls-peer-ids: each node needs a certificate whose CN is its id)`,
  )
}

/** The names, each quoted, comma-separated ('' for none): how refusals show a certificate's names. */
export function quotedNames(names: ReadonlySet<string>): string {
  return [...names].map((n) => JSON.stringify(n)).join(', ')
}
