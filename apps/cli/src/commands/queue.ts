import {
  encodeBody,
  LEASE_VISIBILITY_MS_MAX,
  QUEUE_DAY_SETTING_MS_MAX,
  QUEUE_LENGTH_MAX,
  QUEUE_MAX_DELIVERIES_MAX,
  QUEUE_MESSAGE_BYTES_MAX,
  QUEUE_MESSAGE_TTL_MS_MAX,
  QUEUE_PARTITIONS_MAX,
  type QueueOptions,
  shownCut,
  shownText,
  VISIBILITY_MS_MIN,
} from '@mq/router-client'
import { type Command, Option } from 'commander'
import type { Runtime } from '../context'
import { formatDuration } from '../durations'
import { UsageError } from '../errors'
import { oneLine } from '../exit-codes'
import type { CliAdmin, CliClient, CliIO } from '../io'
import { durationWithin, integerArg } from '../options'
import { messageRecord } from '../output'
import { formatFields, formatTable } from '../table'
import { registerMoveCommand } from './move'

type QueueRoute = Awaited<ReturnType<CliAdmin['describeQueue']>>
type QueueConfigUpdate = Parameters<CliAdmin['updateQueue']>[1]
type PartitionStats = Awaited<ReturnType<CliAdmin['queueStats']>>[number]
type Listed = Awaited<ReturnType<CliAdmin['deadLetters']>>[number]

const U32_MAX = 2 ** 32 - 1

/** The settings flags shared by `queue create` and `queue update`. */
interface SettingFlags {
  visibility?: number
  maxDeliveries?: number
  maxLength?: number
  dedupWindow?: number
  messageTtl?: number
  strictPriority?: boolean
  deadLetterQueue?: string
  maxMessageBytes?: number
  deliveryRate?: number
  retryBackoff?: number
  retryBackoffMax?: number
}

function addSettingFlags(command: Command): Command {
  return command
    .option(
      '--visibility <duration>',
      'lease length before an unacked message is delivered again (e.g. 30s; 100ms to 12h)',
      durationWithin(VISIBILITY_MS_MIN, LEASE_VISIBILITY_MS_MAX),
    )
    .option(
      '--max-deliveries <n>',
      `deliveries before a message is dead-lettered (1 to ${QUEUE_MAX_DELIVERIES_MAX})`,
      integerArg(1, QUEUE_MAX_DELIVERIES_MAX),
    )
    .option(
      '--max-length <n>',
      'messages the queue holds at most (each partition its share, rounded up; at most 1000000000); producers get LIMIT_EXCEEDED beyond',
      integerArg(1, QUEUE_LENGTH_MAX),
    )
    .option(
      '--dedup-window <duration>',
      'how long a dedup key is remembered (e.g. 2m; 0 = off; 5m for a new queue unless set; at most 24h)',
      durationWithin(0, QUEUE_DAY_SETTING_MS_MAX),
    )
    .option(
      '--message-ttl <duration>',
      'how long a message may wait to be delivered; older ones are deleted (e.g. 1h, 30d; 0 = until consumed; at most 365d)',
      durationWithin(0, QUEUE_MESSAGE_TTL_MS_MAX),
    )
    .option(
      '--max-message-bytes <n>',
      'largest message accepted: body, header names and values, and key (at most 4 MiB)',
      // The meta service's bound: past it, it refused naming its wire field, not the flag.
      integerArg(1, QUEUE_MESSAGE_BYTES_MAX),
    )
    .option('--dead-letter-queue <name>', 'move dead messages to this queue instead of the dead-letter list')
    .option(
      '--delivery-rate <n>',
      'hand out at most N messages a second over the whole queue (each partition its share; 0 = no limit)',
      integerArg(0, 1_000_000),
    )
    .option(
      '--retry-backoff <duration>',
      'delay a failed delivery (expired lease, nack) before it is delivered again, doubling per attempt (e.g. 1s; 0 = at once; at most 24h)',
      durationWithin(0, QUEUE_DAY_SETTING_MS_MAX),
    )
    .option(
      '--retry-backoff-max <duration>',
      'the longest retry backoff (10m unless set; at least --retry-backoff; at most 24h)',
      durationWithin(0, QUEUE_DAY_SETTING_MS_MAX),
    )
}

