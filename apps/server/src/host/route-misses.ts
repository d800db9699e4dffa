/** How long a meta answer that a queue does not exist is believed, at most. */
export const ROUTE_MISS_MS = 1_000
/** Queue names remembered as missing, at most (the oldest is forgotten first). */
export const ROUTE_MISSES_MAX = 10_000

/** A meta answer for one queue: its route (undefined: no such queue) at route epoch `epoch`. */
export interface RouteAnswer<Route> {
  readonly epoch: number
  readonly route: Route | undefined
}

/**
 * The route lookups of a node without a meta replica: the queues the meta leader answered it
 * does not know, remembered for ROUTE_MISS_MS, and the lookups under way, shared by the
 * requests for the same queue. Without it every data request for an unknown queue (a
 * misconfigured or hostile client; the SDK asks the meta group first) was a GetRoutes call to
 * the meta leader, and a burst of them as many calls at once.
 *
 * A miss answers only requests whose route epoch it covers: a client routed after the queue
 * was created carries a newer epoch and is looked up again; so is one that joined a lookup
 * answered at an older epoch than its own. A request that carries no epoch (0) for a queue
 * created within the last second may be told it is not here, once more.
 */
export class RouteMisses<Route> {
  readonly #missed = new Map<string, { readonly epoch: number; readonly untilMs: number }>()
  readonly #lookups = new Map<string, Promise<RouteAnswer<Route>>>()
  readonly #nowMs: () => number

  constructor(nowMs: () => number = () => performance.now()) {
    this.#nowMs = nowMs
  }

  /**
   * The route of `queue` for a request routed at `minEpoch`: undefined when a recent miss
   * covers it, else from the lookup under way or from `fetch()`.
   */
  async lookup(
    queue: string,
    minEpoch: number,
    fetch: () => Promise<RouteAnswer<Route>>,
  ): Promise<Route | undefined> {
    if (this.#missing(queue, minEpoch)) return undefined
    let answer = await this.#shared(queue, fetch)
    // Asked before the client's epoch was committed: the answer may predate the queue. Asked
    // again, with the others so answered: a lookup under way now began after the first ended,
    // so after this request came (each asked on its own before: a burst, as many calls).
    if (answer.epoch < minEpoch) answer = await this.#shared(queue, fetch)
    if (answer.route === undefined) this.#remember(queue, answer.epoch)
    else this.#missed.delete(queue)
    return answer.route
  }

  /** The lookup of `queue` under way, else one started with `fetch()`. */
  #shared(queue: string, fetch: () => Promise<RouteAnswer<Route>>): Promise<RouteAnswer<Route>> {
    let pending = this.#lookups.get(queue)
    if (!pending) {
      pending = fetch().finally(() => this.#lookups.delete(queue))
      this.#lookups.set(queue, pending)
    }
    return pending
  }

  /** Queue names remembered as missing (for tests and metrics). */
  get size(): number {
    return this.#missed.size
  }

  #missing(queue: string, minEpoch: number): boolean {
    const miss = this.#missed.get(queue)
    if (!miss) return false
    if (this.#nowMs() >= miss.untilMs) {
      this.#missed.delete(queue)
      return false
    }
    return minEpoch <= miss.epoch
  }

  #remember(queue: string, epoch: number): void {
    this.#missed.delete(queue)
    if (this.#missed.size >= ROUTE_MISSES_MAX) {
      const oldest = this.#missed.keys().next().value
      if (oldest !== undefined) this.#missed.delete(oldest)
    }
    this.#missed.set(queue, { epoch, untilMs: this.#nowMs() + ROUTE_MISS_MS })
  }
}
