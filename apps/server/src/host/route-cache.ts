/** What the cache needs of a route. */
export interface CachedRoute {
  readonly queue: string
  /** The queue's incarnation: a queue created again under its name has another. */
  readonly queueId: number
  readonly routeEpoch: number
}

/**
 * The queue routes a node caches for data requests (a node without a meta replica asks the
 * meta leader; one with a replica uses it and caches what it built). Each route is kept while it
 * is the newest seen for its queue; what makes one stale:
 *
 * - a grow epoch (partitions added to some queue, heard in heartbeats) newer than the route:
 *   forgotten, so the next request fetches it (`forgetBefore`);
 * - a changed epoch (a queue's settings changed, or a queue deleted): the node asks the meta
 *   leader for every cached name, and the hosted ones (`namesToRefresh`, `answered`), or, with
 *   a meta replica that has applied that epoch, checks each against the replica
 *   (`forgetDeleted`). Until 2026-12-02 only the hosted queues were asked about, and a deleted
 *   queue's partitions leave their groups at once: its route stayed cached for good.
 *
 * An answer to a call made before the last refresh cannot bring an older route back (`put`).
 */
export class RouteCache<Route extends CachedRoute> {
  readonly #routes = new Map<string, Route>()
  /** The changed epoch the cache was last brought up to. */
  #refreshedTo = 0
  /** The changed epoch of the refresh under way or last started (see `put`). */
  #refreshingTo = 0
  /** The latest grow epoch heard. */
  #growEpoch = 0
  /** The highest route epoch of any route cached (not lowered when one is forgotten). */
  #highestEpoch = 0

  get(queue: string): Route | undefined {
    return this.#routes.get(queue)
  }

  get size(): number {
    return this.#routes.size
  }

  /** The highest route epoch cached so far (a node's answer to STALE_ROUTE names it). */
  get highestEpoch(): number {
    return this.#highestEpoch
  }

  /** The changed epoch the cache was last brought up to. */
  get refreshedTo(): number {
    return this.#refreshedTo
  }

  /**
   * Caches `route` unless the cache holds a newer one (routes come from several sources), or it
   * is older than the changed epoch the cache was refreshed to, or is being refreshed to (an
   * answer to a call made before: it may carry old settings, or a queue since deleted; one
   * arriving while the refresh runs, which did not ask about it, stayed cached for good).
   */
  put(route: Route): void {
    if (route.routeEpoch < Math.max(this.#refreshedTo, this.#refreshingTo)) return
    if ((this.#routes.get(route.queue)?.routeEpoch ?? 0) > route.routeEpoch) return
    this.#routes.set(route.queue, route)
    if (route.routeEpoch > this.#highestEpoch) this.#highestEpoch = route.routeEpoch
  }

  delete(queue: string): void {
    this.#routes.delete(queue)
  }

  /** Forgets the routes older than `growEpoch`, once per new grow epoch. */
  forgetBefore(growEpoch: number): void {
    if (growEpoch <= this.#growEpoch) return
    this.#growEpoch = growEpoch
    for (const [queue, route] of this.#routes) if (route.routeEpoch < growEpoch) this.#routes.delete(queue)
  }

  /**
   * The names to ask the meta leader about to bring the cache up to `changedEpoch`: every
   * cached one and `hosted`; undefined when it is there already.
   */
  namesToRefresh(changedEpoch: number, hosted: Iterable<string>): Set<string> | undefined {
    if (changedEpoch <= this.#refreshedTo) return undefined
    if (changedEpoch > this.#refreshingTo) this.#refreshingTo = changedEpoch
    const names = new Set(hosted)
    for (const name of this.#routes.keys()) names.add(name)
    return names
  }

  /**
   * The meta leader's answer, at route epoch `routeEpoch`, for `asked`: its routes cached, the
   * asked names it lacks (deleted) forgotten unless cached newer than the answer.
   */
  answered(asked: Iterable<string>, routeEpoch: number, routes: readonly Route[]): void {
    const missing = new Set(asked)
    for (const r of routes) {
      this.put(r)
      missing.delete(r.queue)
    }
    for (const gone of missing) {
      const cached = this.#routes.get(gone)
      if (cached && cached.routeEpoch < routeEpoch) this.#routes.delete(gone)
    }
  }

  /** The cache is as new as `changedEpoch` (a refresh's answers are in). */
  refreshed(changedEpoch: number): void {
    if (changedEpoch > this.#refreshedTo) this.#refreshedTo = changedEpoch
  }

  /**
   * With a meta replica that has applied `changedEpoch`: forgets the routes whose queue the
   * replica does not have as that incarnation (`queueIdOf` undefined: deleted), once per new
   * changed epoch.
   */
  forgetDeleted(changedEpoch: number, queueIdOf: (queue: string) => number | undefined): void {
    if (changedEpoch <= this.#refreshedTo) return
    this.#refreshedTo = changedEpoch
    for (const [name, route] of this.#routes) if (queueIdOf(name) !== route.queueId) this.#routes.delete(name)
  }
}