function settings(flags: SettingFlags): QueueConfigUpdate {
  // 0 is "the default" (10m, or the shortest if longer); the server refused the rest naming
  // its wire fields in ms (`retryBackoffMaxMs (1000) is below retryBackoffMinMs (10000)`).
  const { retryBackoff: min, retryBackoffMax: max } = flags
  if (min !== undefined && max !== undefined && max > 0 && max < min)
    throw new UsageError(
      `--retry-backoff-max ${formatDuration(max)} is below --retry-backoff ${formatDuration(min)}: give the longest backoff at least as long as the shortest`,
    )
  const update: QueueConfigUpdate = {}
  if (flags.visibility !== undefined) update.visibilityTimeoutMs = flags.visibility
  if (flags.maxDeliveries !== undefined) update.maxDeliveries = flags.maxDeliveries
  if (flags.maxLength !== undefined) update.queueLengthMax = flags.maxLength
  if (flags.dedupWindow !== undefined) update.dedupWindowMs = flags.dedupWindow
  if (flags.messageTtl !== undefined) update.messageTtlMs = flags.messageTtl
  if (flags.strictPriority !== undefined) update.strictPriority = flags.strictPriority
  if (flags.deadLetterQueue !== undefined) update.deadLetterQueue = flags.deadLetterQueue
  if (flags.maxMessageBytes !== undefined) update.messageBytesMax = flags.maxMessageBytes
  if (flags.deliveryRate !== undefined) update.deliveryRate = flags.deliveryRate
  if (flags.retryBackoff !== undefined) update.retryBackoffMinMs = flags.retryBackoff
  if (flags.retryBackoffMax !== undefined) update.retryBackoffMaxMs = flags.retryBackoffMax
  return update
}

/** A dedup window as shown: "5m", or "off" (0; unset from a meta leader of an older version). */
function dedupText(ms: number | undefined): string {
  return ms ? formatDuration(ms) : 'off'
}

/** A retry backoff as shown: "1s doubling up to 10m", or none (min 0). */
function backoffText(minMs: number, maxMs: number): string {
  if (!minMs) return 'none (a failed delivery is ready again at once)'
  return maxMs > minMs
    ? `${formatDuration(minMs)} doubling up to ${formatDuration(maxMs)}`
    : formatDuration(minMs)
}

/** "1 partition", "4 partitions". */
function partitionCount(route: QueueRoute): string {
  const n = route.partitions.length
  return `${n} partition${n === 1 ? '' : 's'}`
}

