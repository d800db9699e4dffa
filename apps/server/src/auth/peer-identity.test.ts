import type { PeerCertificate } from 'node:tls'
import { ErrorCode, type MqError, PeerService } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { certificateNames, checkPeerIdentity, claimedNodes } from './peer-identity'

/** The fields of a peer certificate that name its holder, as Node's TLS socket gives them. */
const cert = (cn: string | string[] | undefined, subjectaltname?: string) =>
  ({ subject: cn === undefined ? {} : { CN: cn }, subjectaltname }) as unknown as PeerCertificate

const RAFT = 'mq.v1.Peer/Raft'
const HEARTBEAT = 'mq.v1.Peer/Heartbeat'

describe('peer identity (--tls-peer-ids)', () => {
  it("reads a certificate's node ids from its CN only, not its alternative names (hosts)", () => {
    expect(certificateNames(cert('n1', 'DNS:n2, DNS:localhost, IP Address:127.0.0.1'))).toEqual(
      new Set(['n1']),
    )
    expect(certificateNames(cert(['a', 'b']))).toEqual(new Set(['a', 'b']))
    expect(certificateNames(cert(undefined, 'DNS:n1'))).toEqual(new Set())
    expect(certificateNames(undefined)).toEqual(new Set())
  })

  it("takes the nodes a call speaks for from a Raft batch (its sender and each message's) or a heartbeat", () => {
    expect(claimedNodes(RAFT, { fromNode: 'n1', messages: [{ from: 'n1' }, { from: 'n2' }] })).toEqual([
      'n1',
      'n2',
    ])
    expect(claimedNodes(HEARTBEAT, { nodeId: 'n3' })).toEqual(['n3'])
    expect(claimedNodes('mq.v1.Peer/FetchImage', { groupId: 1, nodeId: 'n2' })).toEqual(['n2'])
    expect(claimedNodes('mq.v1.Peer/FetchImage', { groupId: 1, nodeId: '' })).toEqual([''])
    expect(claimedNodes('mq.v1.Peer/Probe', { nodeId: 'n3' })).toEqual([])
    // A malformed message claims '' (which no certificate names), never throws.
    expect(claimedNodes(RAFT, null)).toEqual([''])
  })

  it('leaves bytes that are not a request to their handler (INVALID_ARGUMENT): they speak for no node', () => {
    // PERMISSION_DENIED "names no node" would misname what is wrong; nothing acts on them.
    for (const method of [RAFT, HEARTBEAT, 'mq.v1.Peer/FetchImage']) {
      const refused = PeerService.raft.requestDeserialize(Buffer.from([0x0f]))
      expect(claimedNodes(method, refused)).toEqual([])
      expect(() => checkPeerIdentity(method, refused, cert('n1', 'DNS:n1'))).not.toThrow()
    }
  })

  it('lets a node speak for itself only, naming both sides when it refuses', () => {
    const n1 = cert('n1', 'DNS:n1, IP Address:127.0.0.1')
    expect(() => checkPeerIdentity(RAFT, { fromNode: 'n1', messages: [{ from: 'n1' }] }, n1)).not.toThrow()
    expect(() => checkPeerIdentity(HEARTBEAT, { nodeId: 'n1' }, n1)).not.toThrow()
    expect(() => checkPeerIdentity('mq.v1.Peer/MovePartition', {}, undefined)).not.toThrow()
    try {
      checkPeerIdentity(RAFT, { fromNode: 'n1', messages: [{ from: 'n2' }] }, n1)
      expect.unreachable()
    } catch (error) {
      expect((error as MqError).code).toBe(ErrorCode.PermissionDenied)
      expect((error as Error).message).toMatch(
        /^mq\.v1\.Peer\/Raft speaks for node "n2", but the caller's certificate names "n1"/,
      )
    }
    expect(() => checkPeerIdentity(HEARTBEAT, { nodeId: 'n1' }, undefined)).toThrow(
      /names no name \(or no certificate\)/,
    )
    expect(() => checkPeerIdentity(HEARTBEAT, { nodeId: 'n1' }, cert('mq node'))).toThrow(/names "mq node"/)
    // An image fetch names its asker: one that does not was not checked (any member read any image).
    expect(() => checkPeerIdentity('mq.v1.Peer/FetchImage', { groupId: 1, nodeId: 'n1' }, n1)).not.toThrow()
    expect(() => checkPeerIdentity('mq.v1.Peer/FetchImage', { groupId: 1, nodeId: '' }, n1)).toThrow(
      /^mq\.v1\.Peer\/FetchImage names no node it speaks for/,
    )
  })
})
