import { accessSync, constants, readFileSync, statSync, writeFileSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import type { KeylessPartitioning } from '@mq/router-client'
import { Command, InvalidArgumentError, Option } from 'commander'
import { toHtml } from './html'
import { compareReports, comparisonMarkdown, toMarkdown } from './report'
import { type BenchReport, newReport, parseReport, type ScenarioResult } from './result'
import type { Target } from './scenarios/common'
import { CONSUME_DEFAULTS, runConsume } from './scenarios/consume'
import { E2E_DEFAULTS, runE2e } from './scenarios/e2e'
import { FAILOVER_DEFAULTS, failoverFailures, runFailover } from './scenarios/failover'
import { FAIRNESS_DEFAULTS, fairnessFailures, parseWeights, runFairness } from './scenarios/fairness'
import { MICRO_DEFAULTS, runMicro } from './scenarios/micro'
import { PRODUCE_DEFAULTS, runProduce } from './scenarios/produce'
import { runScale, SCALE_DEFAULTS } from './scenarios/scale'
import { runSuite } from './scenarios/suite'
import { BENCH_DEFAULT_TIMING, SERVER_DEFAULT_TIMING } from './timing'

export interface ProgramIo {
  /** stdout: the markdown table, comparisons. */
  readonly out: (text: string) => void
  /** stderr: errors. */
  readonly err: (text: string) => void
}

const DEFAULT_IO: ProgramIo = {
  out: (t) => process.stdout.write(t.endsWith('\n') ? t : `${t}\n`),
  err: (t) => process.stderr.write(t),
}

/** A commander parser for an integer in [min, max]. */
export function intIn(min: number, max: number): (value: string) => number {
  return (value) => {
    const n = Number(value)
    if (!/^-?\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`expected an integer from ${min} to ${max}.`)
    }
    return n
  }
}

/** A commander parser for `--keyless`: sticky or round-robin. */
export function keylessMode(value: string): KeylessPartitioning {
  if (value !== 'sticky' && value !== 'round-robin')
    throw new InvalidArgumentError("expected 'sticky' or 'round-robin'.")
  return value
}

/** A commander parser for `host:port,host:port`. */
export function serverList(value: string): string[] {
  const list = value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
  for (const s of list) {
    // A port is 1 to 65535: `a:99999` or `a:0` passed, and the run tried to connect for ~25 s,
    // then ended with a stack trace (ERR_SOCKET_BAD_PORT) instead of a usage error.
    const port = Number(/^[^:\s]+:(\d{1,5})$/.exec(s)?.[1] ?? 0)
    if (port < 1 || port > 65_535) throw new InvalidArgumentError(`"${s}" is not host:port.`)
  }
  if (list.length === 0) throw new InvalidArgumentError('expected host:port[,host:port…].')
  return list
}

/** A `--compare` file, read and parsed before the run. */
export interface CompareWith {
  readonly path: string
  readonly report: BenchReport
}

/**
 * A commander parser for `--compare <file>`: reads and parses it at once, so that a missing or
 * malformed file stops the command before the run (exit 1, one line) rather than after it.
 */
export function compareFile(value: string): CompareWith {
  let text: string
  try {
    text = readFileSync(value, 'utf8')
  } catch (error) {
    throw new InvalidArgumentError(`cannot read it: ${(error as Error).message}.`)
  }
  try {
    return { path: value, report: parseReport(text, value) }
  } catch (error) {
    throw new InvalidArgumentError(`${(error as Error).message}.`)
  }
}

/**
 * A commander parser for `--out`/`--html <file>`: the file's folder must exist and be writable,
 * and the file, if it exists, must be a writable file (checked before the run).
 */
export function writableFile(value: string): string {
  const path = resolve(value)
  const dir = dirname(path)
  const stat = (p: string) => {
    try {
      return statSync(p)
    } catch {
      return undefined
    }
  }
  const folder = stat(dir)
  if (!folder?.isDirectory()) throw new InvalidArgumentError(`its folder ${dir} does not exist.`)
  const file = stat(path)
  if (file?.isDirectory()) throw new InvalidArgumentError(`${path} is a folder.`)
  try {
    accessSync(file ? path : dir, constants.W_OK)
  } catch {
    throw new InvalidArgumentError(`${file ? path : `the folder ${dir}`} is not writable.`)
  }
  return value
}

interface CommonOptions {
  servers?: string[]
  out?: string
  html?: string
  compare?: CompareWith
  fromSource?: boolean
  tickMs?: number
}

