import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer as createHttpServer } from 'node:http'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { FakeBroker } from './fake-broker'

// The built `mq` binary, as a user runs it: built by the suite's global setup (vitest.setup.ts:
// turbo builds it and the SDK it imports, or takes them from its cache), then run as a child
// process.
const cliDir = join(dirname(fileURLToPath(import.meta.url)), '..')
const main = join(cliDir, 'dist', 'main.js')
const { version } = JSON.parse(readFileSync(join(cliDir, 'package.json'), 'utf8')) as { version: string }

interface Run {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
  readonly elapsedMs: number
}

/**
 * Runs the binary with `args`; kills it (by its pid) if it outlives `limitMs`. `onStdout`
 * sees the output so far each time more arrives (to interrupt the child, say).
 */
function runMq(
  args: string[],
  env: Record<string, string> = {},
  input?: string,
  onStdout?: (stdout: string, child: ChildProcess) => void,
  limitMs = 15_000,
): Promise<Run> {
  const started = Date.now()
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [main, ...args], {
      env: { ...process.env, MQ_SERVERS: '', ...env },
      stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    })
    child.stdin?.end(input)
    let stdout = ''
    let stderr = ''
    child.stdout?.on('data', (d: Buffer) => {
      stdout += d.toString()
      onStdout?.(stdout, child)
    })
    child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()))
    const timer = setTimeout(() => child.kill('SIGKILL'), limitMs)
    child.on('error', reject)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr, elapsedMs: Date.now() - started })
    })
  })
}

/**
 * A CA and a certificate for 127.0.0.1 signed by it, made with openssl in `dir` (as
 * `mq-server dev-certs` makes them); undefined when openssl is not installed.
 */
function makeCerts(dir: string): { ca: string; cert: Buffer; key: Buffer } | undefined {
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' })
  try {
    const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
    openssl(
      'req',
      '-x509',
      ...ec,
      '-keyout',
      'ca.key',
      '-out',
      'ca.crt',
      '-days',
      '2',
      '-subj',
      '/CN=mq-test-ca',
    )
    openssl('req', ...ec, '-keyout', 'node.key', '-out', 'node.csr', '-subj', '/CN=127.0.0.1')
    writeFileSync(join(dir, 'ext'), 'subjectAltName=IP:127.0.0.1\n')
    openssl(
      'x509',
      '-req',
      '-in',
      'node.csr',
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      'node.crt',
      '-days',
      '2',
      '-extfile',
      'ext',
    )
  } catch {
    return undefined
  }
  return {
    ca: join(dir, 'ca.crt'),
    cert: readFileSync(join(dir, 'node.crt')),
    key: readFileSync(join(dir, 'node.key')),
  }
}

