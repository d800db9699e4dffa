import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { FORMAT_LEVEL } from '@mq/protocol'
import { describe, expect, it, vi } from 'vitest'
import { CONFIG_FILE_ONLY, flagOf, loadConfig } from './config'
import { devNodeArgs, devPortsProblem } from './dev-cluster'
import { createProgram, type ProgramIo, runProgram } from './program'

function capture(): ProgramIo & { lines: string[]; errors: string[]; code: number | undefined } {
  const io = {
    lines: [] as string[],
    errors: [] as string[],
    code: undefined as number | undefined,
    out: (l: string) => io.lines.push(l),
    err: (l: string) => io.errors.push(l),
    exit: (c: number) => {
      io.code = c
    },
  }
  return io
}

describe('mq-server program', () => {
  it('has a start flag for every setting but the config-file-only ones, which have none', () => {
    const start = createProgram(capture()).commands.find((c) => c.name() === 'start')
    const flags = new Set(start?.options.map((o) => o.long))
    const config = loadConfig(
      { nodeId: 'n1', listen: '127.0.0.1:7001', dataDir: 'd', initialMeta: 'n1=127.0.0.1:7001' },
      '/srv',
      {},
    )
    const keys = Object.keys(config) as (keyof typeof config)[]
    expect(keys.filter((k) => !CONFIG_FILE_ONLY.has(k) && !flags.has(flagOf(k)))).toEqual([])
    expect([...CONFIG_FILE_ONLY].filter((k) => flags.has(flagOf(k)))).toEqual([])
    expect([...CONFIG_FILE_ONLY].filter((k) => !keys.includes(k))).toEqual([])
  })

  it('rejects a bad --nodes value with a clear error', async () => {
    const program = createProgram(capture())
    program.exitOverride()
    for (const c of program.commands) {
      c.exitOverride()
      c.configureOutput({ writeErr: () => {} })
    }
    await expect(program.parseAsync(['dev', '--nodes', 'zero'], { from: 'user' })).rejects.toThrow(
      /positive integer/,
    )
    await expect(program.parseAsync(['dev', '--nodes', '17'], { from: 'user' })).rejects.toThrow(
      /at most 16 nodes, got 17/,
    )
  })

  it('exits 2 for a command line the parser refuses, as for a refused config, and 0 for help', async () => {
    for (const argv of [
      ['start', '--bogus'],
      ['dev', '--nodes', 'zero'],
      ['dev', '--base-port', 'x'],
      ['nonsense'],
    ]) {
      const io = capture()
      const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true)
      try {
        await runProgram(['node', 'mq-server', ...argv], io)
      } finally {
        stderr.mockRestore()
      }
      expect(io.code, argv.join(' ')).toBe(2)
    }
    const io = capture()
    const stdout = vi.spyOn(process.stdout, 'write').mockImplementation(() => true)
    try {
      await runProgram(['node', 'mq-server', '--help'], io)
    } finally {
      stdout.mockRestore()
    }
    expect(io.code).toBe(0)
  })

  it('prints its version and the format level it writes up to', async () => {
    const program = createProgram(capture())
    let printed = ''
    program.exitOverride().configureOutput({ writeOut: (s) => (printed += s) })
    await expect(program.parseAsync(['--version'], { from: 'user' })).rejects.toThrow()
    expect(printed).toMatch(new RegExp(`^\\d+\\.\\d+\\.\\d+ \\(format level ${FORMAT_LEVEL}\\)\\n$`))
  })

  // Until 2026-12-07 (an operator audit) they exited 1, as a failed openssl does; a bad --days
  // exited 2.
  it('dev-certs exits 2 for a bad --hosts or --node-ids, writing nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mq-dev-certs-usage-'))
    try {
      for (const [flag, value, message] of [
        ['--hosts', 'mq.example:7001', /--hosts: "mq.example:7001" is not a host name/],
        ['--node-ids', 'bad id', /--node-ids: "bad id" is not a node id/],
      ] as const) {
        const io = capture()
        await createProgram(io).parseAsync(['dev-certs', join(dir, 'certs'), flag, value], { from: 'user' })
        expect(io.code, flag).toBe(2)
        expect(io.errors.join('\n')).toMatch(message)
      }
      expect(readdirSync(dir)).toEqual([])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('exits 2 with the reason on a bad config, before binding anything', async () => {
    const io = capture()
    await createProgram(io).parseAsync(['start', '--node-id', 'n1', '--listen', '127.0.0.1:7001'], {
      from: 'user',
    })
    expect(io.code).toBe(2)
    expect(io.errors.join('\n')).toMatch(/--data-dir \(config file: "dataDir"\) is required/)
  })

  it('mq-server dev lets its consoles peek at message bodies (no auth, loopback only)', async () => {
    const members = [
      { nodeId: 'n1', address: '127.0.0.1:7001' },
      { nodeId: 'n2', address: '127.0.0.1:7002' },
    ]
    const options = { dataDir: '/tmp/d', host: '127.0.0.1', httpBasePort: 8001, serverCommand: ['main.js'] }
    const args = devNodeArgs(options, members, 1)
    const start = args.slice(args.indexOf('start'))
    expect(start).toEqual([
      'start',
      '--node-id',
      'n2',
      '--listen',
      '127.0.0.1:7002',
      '--data-dir',
      '/tmp/d/n2',
      '--initial-meta',
      'n1=127.0.0.1:7001,n2=127.0.0.1:7002',
      '--log-format',
      'pretty',
      '--http-listen',
      '127.0.0.1:8002',
      '--console-peek',
    ])
    expect(devNodeArgs({ ...options, httpBasePort: 0 }, members, 0)).not.toContain('--console-peek')
    // Past 7 nodes (the meta group's most voters), the others join through the first.
    const nine = Array.from({ length: 9 }, (_, i) => ({
      nodeId: `n${i + 1}`,
      address: `127.0.0.1:${7001 + i}`,
    }))
    const founder = devNodeArgs(options, nine, 6)
    expect(founder[founder.indexOf('--initial-meta') + 1]?.split(',')).toHaveLength(7)
    const joiner = devNodeArgs(options, nine, 8)
    expect(joiner).not.toContain('--initial-meta')
    expect(joiner[joiner.indexOf('--join') + 1]).toBe('127.0.0.1:7001')
    // `start` knows the flag: the config is refused for what it lacks, not for an unknown option.
    const io = capture()
    const program = createProgram(io)
    for (const c of program.commands) c.exitOverride().configureOutput({ writeErr: () => {} })
    await program.parseAsync(['start', '--console-peek', '--node-id', 'n1', '--listen', '127.0.0.1:7001'], {
      from: 'user',
    })
    expect([io.code, io.errors.join('\n')]).toEqual([
      2,
      expect.stringMatching(/--data-dir \(config file: "dataDir"\) is required/),
    ])
  })

  it("lets a config file's console setting stand unless --no-console is given", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mq-program-'))
    const file = join(dir, 'mq.json')
    // A complete config but for two bad settings, console checked before logLevel.
    const settings = {
      nodeId: 'n1',
      listen: '127.0.0.1:7001',
      dataDir: join(dir, 'd'),
      initialMeta: 'n1=127.0.0.1:7001',
    }
    writeFileSync(file, JSON.stringify({ ...settings, console: 'maybe', logLevel: 'loud' }))
    const io = capture()
    await createProgram(io).parseAsync(['start', '--config', file], { from: 'user' })
    expect([io.code, io.errors.join('\n')]).toEqual([
      2,
      expect.stringMatching(/"console"\) must be true or false/),
    ])
    const flagged = capture()
    await createProgram(flagged).parseAsync(['start', '--config', file, '--no-console'], { from: 'user' })
    expect([flagged.code, flagged.errors.join('\n')]).toEqual([
      2,
      expect.stringMatching(/"logLevel"\) must be one of/),
    ])
    rmSync(dir, { recursive: true, force: true })
  })
})