/** `mq queue create|list|describe|update|pause|resume|delete|purge|peek|dlq|move`. */
export function registerQueueCommands(program: Command, runtime: Runtime): void {
  const queue = program
    .command('queue')
    .description('create, inspect, change and delete queues; manage their dead letters')
    .addHelpText(
      'after',
      `
Examples:
  $ mq queue create jobs --partitions 4 --visibility 30s --max-deliveries 5
  $ mq queue list
  $ mq queue describe jobs
  $ mq queue update jobs --visibility 2m --no-strict-priority
  $ mq queue pause jobs              # consumers get nothing until: mq queue resume jobs
  $ mq queue dlq jobs                # list dead-lettered messages
  $ mq queue dlq jobs --redrive 100  # move up to 100 per partition back to ready
  $ mq queue move jobs-dead --to jobs  # replay a dead-letter queue into its queue
`,
    )

  addSettingFlags(
    queue
      .command('create')
      .argument('<name>', 'the queue name')
      .description('create a queue; settings left out take the cluster defaults')
      .option(
        '--partitions <p>',
        'partitions (spread over the data groups)',
        integerArg(1, QUEUE_PARTITIONS_MAX),
      )
      .option('--strict-priority', 'serve higher weights first instead of weighted fair shares')
      .option(
        '--paused',
        'create it paused: producers may fill it, nothing is delivered until mq queue resume',
      )
      .option(
        '--ordered-keys',
        "deliver each key's messages one at a time, in the order they arrived (keyless ones as usual); set at creation, and the partition count then stays",
      )
      .option('--engine <name>', 'storage engine of its partitions (leveldb, the default)'),
  )
    .addHelpText(
      'after',
      '\nExamples:\n  $ mq queue create jobs --partitions 4 --visibility 30s --max-deliveries 5 --dedup-window 2m\n  $ mq queue create orders --ordered-keys   # then: mq produce orders --key customer-42 ...\n',
    )
    .action(
      (
        name: string,
        flags: SettingFlags & {
          partitions?: number
          engine?: string
          paused?: boolean
          orderedKeys?: boolean
        },
        command: Command,
      ) => {
        const given = settings(flags)
        return runtime.run(command, async ({ client, out }) => {
          const options: QueueOptions = { ...given }
          if (flags.partitions !== undefined) options.partitions = flags.partitions
          if (flags.engine !== undefined) options.engine = flags.engine
          if (flags.paused) options.paused = true
          if (flags.orderedKeys) options.orderedKeys = true
          const route = await client.admin.createQueue(name, options)
          const notes = [partitionCount(route), ...(flags.orderedKeys ? ['ordered keys'] : [])]
          out.result(
            `created queue ${name} (${[...notes, ...(flags.paused ? ['paused'] : [])].join(', ')})`,
            route,
          )
        })
      },
    )

  queue
    .command('list')
    .description('list queues and their settings')
    .option('--prefix <prefix>', 'only queues whose names start with this', '')
    .option('--limit <n>', 'list at most this many', integerArg(1, 1_000_000), 10_000)
    .action((flags: { prefix: string; limit: number }, command: Command) =>
      runtime.run(command, async ({ client, out }) => {
        const queues = await client.admin.listQueues(flags.prefix, flags.limit)
        out.table(queues, queueColumns, (q) => q)
      }),
    )

  queue
    .command('describe')
    .argument('<name>', 'the queue name')
    .description('settings, partitions with their group and leader, and depth by weight')
    .option('--no-stats', 'skip the per-partition depths (asks only the meta group)')
    .action((name: string, flags: { stats: boolean }, command: Command) =>
      runtime.run(command, async ({ client, out, io }) => {
        const route = await client.admin.describeQueue(name)
        const stats = flags.stats ? await readableStats(client, name, io) : undefined
        if (out.json) {
          out.record({ ...route, ...(stats ? { stats } : {}) })
          return
        }
        out.text(formatFields(configFields(route)))
        out.text(
          `\n${formatTable(route.partitions, partitionColumns(stats, route.config?.orderedKeys ?? false))}`,
        )
        const weights = (stats ?? []).flatMap((s) => s.weights.map((w) => ({ partition: s.partition, ...w })))
        if (weights.length > 0) out.text(`\n${formatTable(weights, weightColumns)}`)
      }),
    )

  addSettingFlags(
    refuseFlagAndNegation(queue.command('update'), 'strict-priority')
      .argument('<name>', 'the queue name')
      .description('change settings of a queue; the settings not given stay as they are')
      .addOption(new Option('--strict-priority', 'serve higher weights first'))
      .addOption(new Option('--no-strict-priority', 'serve weights by fair shares (the default)'))
      .option(
        '--partitions <p>',
        'a larger partition count: partitions are added, never removed; a key may then map to another partition (refused for a queue with ordered keys)',
        integerArg(1, QUEUE_PARTITIONS_MAX),
      ),
  )
    .addHelpText(
      'after',
      '\nExamples:\n  $ mq queue update jobs --visibility 2m --max-deliveries 10\n  $ mq queue update jobs --partitions 8   # add partitions; clients pick them up\n',
    )
    .action((name: string, flags: SettingFlags & { partitions?: number }, command: Command) => {
      const update = settings(flags)
      if (flags.partitions !== undefined) update.partitions = flags.partitions
      if (Object.keys(update).length === 0) {
        throw new UsageError(
          'queue update: nothing to change; give at least one setting (see mq queue update --help)',
        )
      }
      return runtime.run(command, async ({ client, out }) => {
        const route = await client.admin.updateQueue(name, update)
        out.result(`updated queue ${name} (${partitionCount(route)})`, route)
      })
    })

  queue
    .command('pause')
    .argument('<name>', 'the queue name')
    .description(
      'stop handing out messages: consumers get nothing (they wait), producers, acks and peeks go on; leases already given out stay valid',
    )
    .action((name: string, _flags, command: Command) =>
      runtime.run(command, async ({ client, out }) => {
        const route = await client.admin.updateQueue(name, { paused: true })
        out.result(
          `paused queue ${name}: its leaders stop handing messages out within a second; mq queue resume ${name} to deliver again`,
          route,
        )
      }),
    )

  queue
    .command('resume')
    .argument('<name>', 'the queue name')
    .description('hand out the messages of a paused queue again')
    .action((name: string, _flags, command: Command) =>
      runtime.run(command, async ({ client, out }) => {
        const route = await client.admin.updateQueue(name, { paused: false })
        out.result(`resumed queue ${name}: consumers get its messages again within a second`, route)
      }),
    )

  queue
    .command('delete')
    .argument('<name>', 'the queue name')
    .description('delete a queue and every message in it')
    .action((name: string, _flags, command: Command) =>
      runtime.run(command, async ({ client, out }) => {
        await client.admin.deleteQueue(name)
        out.result(`deleted queue ${name}`, { queue: name, deleted: true })
      }),
    )

  queue
    .command('purge')
    .argument('<name>', 'the queue name')
    .description(
      "delete every ready message of a queue, and those waiting for their key's turn (delayed and leased ones stay)",
    )
    .action((name: string, _flags, command: Command) =>
      runtime.run(command, async ({ client, out }) => {
        const purged = await client.admin.purgeQueue(name)
        out.result(`purged ${purged} message${purged === 1 ? '' : 's'} from ${name}`, { queue: name, purged })
      }),
    )

  queue
    .command('peek')
    .argument('<name>', 'the queue name')
    .description(
      'list ready messages without consuming them (no lease, no delivery counted): per partition the heaviest weight first, each in delivery order',
    )
    .option('--limit <n>', 'list at most N messages per partition', integerArg(1, 1000), 20)
    .addHelpText(
      'after',
      '\nExamples:\n  $ mq queue peek jobs\n  $ mq queue peek jobs --limit 100 --json | jq -r .body\n',
    )
    .action((name: string, flags: { limit: number }, command: Command) =>
      runtime.run(command, async ({ client, out }) => {
        out.table(await client.admin.peek(name, flags.limit), listedColumns, (m) => messageRecord(m))
      }),
    )

  queue
    .command('dlq')
    .argument('<name>', 'the queue name')
    .description('list the dead-lettered messages of a queue, or redrive them, or purge them')
    .option(
      '--redrive <n>',
      'move up to N dead messages of each partition back to ready',
      integerArg(1, U32_MAX),
    )
    .option('--purge', 'delete every dead-lettered message')
    .option('--limit <n>', 'list at most N messages per partition', integerArg(1, 10_000), 100)
    .addHelpText(
      'after',
      '\nExamples:\n  $ mq queue dlq jobs\n  $ mq queue dlq jobs --json | jq -r .body\n  $ mq queue dlq jobs --redrive 1000\n  $ mq queue dlq jobs --purge\n',
    )
    .action((name: string, flags: { redrive?: number; purge?: boolean; limit: number }, command: Command) => {
      if (flags.redrive !== undefined && flags.purge) {
        throw new UsageError('queue dlq: give --redrive or --purge, not both')
      }
      // --limit bounds a listing: with --purge every dead letter went, whatever it said.
      if ((flags.redrive !== undefined || flags.purge) && command.getOptionValueSource('limit') === 'cli') {
        throw new UsageError(
          `queue dlq: --limit bounds the listing only; ${flags.purge ? '--purge deletes every dead-lettered message' : '--redrive N bounds a redrive'}`,
        )
      }
      return runtime.run(command, async ({ client, out }) => {
        if (flags.redrive !== undefined) {
          const moved = await client.admin.redriveDeadLetters(name, flags.redrive)
          out.result(
            `moved ${moved} dead-lettered message${moved === 1 ? '' : 's'} of ${name} back to ready`,
            {
              queue: name,
              redriven: moved,
            },
          )
        } else if (flags.purge) {
          const purged = await client.admin.purgeDeadLetters(name)
          out.result(`deleted ${purged} dead-lettered message${purged === 1 ? '' : 's'} of ${name}`, {
            queue: name,
            purged,
          })
        } else {
          const [dead, route] = await Promise.all([
            client.admin.deadLetters(name, flags.limit),
            client.admin.describeQueue(name),
          ])
          out.table(dead, listedColumns, (m) => messageRecord(m))
          const target = route.config?.deadLetterQueue
          if (target) {
            out.text(
              `(${name}'s leaders move its dead letters to queue ${target}: this list holds those not moved yet, or refused there; consume ${target} to see the others)\n`,
            )
          }
        }
      })
    })

  registerMoveCommand(queue, runtime)
}

