import type { Command } from 'commander'
import type { Runtime, Session } from '../context'
import { formatDuration } from '../durations'
import { CommandError, UsageError } from '../errors'
import { InFlight } from '../in-flight'
import { handleInterrupts, INTERRUPTED, untilInterrupted } from '../interrupt'
import type { CliDelivery } from '../io'
import { durationOption, integerArg } from '../options'
import { messageLine, messageRecord } from '../output'
import { Progress } from '../progress'

/** Messages `--no-ack` may hold (they are all leased until mq gives them back at exit). */
export const NO_ACK_HELD_MAX = 1_000
/** Messages leased ahead of printing when acking. */
const PREFETCH_MAX = 64
/** The broker's long poll per lease request, at most, so that stopping takes at most this. */
const LEASE_WAIT_MS_MAX = 1_000
/** ... and at least, so that a tiny --wait does not turn into a tight loop of lease calls. */
const LEASE_WAIT_MS_MIN = 50
/** Acks awaiting their answer, at most. */
const ACKS_IN_FLIGHT_MAX = 256
/**
 * The shortest `--wait`: a lease's round trip. `--wait 0` reported "no message" before the
 * first lease could answer, with messages ready (the operator audit); it takes what is ready.
 */
export const WAIT_MS_MIN = 250

/** The wait `--wait <ms>` stands for (WAIT_MS_MIN at least). */
export function idleWaitMs(wait: number): number {
  return Math.max(WAIT_MS_MIN, wait)
}

interface ConsumeFlags {
  max?: number
  wait: number
  ack: boolean
  follow?: boolean
}

/** `mq consume QUEUE [--max N] [--wait 5s] [--no-ack] [--follow]`. */
export function registerConsumeCommand(program: Command, runtime: Runtime): void {
  program
    .command('consume')
    .argument('<queue>', 'the queue to take messages from')
    .description('lease messages, print them, and ack them (the default) or give them back (--no-ack)')
    .option('-m, --max <n>', 'stop after N messages (default: 1, or no limit with --follow)', integerArg(1))
    .addOption(
      durationOption(
        '--wait <duration>',
        'without --follow: stop when no message came for this long (250ms at least)',
        5_000,
      ),
    )
    .option(
      '--no-ack',
      "print without acking: the messages are given back when mq exits (at most 1000); the delivery count the next consumer sees still goes up by one, but a give-back never dead-letters a message (the queue's max deliveries is not enforced for it) nor delays it by the retry backoff",
    )
    .option('-F, --follow', 'keep consuming until --max or Ctrl-C (a counter shows on a terminal)')
    .addHelpText(
      'after',
      `
Prints one line per message: partition/id, weight, delivery count, key, headers, body (base64:
when not UTF-8). With --json: {"id","partition","weight","key","body","encoding"?,"headers",
"deliveryCount"} per line; "encoding":"base64" marks a body that is not valid UTF-8.

Examples:
  $ mq consume jobs                    # take one message, ack it
  $ mq consume jobs --max 10 --wait 2s
  $ mq consume jobs --no-ack --max 20  # print 20 and give them back (mq queue peek delivers none)
  $ mq consume jobs --follow --json | jq -r .body
`,
    )
    .action((queue: string, flags: ConsumeFlags, command: Command) => {
      const max = flags.max ?? (flags.follow ? Number.POSITIVE_INFINITY : 1)
      if (!flags.ack && max > NO_ACK_HELD_MAX) {
        throw new UsageError(
          `consume --no-ack holds every message until mq exits; give --max ${NO_ACK_HELD_MAX} or less`,
        )
      }
      return runtime.run(command, (session) => consume(session, queue, { ...flags, max }))
    })
}

/** What waiting for the next message brought. */
export type Next =
  | { kind: 'message'; delivery: CliDelivery }
  | { kind: 'end' }
  | { kind: 'idle' }
  | { kind: 'interrupted' }

