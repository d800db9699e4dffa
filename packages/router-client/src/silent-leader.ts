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
 * A probe unanswered for `probeEveryMs` is left running and the next replica is asked: until
 * an audit (2026-12-07) each probe was awaited to its end, and a replica silent too (paused,
 * or its connection hanging) held the others' probes for its whole attempt (5 s) while
 * another replica led the group. A replica with a probe under way is not asked again, nor
 * followed when another names it: its probe's answer is awaited.
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
  // The probes under way, one per replica at most.
  const out = new Map<Probe<T>, Promise<ProbeEnd<T>>>()
  // The call's end, a probe's, or null after `ms`.
  const next = (ms: number) => Promise.race([main, after(ms, timers), ...out.values()])
  // What an end means: the answer (`{ value }`), a redirect (thrown), or nothing (undefined).
  const take = (end: { readonly main: Outcome<T> } | ProbeEnd<T>): { readonly value: T } | undefined => {
    if ('main' in end) return { value: unwrap(end.main) }
    out.delete(end.probe)
    const r = end.outcome
    if (r.ok) {
      served(end.probe.address)
      return { value: r.value }
    }
    const e = r.error
    const named = e instanceof NotLeaderError ? e.facts.leaderAddress : undefined
    // A replica asked already and not answered yet (a long poll waits there) answers for itself:
    // a request sent there beside its probe could lease, or store, for no one.
    if (named && named !== leaderAddress && ![...out.keys()].some((p) => p.address === named)) throw e
    return undefined
  }
  try {
    let wait = o.silentMs
    for (;;) {
      const first = await next(wait)
      if (first !== null) {
        const taken = take(first)
        if (taken) return taken.value
        continue
      }
      wait = o.probeEveryMs
      for (const probe of probes) {
        if (out.has(probe)) continue
        out.set(
          probe,
          settle(probe.send()).then((outcome) => ({ probe, outcome })),
        )
        // Its answer comes before the next replica is asked (a follower's redirect first), or
        // `probeEveryMs` pass.
        for (;;) {
          const end = await next(o.probeEveryMs)
          if (end === null) break
          const taken = take(end)
          if (taken) return taken.value
          if (!('main' in end) && end.probe === probe) break
        }
      }
    }
  } finally {
    for (const t of timers) clearTimeout(t)
  }
}

/** A probe's end: its answer or its error. */
interface ProbeEnd<T> {
  readonly probe: Probe<T>
  readonly outcome: Outcome<T>
}

function unwrap<T>(o: Outcome<T>): T {
  if (o.ok) return o.value
  throw o.error
}