function configFields(route: QueueRoute): [string, string | number | boolean][] {
  const c = route.config
  return [
    ['queue', route.queue],
    ['partitions', route.partitions.length],
    ['delivery', c?.paused ? `paused (mq queue resume ${route.queue})` : 'running'],
    [
      'ordering',
      c?.orderedKeys
        ? 'per key: one message of a key at a time, in the order they arrived'
        : 'none (a key only picks the partition)',
    ],
    ['delivery rate', c?.deliveryRate ? `at most ${c.deliveryRate} messages/s` : 'no limit'],
    ['visibility', c ? formatDuration(c.visibilityTimeoutMs) : '-'],
    ['max deliveries', c?.maxDeliveries ?? '-'],
    ['retry backoff', c ? backoffText(c.retryBackoffMinMs, c.retryBackoffMaxMs) : '-'],
    ['max length', c?.queueLengthMax ?? '-'],
    ['max message bytes', c?.messageBytesMax ?? '-'],
    ['dedup window', c ? dedupText(c.dedupWindowMs) : '-'],
    ['message TTL', c ? (c.messageTtlMs ? formatDuration(c.messageTtlMs) : 'none (until consumed)') : '-'],
    ['strict priority', c?.strictPriority ?? '-'],
    ['dead-letter queue', c?.deadLetterQueue || '(its own dead-letter list)'],
    ['engine', c?.engine || '-'],
    ['route epoch', route.routeEpoch],
  ]
}