async function consume(
  session: Session,
  queue: string,
  flags: ConsumeFlags & { max: number },
): Promise<void> {
  const { client, out, io } = session
  const follow = flags.follow === true
  let lastError: unknown
  const prefetch = Math.max(1, Math.min(flags.max, flags.ack ? PREFETCH_MAX : NO_ACK_HELD_MAX))
  const consumer = client.consumer(queue, {
    prefetch,
    waitMs: follow ? LEASE_WAIT_MS_MAX : Math.max(LEASE_WAIT_MS_MIN, Math.min(flags.wait, LEASE_WAIT_MS_MAX)),
    onError: (error) => {
      lastError = error
    },
  })
  const iterator = consumer[Symbol.asyncIterator]()
  const progress = follow ? new Progress(io.stderr, () => io.now(), `consume ${queue}`) : undefined
  const held: CliDelivery[] = []
  const acks = new InFlight(ACKS_IN_FLIGHT_MAX)
  let ackFailure: unknown
  let received = 0
  /** A line could not be written (the pipe's reader left): stop, give back what is held. */
  let outputGone = false
  let pending: Promise<IteratorResult<CliDelivery>> | undefined
  /** Ctrl-C (or a signal) ended the wait: no "no message within" then. */
  let interrupted = false
  /** What could not be given back (--no-ack, a pipe gone, an interrupt): said, not hidden. */
  let giveBackFailure: unknown
  /** Printed, to be acked once leasing stops (the last `prefetch` of --max), with their line's write. */
  const lastAcks: [CliDelivery, Promise<Error | undefined>][] = []
  /**
   * Acks `d` once its line left mq (`shown`): one whose write failed (the reader of a pipe is
   * gone: `mq consume | head -1`) is given back, not acked unread.
   */
  const ackOnceShown = (d: CliDelivery, shown: Promise<Error | undefined>): Promise<void> =>
    shown.then((failed) => {
      if (failed) {
        outputGone = true
        held.push(d)
        return
      }
      return d.ack().catch((error: unknown) => {
        ackFailure ??= new CommandError(`message ${d.partition}/${d.id} was printed but not acked`, error)
      })
    })
  const stopListening = handleInterrupts(io.interrupt)
  try {
    while (received < flags.max && ackFailure === undefined && !outputGone) {
      pending ??= iterator.next()
      const next = await nextWithin(pending, follow ? undefined : idleWaitMs(flags.wait), io.interrupt)
      if (next.kind !== 'message') {
        interrupted = next.kind === 'interrupted'
        break
      }
      pending = undefined
      const d = next.delivery
      received++
      progress?.clear()
      if (out.json) out.record(messageRecord(d))
      else out.text(`${messageLine(d)}\n`)
      progress?.update(received)
      if (!flags.ack) {
        held.push(d)
        continue
      }
      // The last `prefetch` of --max are acked once leasing stopped: an ack frees room, and the
      // SDK leases into it (the ack rides with that lease), so each one acked before the end
      // leased a message more, given back at exit, a delivery counted on it (--max 1: every
      // message after the first showed deliveries=2; --max 100: 60 leased for nothing).
      const shown = out.flushed()
      if (received > flags.max - prefetch) {
        lastAcks.push([d, shown])
        void shown.then((failed) => {
          if (failed) outputGone = true
        })
      } else await acks.add(ackOnceShown(d, shown))
    }
    await acks.drained()
    // Their lines' writes done while a write error still stops mq as an interrupt (below, it
    // exits at once: before the give-back).
    await Promise.all(lastAcks.map(([, shown]) => shown))
  } finally {
    stopListening()
    // Leasing stops first (what was leased and not handed out goes back): the messages given
    // back below would otherwise be leased again at once by this consumer's own fetch loop, and
    // stay leased for the queue's visibility timeout.
    await consumer.stop()
    for (const [d, shown] of lastAcks.splice(0)) await acks.add(ackOnceShown(d, shown))
    await acks.drained()
    const givenBack = await Promise.allSettled(held.map((d) => d.release()))
    const failed = givenBack.filter((r): r is PromiseRejectedResult => r.status === 'rejected')
    if (failed.length > 0) {
      // They stay leased, a delivery counted, until the visibility timeout (an audit: exit 0
      // and nothing said).
      giveBackFailure = new CommandError(
        `${failed.length} of ${held.length} message(s) of ${queue} could not be given back (they return after the queue's visibility timeout)`,
        failed[0]?.reason,
      )
    }
    await consumer.close()
    // A message that arrived while we stopped is given back, not lost until its lease ends.
    if (pending) {
      const late = await pending.catch(() => undefined)
      if (late && !late.done) await late.value.release().catch(() => {})
    }
    progress?.finish()
  }
  if (ackFailure !== undefined) throw ackFailure
  if (giveBackFailure !== undefined) throw giveBackFailure
  if (received === 0 && !follow && !interrupted) {
    if (lastError !== undefined) {
      throw new CommandError(
        `no message from ${queue} within ${formatDuration(idleWaitMs(flags.wait))}`,
        lastError,
      )
    }
    if (!out.json) {
      const paused = await pausedReason(session, queue)
      io.stderr.write(
        `mq: no message in ${queue} within ${formatDuration(idleWaitMs(flags.wait))}${paused ? ` (${paused})` : ''}\n`,
      )
    }
  }
}

/**
 * Why a queue gave nothing when it is paused; undefined when it is not (or its route cannot be
 * read: the reason only adds to a message).
 */
export async function pausedReason(session: Session, queue: string): Promise<string | undefined> {
  const route = await session.client.admin.describeQueue(queue).catch(() => undefined)
  return route?.config?.paused
    ? `${queue} is paused: nothing is handed out of it until mq queue resume ${queue}`
    : undefined
}

/** Waits for the iterator's next result, `idleMs` at most (undefined: no limit), or Ctrl-C. */
export async function nextWithin(
  pending: Promise<IteratorResult<CliDelivery>>,
  idleMs: number | undefined,
  interrupt: AbortSignal | undefined,
): Promise<Next> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const racers: Promise<Next>[] = [
    pending.then((r): Next => (r.done ? { kind: 'end' } : { kind: 'message', delivery: r.value })),
  ]
  if (idleMs !== undefined) {
    racers.push(new Promise((resolve) => (timer = setTimeout(() => resolve({ kind: 'idle' }), idleMs))))
  }
  try {
    const next = await untilInterrupted(Promise.race(racers), interrupt)
    return next === INTERRUPTED ? { kind: 'interrupted' } : next
  } finally {
    if (timer) clearTimeout(timer)
  }
}
