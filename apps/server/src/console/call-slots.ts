import { ApiRequestError } from './api-errors'

/**
 * A bound on the console API's requests that call the cluster: at most `runningMax` at once,
 * at most `waitingMax` more waiting for a slot in arrival order; beyond that a request is
 * refused at once (429 TOO_MANY_REQUESTS), so a burst of requests (or a page left polling in
 * many tabs) cannot pile up calls and their answers in the node's memory. A request waits at
 * most `waitMaxMs` for its slot (then 429 too): past the HTTP request timeout its client is gone,
 * and a call made for it would only hold a slot from the next.
 */
export class CallSlots {
  readonly #runningMax: number
  readonly #waitingMax: number
  #running = 0
  readonly #waitMaxMs: number
  readonly #waiting: (() => void)[] = []
  readonly #what: string

  /** `what` names the slots in the 429 messages. */
  constructor(runningMax: number, waitingMax: number, waitMaxMs = 5_000, what = 'cluster calls') {
    this.#runningMax = runningMax
    this.#waitingMax = waitingMax
    this.#waitMaxMs = waitMaxMs
    this.#what = what
  }

  /**
   * Runs `call` once a slot is free and resolves or rejects as it does. Throws
   * ApiRequestError (429) without running it when every slot is taken and the line is full.
   */
  async run<T>(call: () => Promise<T>): Promise<T> {
    if (this.#running < this.#runningMax) {
      this.#running++
    } else {
      if (this.#waiting.length >= this.#waitingMax) {
        throw new ApiRequestError(
          429,
          'TOO_MANY_REQUESTS',
          `this node's console is running ${this.#runningMax} ${this.#what} and ${this.#waitingMax} more wait: try again in a moment`,
        )
      }
      // The call that finishes hands its slot over (the count stays), so a newcomer cannot take it first.
      await new Promise<void>((resolve, reject) => {
        const handOver = () => {
          clearTimeout(timer)
          resolve()
        }
        const timer = setTimeout(() => {
          const at = this.#waiting.indexOf(handOver)
          if (at >= 0) this.#waiting.splice(at, 1)
          reject(
            new ApiRequestError(
              429,
              'TOO_MANY_REQUESTS',
              `waited ${this.#waitMaxMs} ms for one of this node's ${this.#runningMax} console slots for ${this.#what}: try again in a moment`,
            ),
          )
        }, this.#waitMaxMs)
        this.#waiting.push(handOver)
      })
    }
    try {
      return await call()
    } finally {
      const next = this.#waiting.shift()
      if (next) next()
      else this.#running--
    }
  }

  get running(): number {
    return this.#running
  }

  get waiting(): number {
    return this.#waiting.length
  }
}
