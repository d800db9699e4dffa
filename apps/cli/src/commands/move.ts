import type { Command } from 'commander'
import type { Runtime, Session } from '../context'
import { formatDuration } from '../durations'
import { CommandError, InterruptedError, UsageError } from '../errors'
import { InFlight } from '../in-flight'
import { handleInterrupts } from '../interrupt'
import { type CliDelivery, interruptReason } from '../io'
import { durationOption, integerArg } from '../options'
import { Progress } from '../progress'
import { idleWaitMs, nextWithin, pausedReason } from './consume'

/** Messages leased from the source ahead of their copy. */
const PREFETCH_MAX = 256
/** Copies (send, then ack) under way at once. */
const COPIES_IN_FLIGHT_MAX = 256
/** The broker's long poll per lease request, at most and at least (as `consume`). */
const LEASE_WAIT_MS_MAX = 1_000
const LEASE_WAIT_MS_MIN = 50

interface MoveFlags {
  to: string
  max?: number
  wait: number
}

/** `mq queue move FROM --to TO [--max N] [--wait 2s]`. */
export function registerMoveCommand(queue: Command, runtime: Runtime): void {
  queue
    .command('move')
    .argument('<from>', 'the queue to take messages from')
    .requiredOption('--to <queue>', 'the queue to put them in')
    .option(
      '-m, --max <n>',
      'move at most N messages (default: until FROM has none for --wait)',
      integerArg(1),
    )
    .addOption(
      durationOption('--wait <duration>', 'stop when no message came for this long (250ms at least)', 2_000),
    )
    .description(
      'move messages to another queue (e.g. dead letters back to their queue): each is acked in FROM once durable in TO',
    )
    .addHelpText(
      'after',
      `
A message keeps its body, key, weight and headers (a dead letter's mq-dead-letter-* headers too).
At least once: a message copied to TO whose ack in FROM fails is reported, and may be moved
again later. A message TO refuses stays in FROM, and mq stops with the reason.

Examples:
  $ mq queue move jobs-dead --to jobs             # replay the dead letters of jobs
  $ mq queue move jobs-dead --to jobs --max 100
`,
    )
    .action((from: string, flags: MoveFlags, command: Command) => {
      if (flags.to === from) throw new UsageError(`queue move: --to must name another queue than ${from}`)
      return runtime.run(command, (session) => move(session, from, flags))
    })
}

async function move(session: Session, from: string, flags: MoveFlags): Promise<void> {
  const { client, out, io } = session
  const max = flags.max ?? Number.POSITIVE_INFINITY
  let lastError: unknown
  const consumer = client.consumer(from, {
    prefetch: Math.max(1, Math.min(max, PREFETCH_MAX)),
    waitMs: Math.max(LEASE_WAIT_MS_MIN, Math.min(flags.wait, LEASE_WAIT_MS_MAX)),
    onError: (error) => {
      lastError = error
    },
  })
  const producer = client.producer(flags.to)
  const iterator = consumer[Symbol.asyncIterator]()
  const progress = new Progress(io.stderr, () => io.now(), `move ${from} to ${flags.to}`)
  const copies = new InFlight(COPIES_IN_FLIGHT_MAX)
  let failure: unknown
  let taken = 0
  let moved = 0
  let pending: Promise<IteratorResult<CliDelivery>> | undefined
  const stopListening = handleInterrupts(io.interrupt)
  /** Copies `d` to the target, then acks it in the source; a refused copy gives `d` back. */
  const copy = async (d: CliDelivery): Promise<void> => {
    try {
      await producer.send({
        body: d.body,
        weight: d.weight,
        headers: d.headers,
        ...(d.key ? { key: d.key } : {}),
      })
    } catch (error) {
      failure ??= new CommandError(
        `message ${from} ${d.partition}/${d.id} could not go to ${flags.to}; it stays in ${from}`,
        error,
      )
      // Leasing stops first: given back while the fetch loop runs, it was leased again at
      // once and stayed leased for the visibility timeout — a delivery counted, on the way
      // to the dead-letter list (the operator audit).
      await consumer.stop().catch(() => {})
      await d.release().catch(() => {})
      return
    }
    try {
      await d.ack()
      moved++
      progress.update(moved)
    } catch (error) {
      failure ??= new CommandError(
        `message ${from} ${d.partition}/${d.id} is in ${flags.to} but its ack in ${from} failed: it may be moved again`,
        error,
      )
    }
  }
  /** Ctrl-C or a signal stopped it (not the end of the queue, nor --max): said, as produce does. */
  let stopped = false
  try {
    while (taken < max && failure === undefined) {
      pending ??= iterator.next()
      const next = await nextWithin(pending, idleWaitMs(flags.wait), io.interrupt)
      if (next.kind !== 'message') {
        stopped = next.kind === 'interrupted'
        break
      }
      pending = undefined
      taken++
      // The last one: leasing stops before its copy is acked (as in consume): its ack rode with
      // the next lease, whose message was given back at exit, a delivery counted on it.
      if (taken >= max) await consumer.stop()
      await copies.add(copy(next.delivery))
    }
    await copies.drained()
  } finally {
    stopListening()
    // As in consume: leasing stops before what is held goes back.
    await consumer.stop()
    await consumer.close()
    await producer.close()
    // A message that arrived while we stopped is given back, not held until its lease ends.
    if (pending) {
      const late = await pending.catch(() => undefined)
      if (late && !late.done) await late.value.release().catch(() => {})
    }
    progress.finish()
  }
  if (failure !== undefined) throw failure
  if (stopped) {
    // Until an audit it said "moved N messages" with exit 0, as for a finished move.
    const { why, exitCode } = interruptReason(io.interrupt)
    throw new InterruptedError(`move from ${from} to ${flags.to} stopped (${why}): ${moved} moved`, exitCode)
  }
  if (moved === 0 && lastError !== undefined) {
    throw new CommandError(
      `no message from ${from} within ${formatDuration(idleWaitMs(flags.wait))}`,
      lastError,
    )
  }
  if (moved === 0) {
    const paused = await pausedReason(session, from)
    if (paused) throw new CommandError(`moved nothing from ${from} to ${flags.to}`, new Error(paused))
    // An empty source sends nothing, so a target that does not exist (a typo) went unnoticed:
    // "moved 0 messages", exit 0. Only its absence is said; any other failure to describe it
    // (a token without a role on it) leaves the result as it was.
    const missing = await client.admin.describeQueue(flags.to).then(
      () => undefined,
      (error: unknown) => ((error as { code?: unknown })?.code === 'QUEUE_NOT_FOUND' ? error : undefined),
    )
    if (missing !== undefined) throw new CommandError(`moved nothing from ${from} to ${flags.to}`, missing)
  }
  out.result(`moved ${moved} message${moved === 1 ? '' : 's'} from ${from} to ${flags.to}`, {
    from,
    to: flags.to,
    moved,
  })
}
