import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Command, CommanderError } from 'commander'
import { afterAll, describe, expect, it } from 'vitest'
import { createProgram, intIn, runMain, serverList } from './program'

/** Parses `args` with exits turned into thrown CommanderErrors; returns what was written. */
async function run(args: string[]): Promise<{ error: CommanderError | undefined; out: string; err: string }> {
  let out = ''
  let err = ''
  const program = createProgram({ out: (t) => (out += t), err: (t) => (err += t) })
  program.exitOverride()
  for (const c of program.commands) c.exitOverride()
  try {
    await program.parseAsync(args, { from: 'user' })
    return { error: undefined, out, err }
  } catch (error) {
    if (error instanceof CommanderError) return { error, out, err }
    throw error
  }
}

describe('command line', () => {
  it('parses bounded integers and server lists', () => {
    expect(intIn(1, 10)('7')).toBe(7)
    for (const bad of ['0', '11', '1.5', 'x', '', '1e3'])
      expect(() => intIn(1, 10)(bad)).toThrow(/integer from 1 to 10/)
    expect(serverList('a:1, b:2')).toEqual(['a:1', 'b:2'])
    expect(() => serverList('a:1,nope')).toThrow(/"nope" is not host:port/)
    expect(() => serverList(',')).toThrow(/host:port/)
    expect(serverList('a:65535')).toEqual(['a:65535'])
    for (const bad of ['a:0', 'a:65536', 'a:99999'])
      expect(() => serverList(bad)).toThrow(new RegExp(`"${bad}" is not host:port`))
  })

  it.each([
    [['produce', '-n', 'abc'], /option '-n, --count <n>' argument 'abc' is invalid/],
    [['produce', '--in-flight', '0'], /integer from 1 to 10000/],
    [['produce', '--batches-in-flight', '6'], /integer from 1 to 5/],
    [['produce', '--servers', 'localhost'], /"localhost" is not host:port/],
    [['fairness', '--weights', '1,x'], /weights 1\.\.1000/],
    [['fairness', '--weights', '3,3'], /distinct/],
    [['fairness', '--tolerance', '2'], /share between 0 and 1/],
    [['scale', '--partitions', '1,2,1'], /distinct counts/],
    [['produce', '--bogus'], /unknown option '--bogus'/],
    [['produce', '--tick-ms', '0'], /integer from 1 to 10000/],
    [['failover', '--tick-ms', 'x'], /integer from 1 to 10000/],
    [
      ['e2e', '--servers', 'a:1', '--tick-ms', '50'],
      /'--tick-ms <ms>' cannot be used with option '--servers <list>'/,
    ],
    [['nonsense'], /unknown command 'nonsense'/],
  ])('refuses %j with a clear error and exit code 1', async (args, message) => {
    const r = await run(args)
    expect(r.error?.exitCode).toBe(1)
    expect(r.err).toMatch(message)
  })

  it('lists every scenario in its help', async () => {
    const r = await run(['--help'])
    expect(r.error?.exitCode).toBe(0)
    for (const s of ['produce', 'consume', 'fairness', 'e2e', 'failover', 'micro', 'suite'])
      expect(r.out).toContain(s)
  })

  it('runs the in-process fairness scenario and writes the table to stdout', async () => {
    const r = await run(['fairness', '--in-process', '--per-weight', '50', '--window', '130'])
    expect(r.error).toBeUndefined()
    expect(r.out).toContain('| fairness-in-process | deviationMax |')
  })

  it('exits 1 from the real process on a bad flag', () => {
    const main = join(import.meta.dirname, 'main.ts')
    const p = spawnSync(
      process.execPath,
      ['--import', import.meta.resolve('tsx'), '--conditions=source', main, 'produce', '-n', '-5'],
      {
        encoding: 'utf8',
        timeout: 30_000,
      },
    )
    expect(p.status).toBe(1)
    expect(p.stderr).toMatch(/argument '-5' is invalid/)
  })
})

describe('a scenario that fails', () => {
  it('is one line on stderr and exit code 1, not a stack trace', async () => {
    let err = ''
    const program = new Command('mq-bench').action(() => {
      throw new Error(
        'gave up after 50 attempts in 25474 ms: No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.1:9. Resolution note: ',
        { cause: new Error('deeper') },
      )
    })
    const before = process.exitCode
    try {
      await runMain(program, ['node', 'mq-bench'], { out: () => {}, err: (t) => (err += t) })
      expect(process.exitCode).toBe(1)
    } finally {
      process.exitCode = before
    }
    expect(err).toBe(
      'mq-bench: gave up after 50 attempts in 25474 ms: No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.1:9.\n',
    )
  })
})

describe('output and compare files, checked before the run', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mq-bench-test-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))
  // A quick in-process run: its table on stdout shows that the run happened.
  const quick = ['fairness', '--in-process', '--per-weight', '50', '--window', '130']

  // The audit's case: a bad --compare was read only after the whole run, and failed with a
  // raw ENOENT stack trace.
  it.each([
    [
      ['--compare', join(dir, 'nope.json')],
      /option '--compare <file>' argument '.*nope\.json' is invalid\. cannot read it: ENOENT/,
    ],
    [['--compare', join(dir, 'bad.json')], /bad\.json: not an mq-bench report/],
    [['--out', join(dir, 'missing', 'r.json')], /its folder .*missing does not exist/],
    [['--html', dir], /is a folder/],
  ])('refuses %j before running, with one line and exit code 1', async (flags, message) => {
    writeFileSync(join(dir, 'bad.json'), '{"results": []}')
    const r = await run([...quick, ...flags])
    expect(r.error?.exitCode).toBe(1)
    expect(r.err).toMatch(message)
    expect(r.out).not.toContain('fairness-in-process')
  })

  it('compares with a report of the same params, and names the params of one that differs', async () => {
    const first = await run([...quick, '--out', join(dir, 'r.json')])
    expect(first.error).toBeUndefined()
    const same = await run([...quick, '--compare', join(dir, 'r.json')])
    expect(same.out).toMatch(/compared with .*r\.json/)
    expect(same.out).toContain('| fairness-in-process | deviationMax |')
    const other = await run([
      'fairness',
      '--in-process',
      '--per-weight',
      '60',
      '--window',
      '130',
      '--compare',
      join(dir, 'r.json'),
    ])
    expect(other.out).toContain('- fairness-in-process: params differ: perWeightUnit 50 → 60')
  })

  it('exits 1 from the real process with one line, no stack trace, on a missing --compare file', () => {
    const main = join(import.meta.dirname, 'main.ts')
    const p = spawnSync(
      process.execPath,
      [
        '--import',
        import.meta.resolve('tsx'),
        '--conditions=source',
        main,
        ...quick,
        '--compare',
        join(dir, 'nope.json'),
      ],
      { encoding: 'utf8', timeout: 30_000 },
    )
    expect(p.status).toBe(1)
    expect(p.stderr).toMatch(/cannot read it: ENOENT/)
    expect(p.stderr).not.toMatch(/\n\s+at /)
    expect(p.stdout).toBe('')
  })
})
