import type { OutgoingMessage, SendResult } from '@mq/router-client'
import type { Command } from 'commander'
import type { Runtime, Session } from '../context'
import { CommandError, InterruptedError, UsageError } from '../errors'
import { InFlight } from '../in-flight'
import { handleInterrupts, INTERRUPTED, untilInterrupted } from '../interrupt'
import { interruptReason } from '../io'
import { readLines } from '../lines'
import { delayArg, headerArg, integerArg } from '../options'
import { Progress } from '../progress'

/** Sends awaiting their result, at most; the SDK's own buffer applies back-pressure beneath. */
export const SENDS_IN_FLIGHT_MAX = 10_000
/** `--count` at most. */
export const COUNT_MAX = 100_000_000

interface ProduceFlags {
  weight?: number
  key?: string
  delay?: number
  header?: Record<string, string>
  file?: string
  count?: number
}

/** `mq produce QUEUE [BODY | --file F] [--count N]`, or one message per stdin line. */
export function registerProduceCommand(program: Command, runtime: Runtime): void {
  program
    .command('produce')
    .argument('<queue>', 'the queue to send to')
    .argument(
      '[body]',
      'the message body (UTF-8); without it and without --file, each stdin line is one message',
    )
    .description('send messages; each is acknowledged only once it is durable')
    .option(
      '-w, --weight <w>',
      'share of deliveries while the queue is backlogged, 1..1000',
      integerArg(1, 1000),
    )
    .option('-k, --key <key>', 'messages with one key go to one partition, in order')
    .option(
      '--delay <duration>',
      'not deliverable before this long from now (e.g. 10s, 2d; at most 7d)',
      delayArg,
    )
    .option('-H, --header <k=v>', 'a header; repeat for more', headerArg)
    .option('-f, --file <path>', 'send the bytes of this file as the body')
    .option(
      '-n, --count <n>',
      'send the body N times (a progress bar shows on a terminal)',
      integerArg(1, COUNT_MAX),
    )
    .addHelpText(
      'after',
      `
Prints one line per message with --json ({"seq","id","partition","duplicate"}), else a summary.

Examples:
  $ mq produce jobs 'hello'
  $ mq produce jobs --weight 5 --key user-42 -H trace=abc '{"task":"resize"}'
  $ mq produce jobs --file image.png --delay 10s
  $ mq produce jobs --count 100000 'load test'
  $ seq 1000 | mq produce jobs --weight 3     # one message per line
`,
    )
    .action(async (queue: string, body: string | undefined, flags: ProduceFlags, command: Command) => {
      if (body !== undefined && flags.file !== undefined) {
        throw new UsageError('produce: give a BODY or --file, not both')
      }
      const fromStdin = body === undefined && flags.file === undefined
      if (fromStdin && flags.count !== undefined) {
        throw new UsageError('produce: --count repeats a BODY or --file; it does not apply to stdin lines')
      }
      const file = flags.file === undefined ? undefined : await readBodyFile(runtime, flags.file)
      await runtime.run(command, (session) => produce(session, queue, body ?? file, flags))
    })
}

async function readBodyFile(runtime: Runtime, path: string): Promise<Uint8Array> {
  try {
    return await runtime.io.readFile(path)
  } catch (error) {
    throw new UsageError(`--file ${path}: ${(error as Error).message}`)
  }
}

/** Sends `body` (`--count` times), or each stdin line when there is no body. */
async function produce(
  session: Session,
  queue: string,
  body: string | Uint8Array | undefined,
  flags: ProduceFlags,
): Promise<void> {
  const { client, out, io } = session
  const fromStdin = body === undefined
  let source: AsyncIterable<string | Uint8Array>
  let total: number | undefined
  if (fromStdin) {
    if (io.stdin.isTTY) io.stderr.write('mq: reading messages from stdin, one per line (Ctrl-D to end)\n')
    source = readLines(io.stdin)
  } else {
    total = flags.count ?? 1
    source = repeat(body, total)
  }
  const template: Omit<OutgoingMessage, 'body'> = {
    ...(flags.weight !== undefined ? { weight: flags.weight } : {}),
    ...(flags.key !== undefined ? { key: flags.key } : {}),
    ...(flags.delay !== undefined ? { delayMs: flags.delay } : {}),
    ...(flags.header !== undefined ? { headers: flags.header } : {}),
  }
  const producer = client.producer(queue)
  const progress =
    total === 1 ? undefined : new Progress(io.stderr, () => io.now(), `produce ${queue}`, total)
  const startedAt = io.now()
  const inFlight = new InFlight(SENDS_IN_FLIGHT_MAX)
  let read = 0
  let sent = 0
  let last: SendResult | undefined
  let failure: unknown
  // Ctrl-C (or stdout's reader gone) stops the reading, then waits for the sends under way,
  // so that what was stored is known: a second Ctrl-C exits at once (nodeIO).
  const stopListening = handleInterrupts(io.interrupt)
  const lines = source[Symbol.asyncIterator]()
  let stopped = false
  try {
    while (failure === undefined) {
      // Interrupted while the window was full: stdin is closed by now, read no more of it.
      if (io.interrupt?.aborted) {
        stopped = true
        break
      }
      // A read that fails (a line too long, stdin's error) ends the sending as a failed send
      // does: the sends under way are waited for, and how many were sent is said (an audit:
      // it left the loop at once, saying only why).
      const next = await untilInterrupted(lines.next(), io.interrupt).catch((error: unknown) => {
        failure ??= error
        return undefined
      })
      if (next === undefined) break
      if (next === INTERRUPTED) {
        stopped = true
        break
      }
      if (next.done) break
      const seq = read++
      const sending = producer.send({ ...template, body: next.value }).then(
        (result) => {
          sent++
          last = result
          if (out.json) progress?.clear()
          out.record({ seq, id: result.id, partition: result.partition, duplicate: result.duplicate })
          progress?.update(sent)
        },
        (error: unknown) => {
          failure ??= error
        },
      )
      await inFlight.add(sending)
    }
    await inFlight.drained()
  } finally {
    stopListening()
  }
  progress?.finish()
  if (failure !== undefined) {
    throw new CommandError(`produce to ${queue} failed after ${sent} of ${read} messages were sent`, failure)
  }
  if (stopped) {
    const { why, exitCode } = interruptReason(io.interrupt)
    const rest = fromStdin ? 'the rest of stdin was not read' : `${(total ?? 0) - read} were not sent`
    throw new InterruptedError(
      `produce to ${queue} stopped (${why}): ${sent} of ${read} messages produced; ${rest}`,
      exitCode,
    )
  }
  if (sent === 1 && last) {
    out.text(`produced 1 message to ${queue} (partition ${last.partition}, id ${last.id})\n`)
  } else {
    const seconds = Math.max(0, io.now() - startedAt) / 1000
    out.text(`produced ${sent} messages to ${queue} in ${seconds.toFixed(1)}s\n`)
  }
}

async function* repeat<T>(value: T, times: number): AsyncGenerator<T> {
  for (let i = 0; i < times; i++) yield value
}