describe('the mq binary', () => {
  const broker = new FakeBroker()
  beforeAll(() => broker.start())
  afterAll(() => broker.stop())

  it('prints its version', async () => {
    const r = await runMq(['--version'])
    expect(r).toMatchObject({ code: 0, stdout: `${version}\n`, stderr: '' })
  })

  it('explains itself with --help', async () => {
    const r = await runMq(['--help'])
    expect(r.code).toBe(0)
    expect(r.stdout).toMatch(/^Usage: mq \[options\] \[command\]/)
    for (const command of ['cluster', 'node', 'group', 'queue', 'produce', 'consume']) {
      expect(r.stdout).toMatch(new RegExp(`\\n  ${command} `))
    }
    expect(r.stdout).toMatch(/Exit codes: 0 ok, 1 usage, 2 not found, 3 cluster unavailable, 4 other error/)
    const sub = await runMq(['produce', '--help'])
    expect(sub.stdout).toMatch(/Usage: mq produce \[options\] <queue> \[body\]/)
    expect(sub.stdout).toMatch(/seq 1000 \| mq produce jobs/)
  })

  it('exits 1 with one line on a usage error', async () => {
    const r = await runMq(['consume', 'jobs', '--wait', 'forever'])
    expect(r.code).toBe(1)
    expect(r.stdout).toBe('')
    expect(r.stderr).toMatch(
      /^mq: option '--wait <duration>' argument 'forever' is invalid\. .*\(see mq consume --help\)\n$/,
    )
  })

  it('exits 3 within about --timeout when no server answers, naming the servers', async () => {
    const servers = '127.0.0.1:1,127.0.0.1:2'
    const r = await runMq(['--timeout', '700ms', 'queue', 'list'], { MQ_SERVERS: servers })
    expect(r.code).toBe(3)
    expect(r.stdout).toBe('')
    expect(r.stderr.trimEnd().split('\n')).toHaveLength(1)
    expect(r.stderr).toMatch(
      /^mq: the cluster at 127\.0\.0\.1:1,127\.0\.0\.1:2 did not answer within 700ms: /,
    )
    expect(r.elapsedMs).toBeLessThan(700 + 5_000)
  })

  it('without --timeout, exits 3 after 2 s of refused connections, saying nothing listens there', async () => {
    const servers = '127.0.0.1:1,127.0.0.1:2'
    const r = await runMq(['queue', 'list'], { MQ_SERVERS: servers })
    expect(r.code).toBe(3)
    expect(r.stderr.trimEnd().split('\n')).toHaveLength(1)
    expect(r.stderr).toMatch(
      /^mq: nothing listens at 127\.0\.0\.1:1,127\.0\.0\.1:2: connection refused on every attempt for \d+ ms \(\d+ attempts\): connect ECONNREFUSED 127\.0\.0\.1:\d \(is the cluster started\? .*--timeout waits that long for it\)\n$/,
    )
    // One sentence: no grpc-js wrapping, no dangling "Resolution note:".
    expect(r.stderr).not.toMatch(/Resolution note|Last error|nothing listens there/)
    // The default deadline is 10 s: given up at the refusal bound (2 s), not at it.
    expect(r.elapsedMs).toBeLessThan(6_000)
  })

  it("without --timeout, exits 3 after 2 s at a server that does not speak gRPC (a node's HTTP port)", async () => {
    const http1 = createHttpServer((_req, res) => res.end('ok'))
    await new Promise<void>((resolve) => http1.listen(0, '127.0.0.1', resolve))
    try {
      const { port } = http1.address() as { port: number }
      const r = await runMq(['queue', 'list'], { MQ_SERVERS: `127.0.0.1:${port}` })
      expect(r.code).toBe(3)
      expect(r.stderr.trimEnd().split('\n')).toHaveLength(1)
      expect(r.stderr).toMatch(
        /^mq: no gRPC server at 127\.0\.0\.1:\d+: answered by a server that does not speak gRPC on every attempt for \d+ ms \(\d+ attempts\): Protocol error \(the server does not speak gRPC: is --servers a node's gRPC address \(mq-server --listen\), not its HTTP port \(--http-listen\)\?\)\n$/,
      )
      // The default deadline is 10 s: given up at the refusal bound (2 s), not at it.
      expect(r.elapsedMs).toBeLessThan(6_000)
    } finally {
      http1.closeAllConnections()
      await new Promise<void>((resolve) => http1.close(() => resolve()))
    }
  })
  it('creates, produces and consumes through the SDK over gRPC', async () => {
    const env = { MQ_SERVERS: broker.address }
    expect(await runMq(['queue', 'create', 'jobs', '--partitions', '2'], env)).toMatchObject({
      code: 0,
      stdout: 'created queue jobs (2 partitions)\n',
    })
    const again = await runMq(['queue', 'create', 'jobs'], env)
    expect(again.code).toBe(4)
    expect(again.stderr).toBe('mq: queue jobs exists\n')

    const counted = await runMq(['produce', 'jobs', '--count', '3', '--json', 'x'], env)
    expect(counted.code).toBe(0)
    expect(
      counted.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).seq)
        .sort(),
    ).toEqual([0, 1, 2])
    const lines = await runMq(['produce', 'jobs', '--weight', '7'], env, 'a\nb\n')
    expect(lines).toMatchObject({
      code: 0,
      stdout: expect.stringMatching(/^produced 2 messages to jobs in /),
    })
    expect(broker.ready('jobs').sort()).toEqual(['a', 'b', 'x', 'x', 'x'])

    const consumed = await runMq(['consume', 'jobs', '--max', '5', '--json'], env)
    expect(consumed.code).toBe(0)
    const records = consumed.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    expect(records.map((r) => r.body).sort()).toEqual(['a', 'b', 'x', 'x', 'x'])
    expect(records.find((r) => r.body === 'a')).toMatchObject({ weight: 7, deliveryCount: 1, headers: {} })
    expect(broker.acked.sort()).toEqual(records.map((r) => r.id).sort())
    expect(broker.ready('jobs')).toEqual([])
    // The process ends on its own once done, not by the 2 s safety exit (which says so).
    expect(consumed.stderr).toBe('')

    const empty = await runMq(['consume', 'jobs', '--wait', '300ms'], env)
    expect(empty).toMatchObject({ code: 0, stdout: '', stderr: 'mq: no message in jobs within 300ms\n' })

    const missing = await runMq(['queue', 'describe', 'nope', '--no-stats'], env)
    expect(missing).toMatchObject({ code: 2, stderr: 'mq: queue nope does not exist\n' })
  })
  it('stops consume --follow cleanly on Ctrl-C, acking what it printed', async () => {
    const env = { MQ_SERVERS: broker.address }
    expect((await runMq(['queue', 'create', 'follow'], env)).code).toBe(0)
    expect((await runMq(['produce', 'follow', 'one'], env)).code).toBe(0)
    let interrupted = false
    const r = await runMq(['consume', 'follow', '--follow', '--json'], env, undefined, (stdout, child) => {
      if (!interrupted && stdout.includes('\n')) {
        interrupted = true
        child.kill('SIGINT')
      }
    })
    expect(r).toMatchObject({ code: 0, stderr: '' })
    const [record] = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    expect(record).toMatchObject({ body: 'one', deliveryCount: 1 })
    expect(broker.acked).toContain(record.id)
    expect(broker.ready('follow')).toEqual([])
  })

  it('stops produce on Ctrl-C with its stdin still open, saying what it produced, and exits 130', async () => {
    const env = { MQ_SERVERS: broker.address }
    expect((await runMq(['queue', 'create', 'piped'], env)).code).toBe(0)
    const started = Date.now()
    const child = spawn(process.execPath, [main, 'produce', 'piped', '--json'], {
      env: { ...process.env, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    const killer = setTimeout(() => child.kill('SIGKILL'), 15_000)
    let stdout = ''
    let stderr = ''
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString()
      // Three lines produced; the pipe stays open (as from tail -f).
      if (stdout.split('\n').length === 4) child.kill('SIGINT')
    })
    child.stdin.write('one\ntwo\nthree\n')
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
    clearTimeout(killer)
    expect(code).toBe(130)
    expect(stderr).toMatch(
      /^mq: produce to piped stopped \(Ctrl-C\): 3 of 3 messages produced; the rest of stdin was not read\n$/,
    )
    expect(broker.ready('piped')).toHaveLength(3)
    // Not held up by the open stdin (nor by the 2 s fallback exit).
    expect(Date.now() - started).toBeLessThan(10_000)
    expect(stderr).not.toMatch(/still open/)
  })

  it("stops produce quietly (exit 0) once stdout's reader left, after the sends under way", async () => {
    const env = { MQ_SERVERS: broker.address }
    expect((await runMq(['queue', 'create', 'headed'], env)).code).toBe(0)
    const child = spawn(process.execPath, [main, 'produce', 'headed', '--json'], {
      env: { ...process.env, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    const killer = setTimeout(() => child.kill('SIGKILL'), 15_000)
    let stderr = ''
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    // `mq produce --json | head -1`: the reader leaves after the first line; more lines follow.
    child.stdout.once('data', () => {
      child.stdout.destroy()
      child.stdin.write('two\n')
    })
    child.stdin.write('one\n')
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
    clearTimeout(killer)
    expect(code).toBe(0)
    expect(stderr).toMatch(
      /^mq: produce to headed stopped \(stdout's reader left \(EPIPE\)\): 2 of 2 messages produced; the rest of stdin was not read\n$/,
    )
    expect(broker.ready('headed')).toHaveLength(2)
  })

  it('stops on SIGTERM as on Ctrl-C, giving back what it holds (systemd and Kubernetes stop with it)', async () => {
    const env = { MQ_SERVERS: broker.address }
    expect((await runMq(['queue', 'create', 'term'], env)).code).toBe(0)
    expect((await runMq(['produce', 'term', 'kept'], env)).code).toBe(0)
    let stopped = false
    const r = await runMq(
      ['consume', 'term', '--follow', '--no-ack', '--max', '10'],
      env,
      undefined,
      (stdout, child) => {
        if (!stopped && stdout.includes('\n')) {
          stopped = true
          child.kill('SIGTERM')
        }
      },
    )
    expect(r).toMatchObject({ code: 0, stderr: '' })
    expect(r.stdout).toMatch(/kept/)
    // Given back at once, not left leased until its visibility timeout.
    expect(broker.ready('term')).toHaveLength(1)
  })

  // Any write error but EPIPE was thrown from stdout's error listener: a stack trace, exit 1,
  // and a consume left what it held leased until the visibility timeout (with max deliveries 1,
  // dead-lettered then).
  it.skipIf(!existsSync('/dev/full'))(
    'fails with one line and exit 4 when stdout cannot be written (a full disk), giving back what it holds',
    async () => {
      const env = { MQ_SERVERS: broker.address }
      expect((await runMq(['queue', 'create', 'full-disk'], env)).code).toBe(0)
      expect((await runMq(['produce', 'full-disk', 'one'], env)).code).toBe(0)
      const toFull = async (args: string[]) => {
        const full = openSync('/dev/full', 'w')
        try {
          const child = spawn(process.execPath, [main, ...args], {
            env: { ...process.env, ...env },
            stdio: ['ignore', full, 'pipe'],
          })
          const killer = setTimeout(() => child.kill('SIGKILL'), 15_000)
          let stderr = ''
          child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()))
          const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
          clearTimeout(killer)
          return { code, stderr }
        } finally {
          closeSync(full)
        }
      }
      const ackedBefore = broker.acked.length
      const consumed = await toFull(['consume', 'full-disk', '--wait', '1s'])
      expect(consumed).toEqual({
        code: 4,
        stderr: 'mq: stdout could not be written: ENOSPC: no space left on device, write\n',
      })
      expect(broker.ready('full-disk')).toEqual(['one'])
      expect(broker.acked).toHaveLength(ackedBefore)
      const listed = await toFull(['queue', 'list'])
      expect(listed).toEqual({
        code: 4,
        stderr: 'mq: stdout could not be written: ENOSPC: no space left on device, write\n',
      })
    },
  )
})

// After 'the mq binary', whose beforeAll builds it.
describe('the mq binary over TLS', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mq-cli-tls-'))
  const certs = makeCerts(dir)
  const tlsBroker = new FakeBroker()
  const plainBroker = new FakeBroker()
  beforeAll(async () => {
    if (certs) await tlsBroker.start(certs)
    await plainBroker.start()
  })
  afterAll(() => {
    tlsBroker.stop()
    plainBroker.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  it.skipIf(!certs)('prints no DEP0123 warning for a server given by IP address', async () => {
    const r = await runMq(['--tls-ca', certs?.ca ?? '', 'queue', 'create', 'secure'], {
      MQ_SERVERS: tlsBroker.address,
    })
    expect(r).toMatchObject({ code: 0, stdout: 'created queue secure (1 partition)\n', stderr: '' })
  })

  it.skipIf(!certs)("says TLS settings probably do not match the server's, either way", async () => {
    const plainToTls = await runMq(['--timeout', '1s', 'queue', 'list'], { MQ_SERVERS: tlsBroker.address })
    expect(plainToTls.code).toBe(3)
    expect(plainToTls.stderr.trimEnd().split('\n')).toHaveLength(1)
    expect(plainToTls.stderr).toMatch(
      /TLS settings probably do not match the server's; give its CA with --tls-ca/,
    )
    const tlsToPlain = await runMq(['--timeout', '1s', '--tls-ca', certs?.ca ?? '', 'queue', 'list'], {
      MQ_SERVERS: plainBroker.address,
    })
    expect(tlsToPlain.code).toBe(3)
    expect(tlsToPlain.stderr.trimEnd().split('\n')).toHaveLength(1)
    expect(tlsToPlain.stderr).toMatch(
      /wrong version number \(the server answered in plaintext: your TLS settings probably do not match the server's/,
    )
  })
})
