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
 * goes to the other replicas in turn, and again every `probeEveryMs` while the call stays
 * silent. A follower refuses it with NOT_LEADER naming the leader it knows; a replica that
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
  const main = settle(call).then((m) => ({ main: m }))
  if (probes.length === 0) return unwrap((await main).main)
  const timers = new Set<ReturnType<typeof setTimeout>>()
  try {
    let wait = o.silentMs
    for (;;) {
      const first = await Promise.race([main, after(wait, timers)])
      if (first !== null) return unwrap(first.main)
      wait = o.probeEveryMs
      for (const probe of probes) {
        const r = await Promise.race([main, settle(probe.send()).then((a) => ({ probe: a }))])
        if ('main' in r) return unwrap(r.main)
        if (r.probe.ok) {
          served(probe.address)
          return r.probe.value
        }
        const e = r.probe.error
        if (e instanceof NotLeaderError && e.facts.leaderAddress && e.facts.leaderAddress !== leaderAddress)
          throw e
      }
    }
  } finally {
    for (const t of timers) clearTimeout(t)
  }
}

function unwrap<T>(o: Outcome<T>): T {
  if (o.ok) return o.value
  throw o.error
}
