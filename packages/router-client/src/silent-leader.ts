import { NotLeaderError } from '@mq/protocol'

type Outcome<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: unknown }

function settle<T>(p: Promise<T>): Promise<Outcome<T>> {
  return p.then(
    (value) => ({ ok: true, value }),
    (error: unknown) => ({ ok: false, error }),
  )
}

function after(ms: number, timers: Set<ReturnType<typeof setTimeout>>): Promise<null> {
  return new Promise((resolve) => {
    const t = setTimeout(() => {
      timers.delete(t)
      resolve(null)
    }, ms)
    t.unref?.()
    timers.add(t)
  })
}

export interface SilentLeaderOptions {
  /** How long the leader may stay silent before the other replicas are asked. */
  readonly silentMs: number
  /** Then how often they are asked again while it stays silent. */
  readonly probeEveryMs: number
}

/** One replica besides the leader: its address and the same request sent to it. */
export interface Probe<T> {
  readonly address: string
  readonly send: () => Promise<T>
}

/**
 * Awaits `call`, sent to the partition's leader as we know it (`leaderAddress`). A leader
 * that falls silent (paused, cut off: its connection stays open, so nothing fails) would hold
 * the call until its deadline; so once `silentMs` pass without an answer, the same request
 * goes to another replica, and to the next one every `probeEveryMs` while nothing useful has
 * come back (a replica already asked is not asked again until it answers: one silent too
 * holds nobody up, and its late answer still counts). A follower refuses it with NOT_LEADER naming the leader it knows; a replica that
 * leads by now serves it (`served` learns which). Resolves with the first success (the
 * call's or a probe's); rejects with the call's error, or with a NOT_LEADER naming another
 * leader (the caller follows it, abandoning the silent call). A probe naming the same leader,
 * or failing otherwise, changes nothing; every probe and the call end by their deadlines.
 *
 * The abandoned call may still have taken effect (its leader committed the request before it
 * fell silent): a retry after it is at least once, as after any lost answer; an idempotent
 * producer's retry is recognised and stored once.
 */
export async function awaitLeader<T>(
  call: Promise<T>,
  leaderAddress: string,
  probes: readonly Probe<T>[],
  o: SilentLeaderOptions,
  served: (address: string) => void = () => {},
): Promise<T> {
  type Event = { main: Outcome<T> } | { probe: Probe<T>; outcome: Outcome<T> } | null
  const main: Promise<Event> = settle(call).then((m) => ({ main: m }))
  if (probes.length === 0) return unwrap(((await main) as { main: Outcome<T> }).main)
  const timers = new Set<ReturnType<typeof setTimeout>>()
  // Probes sent and not answered yet: a replica that is silent too (paused, cut off) must not
  // hold the others up, and a late answer still counts (a lease served late is not lost).
  const pending = new Map<Probe<T>, Promise<Event>>()
  let next = 0
  try {
    let wait = o.silentMs
    for (;;) {
      const e = await Promise.race([main, ...pending.values(), after(wait, timers)])
      if (e === null) {
        // Silent (still, or again): ask the next replica that is not being asked already.
        wait = o.probeEveryMs
        for (let i = 0; i < probes.length; i++) {
          const probe = probes[next++ % probes.length] as Probe<T>
          if (pending.has(probe)) continue
          pending.set(
            probe,
            settle(probe.send()).then((outcome) => ({ probe, outcome })),
          )
          break
        }
        continue
      }
      if ('main' in e) return unwrap(e.main)
      pending.delete(e.probe)
      if (e.outcome.ok) {
        served(e.probe.address)
        return e.outcome.value
      }
      const err = e.outcome.error
      if (
        err instanceof NotLeaderError &&
        err.facts.leaderAddress &&
        err.facts.leaderAddress !== leaderAddress
      )
        throw err
    }
  } finally {
    for (const t of timers) clearTimeout(t)
  }
}

function unwrap<T>(o: Outcome<T>): T {
  if (o.ok) return o.value
  throw o.error
}
