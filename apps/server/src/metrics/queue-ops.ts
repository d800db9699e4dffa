import {
  LeaseOutcome,
  type LeaseResponse,
  type LeaseResultsResponse,
  type PartitionTarget,
  type ProduceResponse,
} from '@mq/protocol'
import type { NodeMetrics } from './node-metrics'

const QUEUE_SERVICE = '/mq.v1.Queue/'

/**
 * Counts the queue operations a successful Queue call carried out, from its request and
 * response: enqueued messages (not idempotent retries), leased messages and redeliveries,
 * acks, nacks, and settles that found the lease expired. A call is answered OK only by the
 * leader of the partition's group, so the counts are those of the partitions this node leads.
 * The queue label is bounded (NodeMetrics.queueLabels): past `queueSeriesMax` queue names,
 * operations are counted under QUEUE_OVERFLOW.
 */
export function countQueueOps(metrics: NodeMetrics, path: string, request: unknown, response: unknown): void {
  if (!path.startsWith(QUEUE_SERVICE) || request === undefined || response === undefined) return
  const queue = (request as { target?: PartitionTarget }).target?.queue
  if (!queue) return
  const labels = metrics.queueLabels(queue)
  switch (path.slice(QUEUE_SERVICE.length)) {
    case 'Produce': {
      const r = response as ProduceResponse
      if (!r.duplicate) metrics.enqueued.inc(labels, r.ids.length)
      return
    }
    case 'Lease': {
      const r = response as LeaseResponse
      if (r.messages.length > 0) metrics.leased.inc(labels, r.messages.length)
      const again = r.messages.filter((m) => m.deliveryCount > 1).length
      if (again > 0) metrics.redelivered.inc(labels, again)
      return
    }
    case 'Ack':
      settled(metrics, labels, response as LeaseResultsResponse, metrics.acked)
      return
    case 'Nack':
      settled(metrics, labels, response as LeaseResultsResponse, metrics.nacked)
      return
    case 'Extend':
      settled(metrics, labels, response as LeaseResultsResponse, undefined)
      return
  }
}

function settled(
  metrics: NodeMetrics,
  labels: { queue: string },
  response: LeaseResultsResponse,
  ok: NodeMetrics['acked'] | undefined,
): void {
  let done = 0
  let expired = 0
  for (const r of response.results) {
    if (r.outcome === LeaseOutcome.LEASE_OUTCOME_OK) done++
    else if (r.outcome === LeaseOutcome.LEASE_OUTCOME_EXPIRED) expired++
  }
  if (ok && done > 0) ok.inc(labels, done)
  if (expired > 0) metrics.expired.inc(labels, expired)
}
