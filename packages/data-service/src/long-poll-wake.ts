import type { DataResult } from './data-group'

/**
 * Whether an applied entry may have made messages ready, so that long-polling leases waiting
 * on its group should look again. Leases, acks and extends never make a message ready (the
 * expiry an apply may run first is found by the waiters' periodic recheck), nor does a
 * refused or rejected entry. Waking on them would loop: a waiter's empty lease is itself an
 * entry, whose apply would wake every other waiter, and so on, for as long as they wait.
 */
export function wakesLongPolls(result: DataResult): boolean {
  if (result.type === 'refused' || result.type === 'dropped' || result.type === 'fenced') return false
  if (result.type !== 'applied') return true
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
