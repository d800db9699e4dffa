import type { PeerCertificate } from 'node:tls'
import { PermissionDeniedError } from '@mq/protocol'

/**
 * The names a peer's certificate gives its holder: the subject's common name and the DNS
 * names of its subject alternative names. `mq-server dev-certs --node-ids` writes each
 * node's certificate with its id as both.
 */
export function certificateNames(cert: PeerCertificate | undefined): Set<string> {
  const names = new Set<string>()
  if (!cert) return names
  const cn = cert.subject?.CN
  for (const name of Array.isArray(cn) ? cn : cn ? [cn] : []) names.add(name)
  // Node's form: "DNS:n1, IP Address:127.0.0.1, DNS:localhost" (a name with a comma is quoted).
  for (const part of (cert.subjectaltname ?? '').split(', ')) {
    if (part.startsWith('DNS:')) names.add(part.slice(4))
  }
  return names
}

/**
 * The node ids a peer call speaks for, read from its request message: a Raft batch's sender
 * and the sender of each of its messages, a heartbeat's node. Empty for other methods (they
 * act for the cluster, not for one node).
 */
export function claimedNodes(method: string, message: unknown): string[] {
  if (method === 'mq.v1.Peer/Raft') {
    const batch = message as { fromNode?: unknown; messages?: readonly { from?: unknown }[] }
    const ids = new Set<string>([String(batch?.fromNode ?? '')])
    for (const m of batch?.messages ?? []) ids.add(String(m?.from ?? ''))
    return [...ids]
  }
  if (method === 'mq.v1.Peer/Heartbeat') return [String((message as { nodeId?: unknown })?.nodeId ?? '')]
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
  const held =
    names.size > 0 ? [...names].map((n) => JSON.stringify(n)).join(', ') : 'no name (or no certificate)'
  throw new PermissionDeniedError(
    `${method} speaks for node ${JSON.stringify(foreign)}, but the caller's certificate names ${held} (--tls-peer-ids: each node needs a certificate of its own id)`,
  )
}
