import { QueueNotFoundError } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import type { Logger } from '../log'
import { DEAD_LETTER_LOG_MS, DeadLetterLog } from './dead-letter-log'

describe('DeadLetterLog', () => {
  it('counts, logs every refused message, and a failing target at most once a minute per queue and target', () => {
    const lines: string[] = []
    const log = { warn: (_fields: unknown, line: string) => lines.push(line) } as unknown as Logger
    let now = 0
    const dl = new DeadLetterLog(log, () => now)
    const missing = {
      queue: 'jobs',
      partition: 0,
      target: 'gone',
      error: new QueueNotFoundError('queue gone does not exist'),
    }
    dl.note({ forwarded: 3, failures: [missing, { ...missing, partition: 1 }] })
    dl.note({
      forwarded: 2,
      failures: [{ queue: 'jobs', partition: 1, target: 'small', messageId: 9, error: new Error('too big') }],
    })
    now = DEAD_LETTER_LOG_MS - 1
    dl.note({ forwarded: 0, failures: [missing] })
    expect(dl.counts).toEqual({ forwarded: 5, refused: 1, failedRounds: 3 })
    expect(lines).toEqual([
      'mq-server: cannot move dead letters of jobs/0 to dead-letter queue gone yet (queue gone does not exist); they stay in the dead-letter list of jobs meanwhile',
      'mq-server: dead letter jobs/1/9 stays in the dead-letter list of jobs: dead-letter queue small refused it (too big)',
    ])
    now = DEAD_LETTER_LOG_MS
    dl.note({ forwarded: 0, failures: [missing] })
    expect(lines).toHaveLength(3)
  })
})
