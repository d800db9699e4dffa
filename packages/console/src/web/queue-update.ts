import type { QueueConfigInfo, UpdateQueueBody } from '../api-types'

/** The settings the queue update form edits (all numbers). */
export const UPDATE_FORM_KEYS = [
  'visibilityTimeoutMs',
  'maxDeliveries',
  'queueLengthMax',
  'messageTtlMs',
  'deliveryRate',
  'retryBackoffMinMs',
  'retryBackoffMaxMs',
  'partitions',
] as const
export type UpdateFormKey = (typeof UPDATE_FORM_KEYS)[number]

/**
 * The body the update form posts: each field whose value differs from the one the form was
 * drawn with (`drawn`), as a number. A field left as drawn, or emptied, is not sent: a form
 * open for a while must not undo what another admin changed since (nor send an emptied field
 * as 0), and a cluster below a setting's format level refuses that setting even unchanged.
 * An empty body means nothing changed.
 */
export function changedSettings(
  drawn: QueueConfigInfo,
  fields: Readonly<Record<UpdateFormKey, string>>,
): UpdateQueueBody {
  const update: { -readonly [K in UpdateFormKey]?: number } = {}
  for (const key of UPDATE_FORM_KEYS) {
    const text = fields[key].trim()
    if (text !== '' && Number(text) !== drawn[key]) update[key] = Number(text)
  }
  return update
}