const queueColumns = [
  { header: 'NAME', value: (q: QueueRoute) => q.queue },
  { header: 'PARTITIONS', value: (q: QueueRoute) => q.partitions.length },
  { header: 'DELIVERY', value: (q: QueueRoute) => (q.config?.paused ? 'paused' : 'running') },
  {
    header: 'VISIBILITY',
    value: (q: QueueRoute) => (q.config ? formatDuration(q.config.visibilityTimeoutMs) : '-'),
  },
  { header: 'MAX-DELIVERIES', value: (q: QueueRoute) => q.config?.maxDeliveries ?? '-' },
  { header: 'MAX-LENGTH', value: (q: QueueRoute) => q.config?.queueLengthMax ?? '-' },
  { header: 'DEDUP', value: (q: QueueRoute) => (q.config ? dedupText(q.config.dedupWindowMs) : '-') },
  { header: 'STRICT', value: (q: QueueRoute) => (q.config?.strictPriority ? 'yes' : 'no') },
  { header: 'ORDERED', value: (q: QueueRoute) => (q.config?.orderedKeys ? 'keys' : 'no') },
  { header: 'ENGINE', value: (q: QueueRoute) => q.config?.engine || '-' },
]

/**
 * The partitions table; the depth columns only when `stats` were asked for, WAITING (messages
 * behind an earlier one of their key) only for a queue with ordered keys.
 */
function partitionColumns(stats: readonly PartitionStats[] | undefined, orderedKeys: boolean) {
  type P = QueueRoute['partitions'][number]
  const of = (p: P) => stats?.find((s) => s.partition === p.partition)
  const sum = (p: P, key: 'ready' | 'delayed' | 'leased' | 'dead') =>
    of(p)?.weights.reduce((n, w) => n + w[key], 0) ?? '-'
  const placement = [
    { header: 'PARTITION', value: (p: P) => p.partition },
    { header: 'GROUP', value: (p: P) => p.groupId },
    { header: 'LEADER', value: (p: P) => p.leaderId || '(none)' },
    { header: 'REPLICAS', value: (p: P) => p.replicas.map((r) => r.nodeId).join(',') || '-' },
  ]
  if (!stats) return placement
  return [
    ...placement,
    { header: 'READY', value: (p: P) => sum(p, 'ready'), align: 'right' as const },
    { header: 'DELAYED', value: (p: P) => sum(p, 'delayed'), align: 'right' as const },
    { header: 'LEASED', value: (p: P) => sum(p, 'leased'), align: 'right' as const },
    { header: 'DEAD', value: (p: P) => sum(p, 'dead'), align: 'right' as const },
    ...(orderedKeys
      ? [{ header: 'WAITING', value: (p: P) => of(p)?.waiting ?? '-', align: 'right' as const }]
      : []),
  ]
}