/**
 * Runs `program` on `argv` as the binary does: a scenario that fails (a cluster that does not
 * answer at --servers, say) is one line on stderr and exit code 1, not an uncaught error's
 * stack trace (until an audit: 40 lines of grpc-js frames after 25 s of retries).
 */
export async function runMain(
  program: Command,
  argv: readonly string[],
  io: ProgramIo = DEFAULT_IO,
): Promise<void> {
  try {
    await program.parseAsync([...argv])
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error)
    io.err(
      `mq-bench: ${message
        .replace(/\s*Resolution note:\s*$/, '')
        .replace(/\s+/g, ' ')
        .trim()}\n`,
    )
    process.exitCode = 1
  }
}

/** Builds the `mq-bench` command line. Results go to stdout as markdown, and to --out/--html. */
export function createProgram(io: ProgramIo = DEFAULT_IO): Command {
  const program = new Command('mq-bench')
    .description('benchmarks of an mq cluster and of its packages')
    .configureOutput({ writeOut: (s) => io.out(s), writeErr: (s) => io.err(s) })
    .showHelpAfterError('(run mq-bench <scenario> --help for the options)')

  const finish = async (results: ScenarioResult[], o: CommonOptions): Promise<void> => {
    const report = newReport(results)
    const markdown = toMarkdown(report)
    io.out(markdown)
    if (o.out) writeFileSync(o.out, `${JSON.stringify(report, null, 2)}\n`)
    if (o.html) writeFileSync(o.html, toHtml(report, markdown))
    if (o.compare) {
      const old: BenchReport = o.compare.report
      io.out(
        `\ncompared with ${o.compare.path} (${old.startedAt}):\n\n${comparisonMarkdown(compareReports(old, report))}`,
      )
    }
  }

  /**
   * Exit 1 with one line on stderr per failover or fairness result that failed
   * (failoverFailures, fairnessFailures): the suite's fairness past its tolerance exited 0.
   */
  const checkVerdicts = (results: readonly ScenarioResult[]): void => {
    for (const r of results) {
      const failures = r.scenario.startsWith('failover')
        ? failoverFailures(r)
        : r.scenario.startsWith('fairness')
          ? fairnessFailures(r)
          : []
      if (failures.length === 0) continue
      io.err(`mq-bench: ${r.scenario} FAILED: ${failures.join('; ')}\n`)
      process.exitCode = 1
    }
  }

  const tickOption = (): Option =>
    new Option(
      '--tick-ms <ms>',
      `Raft tick of the local cluster (${BENCH_DEFAULT_TIMING.electionTicks} ticks to an election; mq-server's default tick is ${SERVER_DEFAULT_TIMING.tickMs} ms)`,
    )
      .argParser(intIn(1, 10_000))
      .default(BENCH_DEFAULT_TIMING.tickMs)

  const scenario = (name: string, description: string, cluster = true): Command => {
    const c = program
      .command(name)
      .description(description)
      .option('--out <file>', 'write the results as JSON', writableFile)
      .option('--html <file>', 'write an HTML report with charts', writableFile)
      .option(
        '--compare <file>',
        'print ratios against an earlier --out file (results run with the same params)',
        compareFile,
      )
    if (cluster) {
      c.option(
        '--servers <list>',
        'seed addresses host:port,… (default: start a local 3-node cluster)',
        serverList,
      )
      c.addOption(tickOption().conflicts('servers'))
      c.addOption(new Option('--from-source', 'run the local cluster from source through tsx').hideHelp())
    }
    return c
  }
  const target = (o: CommonOptions): Target => ({
    ...(o.servers ? { servers: o.servers } : {}),
    fromSource: o.fromSource ?? false,
    ...(o.tickMs !== undefined ? { timing: { tickMs: o.tickMs } } : {}),
  })
  const seconds = (o: { timeLimit: number }) => o.timeLimit * 1000

  scenario('produce', 'N messages of S bytes, W in flight per producer, P producers')
    .option('-n, --count <n>', 'messages', intIn(1, 10_000_000), PRODUCE_DEFAULTS.count)
    .option('-s, --size <bytes>', 'body bytes', intIn(0, 256 * 1024), PRODUCE_DEFAULTS.sizeBytes)
    .option(
      '-w, --in-flight <n>',
      'sends outstanding per producer',
      intIn(1, 10_000),
      PRODUCE_DEFAULTS.inFlight,
    )
    .option('-p, --producers <n>', 'producers (one client each)', intIn(1, 64), PRODUCE_DEFAULTS.producers)
    .option('--partitions <n>', 'partitions of the queue', intIn(1, 256), PRODUCE_DEFAULTS.partitions)
    .option(
      '--time-limit <s>',
      'stop after this many seconds',
      intIn(1, 3600),
      PRODUCE_DEFAULTS.timeLimitMs / 1000,
    )
    .option('--no-idempotent', 'plain producers (retries not recognised, order not kept)')
    .option(
      '--batches-in-flight <n>',
      'batches a producer keeps in flight per partition (1 = one at a time)',
      intIn(1, 5),
      PRODUCE_DEFAULTS.batchesInFlight,
    )
    .option(
      '--keyless <mode>',
      'how messages pick partitions: sticky (a batch at a time) or round-robin',
      keylessMode,
      PRODUCE_DEFAULTS.keyless,
    )
    .action(async (o) => {
      const r = await runProduce(target(o), {
        idempotent: o.idempotent,
        batchesInFlight: o.batchesInFlight,
        keyless: o.keyless,
        count: o.count,
        sizeBytes: o.size,
        inFlight: o.inFlight,
        producers: o.producers,
        partitions: o.partitions,
        timeLimitMs: seconds(o),
      })
      await finish([r], o)
    })

  scenario('consume', 'drain a backlog of N messages with C consumers, prefetch, ack')
    .option('-n, --count <n>', 'backlog messages', intIn(1, 10_000_000), CONSUME_DEFAULTS.count)
    .option('-s, --size <bytes>', 'body bytes', intIn(0, 256 * 1024), CONSUME_DEFAULTS.sizeBytes)
    .option('-c, --consumers <n>', 'consumers (one client each)', intIn(1, 64), CONSUME_DEFAULTS.consumers)
    .option(
      '--prefetch <n>',
      'leased and unsettled per consumer',
      intIn(1, 10_000),
      CONSUME_DEFAULTS.prefetch,
    )
    .option('--partitions <n>', 'partitions of the queue', intIn(1, 256), CONSUME_DEFAULTS.partitions)
    .option(
      '--ordered-keys <n>',
      'a queue with ordered keys, the backlog sent under N keys in turn (one message per key in flight)',
      intIn(0, 1_000_000),
      CONSUME_DEFAULTS.orderedKeys,
    )
    .option(
      '--time-limit <s>',
      'stop the backlog fill, and then the drain, after this many seconds each',
      intIn(1, 3600),
      CONSUME_DEFAULTS.timeLimitMs / 1000,
    )
    .action(async (o) => {
      const r = await runConsume(target(o), {
        orderedKeys: o.orderedKeys,
        count: o.count,
        sizeBytes: o.size,
        consumers: o.consumers,
        prefetch: o.prefetch,
        partitions: o.partitions,
        timeLimitMs: seconds(o),
      })
      await finish([r], o)
    })

  scenario('fairness', 'a backlog in several weights in one partition, then lease: achieved vs target share')
    .option('--weights <list>', 'weights, comma-separated', parseWeights, FAIRNESS_DEFAULTS.weights)
    .option(
      '--per-weight <n>',
      'backlog per unit of weight',
      intIn(1, 100_000),
      FAIRNESS_DEFAULTS.perWeightUnit,
    )
    .option('--window <n>', 'leases per share sample', intIn(10, 100_000), FAIRNESS_DEFAULTS.windowLeases)
    .option(
      '--tolerance <share>',
      'worst deviation allowed (exit 1 beyond)',
      parseShare,
      FAIRNESS_DEFAULTS.tolerance,
    )
    .option('--in-process', 'run against @mq/weighted-queue directly (no cluster)')
    .option(
      '--time-limit <s>',
      'stop after this many seconds',
      intIn(1, 3600),
      FAIRNESS_DEFAULTS.timeLimitMs / 1000,
    )
    .action(async (o) => {
      const r = await runFairness(target(o), {
        weights: o.weights,
        perWeightUnit: o.perWeight,
        windowLeases: o.window,
        tolerance: o.tolerance,
        inProcess: o.inProcess ?? false,
        timeLimitMs: seconds(o),
      })
      await finish([r], o)
      checkVerdicts([r])
    })

  scenario('e2e', 'a fixed rate for T seconds: produce → receive latency')
    .option('-r, --rate <msgs/s>', 'messages per second', intIn(1, 1_000_000), E2E_DEFAULTS.ratePerS)
    .option('-t, --duration <s>', 'seconds of load', intIn(1, 3600), E2E_DEFAULTS.durationMs / 1000)
    .option('-s, --size <bytes>', 'body bytes (at least 8)', intIn(8, 256 * 1024), E2E_DEFAULTS.sizeBytes)
    .option('--partitions <n>', 'partitions of the queue', intIn(1, 256), E2E_DEFAULTS.partitions)
    .action(async (o) => {
      const r = await runE2e(target(o), {
        ratePerS: o.rate,
        durationMs: o.duration * 1000,
        sizeBytes: o.size,
        partitions: o.partitions,
      })
      await finish([r], o)
    })

  scenario('failover', 'fixed-rate load while the bench kills or pauses the leader of a data group', false)
    .option('-r, --rate <msgs/s>', 'messages per second', intIn(1, 1_000_000), FAILOVER_DEFAULTS.ratePerS)
    .option(
      '-t, --duration <s>',
      'seconds of load (the kill is at a third)',
      intIn(3, 3600),
      FAILOVER_DEFAULTS.durationMs / 1000,
    )
    .option('--partitions <n>', 'partitions of the queue', intIn(1, 256), FAILOVER_DEFAULTS.partitions)
    .addOption(new Option('--kill <group>', 'whose leader to hit').choices(['data', 'meta']).default('data'))
    .addOption(
      new Option('--fault <kind>', 'kill: SIGKILL; pause: SIGSTOP for a third of the run, then SIGCONT')
        .choices(['kill', 'pause'])
        .default('kill'),
    )
    .addOption(tickOption())
    .addOption(new Option('--from-source', 'run the local cluster from source through tsx').hideHelp())
    .action(async (o) => {
      const r = await runFailover(
        { fromSource: o.fromSource ?? false, timing: { tickMs: o.tickMs } },
        {
          ratePerS: o.rate,
          durationMs: o.duration * 1000,
          partitions: o.partitions,
          kill: o.kill,
          fault: o.fault,
        },
      )
      await finish([r], o)
      checkVerdicts([r])
    })

  scenario('scale', 'the same produce run into queues of 1, 2, 4 … partitions')
    .option(
      '--partitions <list>',
      'partition counts, comma-separated',
      partitionList,
      SCALE_DEFAULTS.partitions,
    )
    .option('-n, --count <n>', 'messages per run', intIn(1, 10_000_000), SCALE_DEFAULTS.count)
    .option('-s, --size <bytes>', 'body bytes', intIn(0, 256 * 1024), SCALE_DEFAULTS.sizeBytes)
    .option('-w, --in-flight <n>', 'sends outstanding', intIn(1, 10_000), SCALE_DEFAULTS.inFlight)
    .option(
      '--time-limit <s>',
      'stop each run after this many seconds',
      intIn(1, 3600),
      SCALE_DEFAULTS.timeLimitMs / 1000,
    )
    .action(async (o) => {
      const r = await runScale(target(o), {
        partitions: o.partitions,
        count: o.count,
        sizeBytes: o.size,
        inFlight: o.inFlight,
        timeLimitMs: seconds(o),
      })
      await finish([r], o)
    })

  scenario('micro', "the packages' own benchmarks (weighted-queue, kv-storage)", false)
    .option(
      '--cycles <n>',
      'weighted-queue enqueue→lease→ack cycles',
      intIn(1, 10_000_000),
      MICRO_DEFAULTS.cycles,
    )
    .option('--batches <n>', 'kv-storage synced batches', intIn(1, 100_000), MICRO_DEFAULTS.batches)
    .option('--batch <n>', 'entries per batch', intIn(1, 100_000), MICRO_DEFAULTS.batchEntries)
    .action(async (o) => {
      const rs = await runMicro({ cycles: o.cycles, batches: o.batches, batchEntries: o.batch })
      await finish(rs, o)
    })

  scenario('suite', 'the standard quick set (under 3 minutes)').action(async (o) => {
    const results = await runSuite(target(o))
    await finish(results, o)
    checkVerdicts(results)
  })

  return program
}

function partitionList(value: string): number[] {
  const parse = intIn(1, 256)
  const counts = value.split(',').map((s) => parse(s.trim()))
  // One run per count: a count twice made two runs whose figures the report keeps one of.
  if (new Set(counts).size !== counts.length) throw new InvalidArgumentError('expected distinct counts.')
  return counts
}

function parseShare(value: string): number {
  const n = Number(value)
  if (!Number.isFinite(n) || n <= 0 || n >= 1)
    throw new InvalidArgumentError('expected a share between 0 and 1.')
  return n
}
