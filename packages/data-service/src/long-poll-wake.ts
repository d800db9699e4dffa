import type { DataResult } from './data-group'

/**
 * Whether an applied entry may have made messages ready, so that long-polling leases waiting
 * on its partition should look again (DataGroupMachine.watchReady). Leases, acks, extends and purges never make a message ready
 * (the expiry or delayed release an apply may run first is found by the waiters, which look
 * again when the partition's next due time comes, or at their periodic recheck), nor does a
 * refused or rejected entry — unless the apply handed an ordered key's turn on (an ack of its
 * holder, a lease that deleted a holder past its TTL, a purge of a ready holder, a lease
 * expiry that dead-lettered one): the next message of the key is ready then. Waking on the
 * others would loop: a waiter's empty lease is itself an entry, whose apply would wake the
 * other waiters, and so on, for as long as they wait (an empty lease hands no turn on).
 */
export function wakesLongPolls(result: DataResult): boolean {
  if (result.type === 'refused' || result.type === 'dropped' || result.type === 'fenced') return false
  if (result.type !== 'applied') return true
  if ((result.turnsPassed ?? 0) > 0) return true
  switch (result.result.type) {
    case 'lease':
    case 'ack':
    case 'extend':
    case 'rejected':
    case 'purgeDead':
    case 'purgeReady':
      return false
    default:
      return true
  }
}

/**
 * Whether an applied entry took its partition away from the group's leases (a move's fence or
 * drop, a deleted queue's retirement): every long poll of the partition looks again at once, and
 * finds it gone (STALE_ROUTE, or QUEUE_NOT_FOUND), rather than at its periodic recheck.
 */
export function endsLongPolls(result: DataResult): boolean {
  return result.type === 'fenced' || result.type === 'dropped'
}