type WeightRow = PartitionStats['weights'][number] & { partition: number }
const percent = (share: number) => `${(share * 100).toFixed(1)}%`
const weightColumns = [
  { header: 'PARTITION', value: (w: WeightRow) => w.partition },
  { header: 'WEIGHT', value: (w: WeightRow) => w.weight },
  { header: 'READY', value: (w: WeightRow) => w.ready },
  { header: 'DELAYED', value: (w: WeightRow) => w.delayed },
  { header: 'LEASED', value: (w: WeightRow) => w.leased },
  { header: 'DEAD', value: (w: WeightRow) => w.dead },
  { header: 'OLDEST', value: (w: WeightRow) => formatDuration(Math.round(w.oldestAgeMs)) },
  { header: 'TARGET', value: (w: WeightRow) => percent(w.targetShare), align: 'right' as const },
  { header: 'ACHIEVED', value: (w: WeightRow) => percent(w.achievedShare), align: 'right' as const },
]

const BODY_CHARS_SHOWN = 60
/** Listed messages (dead letters, a peek). */
const listedColumns = [
  { header: 'PARTITION', value: (m: Listed) => m.partition },
  { header: 'ID', value: (m: Listed) => m.id },
  { header: 'WEIGHT', value: (m: Listed) => m.weight },
  { header: 'DELIVERIES', value: (m: Listed) => m.deliveryCount },
  // Escaped as in consume's lines: a key is any string, and a newline or an escape sequence in
  // it split the table's row and reached the terminal.
  { header: 'KEY', value: (m: Listed) => (m.key ? shownText(m.key) : '-') },
  {
    header: 'BODY',
    value: (m: Listed) => {
      const { body, encoding } = encodeBody(m.body)
      // JSON.stringify escapes the C0 controls only: shownText the DEL, C1 and bidi controls too.
      const shown = encoding === 'base64' ? `base64:${body}` : shownText(JSON.stringify(body).slice(1, -1))
      // Cut before an escape or a surrogate pair it would split (a cut `\u00` reads as text the
      // message never held; half an emoji as a replacement character).
      return shown.length > BODY_CHARS_SHOWN
        ? `${shown.slice(0, shownCut(shown, BODY_CHARS_SHOWN - 1))}…`
        : shown
    },
  },
]

/**
 * The depths of `name`, or undefined (said on stderr) when the token may not read them: a
 * server before 2026-12-04 shows every token the settings and partitions, the stats only to a
 * producer or consumer of the queue, so describe shows what it can rather than fail.
 */
async function readableStats(
  client: CliClient,
  name: string,
  io: CliIO,
): Promise<Awaited<ReturnType<CliAdmin['queueStats']>> | undefined> {
  try {
    return await client.admin.queueStats(name)
  } catch (error) {
    if ((error as { code?: unknown })?.code !== 'PERMISSION_DENIED') throw error
    io.stderr.write(
      `mq: depths not shown: this token may not read the stats of ${name} (${oneLine((error as Error).message)}); the settings and partitions follow\n`,
    )
    return undefined
  }
}

/**
 * Refuses a command line that gives both `flag` and `--no-` it (commander lets the last win
 * silently; both on one line is a mistake, a script's default and an override).
 */
function refuseFlagAndNegation(command: Command, flag: string): Command {
  const seen = new Set<string>()
  return command
    .on(`option:${flag}`, () => seen.add(`--${flag}`))
    .on(`option:no-${flag}`, () => seen.add(`--no-${flag}`))
    .hook('preAction', () => {
      const both = seen.size === 2
      seen.clear()
      if (both) throw new UsageError(`give --${flag} or --no-${flag}, not both`)
    })
}