describe('devPortsProblem', () => {
  it('refuses ports past 65535 for the nodes, gRPC or HTTP', () => {
    expect(devPortsProblem({ nodes: 3, basePort: 7001, httpBasePort: 8001 })).toBeUndefined()
    expect(devPortsProblem({ nodes: 2, basePort: 65535, httpBasePort: 0 })).toMatch(
      /--base-port 65535 with 2 nodes needs ports 65535-65536; ports go from 1 to 65535/,
    )
    expect(devPortsProblem({ nodes: 3, basePort: 70000, httpBasePort: 0 })).toMatch(/--base-port 70000/)
    expect(devPortsProblem({ nodes: 3, basePort: 64535, httpBasePort: 65535 })).toMatch(/--http-base-port/)
    expect(devPortsProblem({ nodes: 3, basePort: 64535, httpBasePort: 0 })).toBeUndefined()
  })

  it('refuses gRPC and HTTP port ranges that overlap, naming both', () => {
    expect(devPortsProblem({ nodes: 3, basePort: 7001, httpBasePort: 7003 })).toMatch(
      /the gRPC ports 7001-7003 and the HTTP ports 7003-7005 overlap: give --base-port and --http-base-port at least 3 apart/,
    )
    expect(devPortsProblem({ nodes: 3, basePort: 7003, httpBasePort: 7001 })).toMatch(/overlap/)
    expect(devPortsProblem({ nodes: 3, basePort: 7001, httpBasePort: 7001 })).toMatch(/overlap/)
    expect(devPortsProblem({ nodes: 3, basePort: 7001, httpBasePort: 7004 })).toBeUndefined()
    expect(devPortsProblem({ nodes: 3, basePort: 7004, httpBasePort: 7001 })).toBeUndefined()
  })
})
