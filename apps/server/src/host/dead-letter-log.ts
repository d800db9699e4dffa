import type { Logger } from '../log'
import type { ForwardFailure, ForwardRound } from './dead-letter-forwarder'

/** A dead-letter queue that cannot take messages is logged at most this often (per queue and target). */
export const DEAD_LETTER_LOG_MS = 60_000

/** Keys remembered for the rate limit at most (then forgotten at once). */
const LOGGED_KEYS_MAX = 1_000

/**
 * What the dead-letter forwarder's rounds did, for operators: counts (the node's
 * `mq_dead_letters_*_total`) and log lines — each message a target refused (it stays behind),
 * and a target that could not take messages at most once a minute per queue and target.
 */
export class DeadLetterLog {
  readonly counts = { forwarded: 0, refused: 0, failedRounds: 0 }
  readonly #log: Logger
  readonly #lastLogged = new Map<string, number>()
  readonly #now: () => number

  constructor(log: Logger, now: () => number = Date.now) {
    this.#log = log
    this.#now = now
  }

  note(round: ForwardRound): void {
    this.counts.forwarded += round.forwarded
    for (const f of round.failures) this.#failure(f)
  }

  #failure(f: ForwardFailure): void {
    const reason = f.error instanceof Error ? f.error.message : String(f.error)
    if (f.messageId !== undefined) {
      this.counts.refused++
      this.#log.warn(
        { queue: f.queue, partition: f.partition, messageId: f.messageId, target: f.target },
        `mq-server: dead letter ${f.queue}/${f.partition}/${f.messageId} stays in the dead-letter list of ${f.queue}: dead-letter queue ${f.target} refused it (${reason})`,
      )
      return
    }
    this.counts.failedRounds++
    const key = `${f.queue} ${f.target}`
    const now = this.#now()
    if (now - (this.#lastLogged.get(key) ?? Number.NEGATIVE_INFINITY) < DEAD_LETTER_LOG_MS) return
    if (this.#lastLogged.size >= LOGGED_KEYS_MAX) this.#lastLogged.clear()
    this.#lastLogged.set(key, now)
    this.#log.warn(
      { queue: f.queue, partition: f.partition, target: f.target },
      `mq-server: cannot move dead letters of ${f.queue}/${f.partition} to dead-letter queue ${f.target} yet (${reason}); they stay in the dead-letter list of ${f.queue} meanwhile`,
    )
  }
}
