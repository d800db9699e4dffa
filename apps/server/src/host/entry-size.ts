import { InvalidArgumentError } from '@mq/protocol'

/**
 * The largest Raft entry a node proposes: 32 MiB, twice the largest message a queue may allow
 * (16 MiB), and well below what one peer message may carry (the 64 MiB gRPC limit and the peer
 * transport's bounds). An entry is refused before it is appended, never after: a leader that
 * appended an entry no peer message can carry would hold its group at that entry for good (its
 * heartbeats still pass, so no election ends it). A request's entry can outgrow the request
 * (invalid UTF-8 in a string is rewritten as 3-byte U+FFFD, a NUL in a meta command's JSON as 6
 * bytes), so the check is on the encoded entry.
 */
export const ENTRY_BYTES_MAX = 32 * 1024 * 1024

/** `data`, the encoded entry of a command for group `groupId`; throws InvalidArgumentError when it is over ENTRY_BYTES_MAX. */
export function checkedEntry(groupId: number, data: Uint8Array): Uint8Array {
  if (data.length > ENTRY_BYTES_MAX) {
    throw new InvalidArgumentError(
      `the request makes a Raft entry of ${data.length} bytes for group ${groupId}, over the ${ENTRY_BYTES_MAX}-byte limit: send smaller batches or shorter values`,
      { groupId },
    )
  }
  return data
}
