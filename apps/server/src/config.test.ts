import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { FORMAT_LEVEL } from '@mq/protocol'
import { afterAll, describe, expect, it } from 'vitest'
import { ConfigError, jsonSyntaxProblem, loadConfig, TOKEN_CHARS_MIN, weakSecretWarning } from './config'

const dir = mkdtempSync(join(tmpdir(), 'mq-config-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const base = {
  nodeId: 'n1',
  listen: '127.0.0.1:7001',
  dataDir: 'data/n1',
  initialMeta: 'n1=127.0.0.1:7001,n2=127.0.0.1:7002,n3=127.0.0.1:7003',
}

describe('loadConfig', () => {
  it('fills defaults and resolves the data dir', () => {
    const c = loadConfig(base, '/srv')
    expect(c).toMatchObject({
      nodeId: 'n1',
      advertise: '127.0.0.1:7001',
      dataDir: '/srv/data/n1',
      tickMs: 50,
      replaceDeadAfterMs: 300_000,
      formatLevel: FORMAT_LEVEL,
      connectionsMax: 4_096,
      connectionsPerAddressMax: 1_024,
      httpConnectionsPerAddressMax: 16,
      connectionUnsentMaxMb: 256,
      unsentMaxMb: 1_024,
      logMemoryMb: 128,
    })
    // The HTTP port's connections from one address (a reverse proxy's): 16 unless set, up to 64.
    expect(
      loadConfig({ ...base, httpListen: '127.0.0.1:8001', httpConnectionsPerAddressMax: '64' }, '/srv', {})
        .httpConnectionsPerAddressMax,
    ).toBe(64)
    expect(loadConfig({ ...base, logMemoryMb: '32' }, '/srv', {}).logMemoryMb).toBe(32)
    expect(c.initialMeta).toHaveLength(3)
    expect(
      loadConfig(
        {
          ...base,
          connectionsMax: '100',
          connectionsPerAddressMax: '10',
          connectionUnsentMaxMb: '64',
          unsentMaxMb: '64',
        },
        '/srv',
        {},
      ),
    ).toMatchObject({
      connectionsMax: 100,
      connectionsPerAddressMax: 10,
      connectionUnsentMaxMb: 64,
      unsentMaxMb: 64,
    })
  })

  it('reads a config file under the flags', () => {
    const file = join(dir, 'mq.json')
    writeFileSync(file, JSON.stringify({ ...base, tickMs: 20, electionTicks: 20 }))
    expect(loadConfig({ config: file, tickMs: '10' })).toMatchObject({ tickMs: 10, electionTicks: 20 })
  })

  it('takes an empty "initialMeta" in a config file as not given, as an empty "join"', () => {
    const file = join(dir, 'blank.json')
    writeFileSync(file, JSON.stringify({ ...base, initialMeta: '', join: '' }))
    expect(loadConfig({ config: file, join: '127.0.0.1:7002' })).toMatchObject({
      initialMeta: [],
      join: '127.0.0.1:7002',
    })
  })

  it("resolves a config file's relative paths against its folder, a flag's against the working directory", () => {
    const folder = join(dir, 'etc')
    mkdirSync(folder, { recursive: true })
    const file = join(folder, 'n1.json')
    writeFileSync(
      file,
      JSON.stringify({ ...base, dataDir: 'data', authFile: 'auth.json', peerToken: 'p'.repeat(20) }),
    )
    const c = loadConfig({ config: file }, '/somewhere/else')
    expect(c.dataDir).toBe(join(folder, 'data'))
    expect(c.authFile).toBe(join(folder, 'auth.json'))
    expect(loadConfig({ config: file, dataDir: 'flagged' }, '/somewhere/else').dataDir).toBe(
      '/somewhere/else/flagged',
    )
  })

  it('takes neither --initial-meta nor --join (empty ones too) as a restart from the data dir', () => {
    // The node refuses a data dir that keeps neither (node-facts.test.ts, test/processes.test.ts).
    for (const c of [
      loadConfig({ ...base, initialMeta: undefined }, '/srv', {}),
      loadConfig({ ...base, initialMeta: '', join: '' }, '/srv', {}),
    ])
      expect(c).toMatchObject({ initialMeta: [], join: '' })
  })

  it('serves the console by default; a config file or --no-console turns it off', () => {
    expect(loadConfig(base).console).toBe(true)
    expect(loadConfig({ ...base, console: false }).console).toBe(false)
    const file = join(dir, 'no-console.json')
    writeFileSync(file, JSON.stringify({ ...base, console: false }))
    expect(loadConfig({ config: file }).console).toBe(false)
    expect(() => loadConfig({ ...base, console: 'maybe' })).toThrow(/"console"\) must be true or false/)
  })

  it.each([
    // Named by its flag, as every other setting (it said `nodeId "bad id" must be …`).
    [{ ...base, nodeId: 'bad id' }, /^--node-id \(config file: "nodeId"\) must be .*, got "bad id"$/],
    [{ ...base, nodeId: '_n1' }, /--node-id .* must be .*, starting with a letter or digit, got "_n1"/],
    [{ ...base, listen: 'nowhere' }, /"listen"\): address "nowhere"/],
    [{ ...base, dataDir: undefined }, /--data-dir \(config file: "dataDir"\) is required/],
    [{ ...base, nodeId: 4 }, /--node-id \(config file: "nodeId"\) must be a string, got 4/],
    [{ ...base, listen: 7001 }, /^--listen \(config file: "listen"\) must be a string, got 7001$/],
    [{ ...base, join: '127.0.0.1:7009' }, /either --initial-meta or --join/],
    [{ ...base, initialMeta: 'n2=127.0.0.1:7002' }, /does not name this node/],
    [
      {
        ...base,
        initialMeta: Array.from({ length: 8 }, (_, i) => `n${i + 1}=127.0.0.1:${7001 + i}`).join(','),
      },
      /--initial-meta names 8 nodes; the meta group has at most 7 voters/,
    ],
    [{ ...base, initialMeta: 'n1=127.0.0.1:7005' }, /advertises 127.0.0.1:7001/],
    [{ ...base, tickMs: 0 }, /"tickMs"\) must be an integer from 1/],
    [{ ...base, heartbeatTicks: 10, electionTicks: 10 }, /heartbeatTicks \(10\) must be below/],
    // Config-file-only settings name no flag (mq-server start has no --election-ticks).
    [
      { ...base, electionTicks: 2 },
      /^config file key "electionTicks" \(no flag sets it\) must be an integer/,
    ],
    [{ ...base, replicationFactor: 9 }, /^config file key "replicationFactor" \(no flag sets it\) must be/],
    [{ ...base, dataGroups: -1 }, /^config file key "dataGroups" \(no flag sets it\) must be/],
    [{ ...base, heartbeatTicks: 0 }, /^config file key "heartbeatTicks" \(no flag sets it\) must be/],
    [{ ...base, console: 'maybe' }, /^--no-console \(config file: "console"\) must be true or false/],
    [{ ...base, authFile: 'tokens.json' }, /--auth-file needs --peer-token/],
    [{ ...base, peerToken: 1234567890123456 }, /peerToken .* must be a string/],
    [{ ...base, consolePeek: 'yes' }, /"consolePeek"\) must be true or false/],
    [{ ...base, metricsOpen: 1 }, /"metricsOpen"\) must be true or false/],
    [{ ...base, tlsCert: 'n1.crt' }, /--tls-cert and --tls-key together/],
    [{ ...base, tlsCert: 'n1.crt', tlsKey: 'n1.key' }, /--tls-cert needs --tls-ca/],
    [{ ...base, tlsClientAuth: true }, /need --tls-cert and --tls-key/],
    [{ ...base, tlsClientAuth: 'yes' }, /"tlsClientAuth"\) must be true or false/],
    [
      { ...base, tlsCert: 'n1.crt', tlsKey: 'n1.key', tlsCa: 'ca.crt', tlsPeerIds: true },
      /--tls-peer-ids checks the node ids .* needs --tls-client-auth/,
    ],
    [{ ...base, logLevel: 'loud' }, /"logLevel"\) must be one of fatal, error/],
    [{ ...base, httpListen: 'nowhere' }, /"httpListen"\): address "nowhere"/],
    [{ ...base, replaceDeadAfterMs: '5000' }, /"replaceDeadAfterMs"\) must be an integer from 10000/],
    [
      { ...base, replicaStallMs: 9_999 },
      /--replica-stall-ms \(config file: "replicaStallMs"\) must be an integer from 10000/,
    ],
    [
      { ...base, httpTls: true, httpListen: '127.0.0.1:8001' },
      /--http-tls serves the HTTP port .* give --http-listen and --tls-cert/,
    ],
    [
      { ...base, httpTls: true, tlsCert: 'n1.crt', tlsKey: 'n1.key', tlsCa: 'ca.crt' },
      /--http-tls serves the HTTP port/,
    ],
    [{ ...base, connectionsMax: '8' }, /"connectionsMax"\) must be an integer from 16/],
    [{ ...base, connectionsPerAddressMax: '0' }, /"connectionsPerAddressMax"\) must be an integer from 1/],
    [
      { ...base, httpListen: '127.0.0.1:8001', httpConnectionsPerAddressMax: '65' },
      /"httpConnectionsPerAddressMax"\) must be an integer from 1 to 64/,
    ],
    [
      { ...base, httpConnectionsPerAddressMax: '32' },
      /--http-connections-per-address-max bounds the HTTP port's connections from one address: give --http-listen too/,
    ],
    [{ ...base, connectionUnsentMaxMb: '1' }, /"connectionUnsentMaxMb"\) must be an integer from 32/],
    [{ ...base, logMemoryMb: '8' }, /"logMemoryMb"\) must be an integer from 16 to 1048576, got "8"/],
    [{ ...base, unsentMaxMb: 'lots' }, /"unsentMaxMb"\) must be an integer from 32/],
    // Not numbers as a flag's text: empty, hexadecimal, exponent.
    [{ ...base, dataGroups: '' }, /"dataGroups" \(no flag sets it\) must be an integer from 0/],
    [{ ...base, unsentMaxMb: '0x100' }, /"unsentMaxMb"\) must be an integer from 32/],
    [{ ...base, unsentMaxMb: '1e3' }, /"unsentMaxMb"\) must be an integer from 32/],
    [
      { ...base, connectionUnsentMaxMb: '2048' },
      /--connection-unsent-max-mb \(2048\) must not be above --unsent-max-mb \(1024\)/,
    ],
    [
      { ...base, formatLevel: '0' },
      new RegExp(`"formatLevel"\\) must be an integer from 1 to ${FORMAT_LEVEL}`),
    ],
    [
      { ...base, formatLevel: String(FORMAT_LEVEL + 1) },
      new RegExp(`"formatLevel"\\) must be an integer from 1 to ${FORMAT_LEVEL}`),
    ],
  ])('rejects %j with a clear error', (flags, message) => {
    expect(() => loadConfig(flags, '/srv', {})).toThrow(ConfigError)
    expect(() => loadConfig(flags, '/srv', {})).toThrow(message)
  })

  it('refuses a peer secret that is not a string without quoting it (the refusal goes to stderr)', () => {
    for (const secret of [
      8_675_309_123_456_789,
      ['peer-secret-0123456789'],
      { s: 'peer-secret-0123456789' },
    ]) {
      let message = ''
      try {
        loadConfig({ ...base, peerToken: secret }, '/srv', {})
      } catch (error) {
        message = (error as Error).message
      }
      expect(message).toMatch(/peerToken .* must be a string/)
      expect(message).not.toMatch(/8675309|peer-secret/)
    }
  })

  it('refuses a peer secret grpc-js cannot send (not printable ASCII) without quoting it: the first Raft stream threw and ended the process', () => {
    for (const secret of ['péer-secret-0123456789', 'peer-secret-0123456789\n', 'peer\tsecret-0123456789']) {
      let message = ''
      try {
        loadConfig({ ...base, peerToken: secret }, '/srv', {})
      } catch (error) {
        message = (error as Error).message
      }
      expect(message).toMatch(/peerToken .* printable ASCII/)
      expect(message).not.toMatch(/secret-0123456789/)
      expect(() => loadConfig(base, '/srv', { MQ_PEER_TOKEN: secret })).toThrow(/printable ASCII/)
    }
  })

  it('takes a peer secret shorter than 16 characters with a warning (a rolling upgrade must not stop)', () => {
    const short = loadConfig({ ...base, peerToken: 'x'.repeat(TOKEN_CHARS_MIN - 1) }, '/srv', {})
    expect(short.peerToken).toHaveLength(TOKEN_CHARS_MIN - 1)
    expect(weakSecretWarning(short)).toMatch(/has 15 characters, fewer than 16/)
    expect(weakSecretWarning({ peerToken: 'x'.repeat(TOKEN_CHARS_MIN) })).toBeUndefined()
    expect(weakSecretWarning({ peerToken: '' })).toBeUndefined()
  })

  it('reads the peer secret from MQ_PEER_TOKEN unless a flag or the config file gives one', () => {
    const fromEnv = 'env-secret-0123456789'
    expect(loadConfig(base, '/srv', {}).peerToken).toBe('')
    expect(loadConfig(base, '/srv', { MQ_PEER_TOKEN: '' }).peerToken).toBe('')
    expect(loadConfig(base, '/srv', { MQ_PEER_TOKEN: fromEnv }).peerToken).toBe(fromEnv)
    expect(
      loadConfig({ ...base, peerToken: 'flag-secret-0123456789' }, '/srv', { MQ_PEER_TOKEN: fromEnv })
        .peerToken,
    ).toBe('flag-secret-0123456789')
    const file = join(dir, 'peer.json')
    writeFileSync(file, JSON.stringify({ ...base, peerToken: 'file-secret-0123456789' }))
    expect(loadConfig({ config: file }, '/srv', { MQ_PEER_TOKEN: fromEnv }).peerToken).toBe(
      'file-secret-0123456789',
    )
    // An empty flag does not hide the file's (`--peer-token "$UNSET"`).
    expect(loadConfig({ config: file, peerToken: '' }, '/srv', {}).peerToken).toBe('file-secret-0123456789')
    // An empty one in the file or on the command line is not given (a template's blank).
    writeFileSync(file, JSON.stringify({ ...base, peerToken: '', authFile: 'tokens.json' }))
    expect(loadConfig({ config: file }, '/srv', { MQ_PEER_TOKEN: fromEnv }).peerToken).toBe(fromEnv)
    expect(loadConfig({ ...base, peerToken: '' }, '/srv', { MQ_PEER_TOKEN: fromEnv }).peerToken).toBe(fromEnv)
    // With the secret from the environment, --auth-file has what it needs.
    expect(
      loadConfig({ ...base, authFile: 'tokens.json' }, '/srv', { MQ_PEER_TOKEN: fromEnv }).authFile,
    ).toBe('/srv/tokens.json')
    expect(weakSecretWarning(loadConfig(base, '/srv', { MQ_PEER_TOKEN: 'short' }))).toMatch(/MQ_PEER_TOKEN\)/)
  })

  it('serves /metrics without a token on an auth node only when metricsOpen is set', () => {
    const auth = { ...base, httpListen: '127.0.0.1:9000', authFile: '/etc/mq/auth.json', peerToken: 'p' }
    expect(loadConfig(auth).metricsOpen).toBe(false)
    expect(loadConfig({ ...auth, metricsOpen: true }).metricsOpen).toBe(true)
  })

  it('shows message bodies to the console without auth only when consolePeek is set', () => {
    const http = { ...base, httpListen: '127.0.0.1:9000' }
    expect(loadConfig(http).consolePeek).toBe(false)
    expect(loadConfig({ ...http, consolePeek: true }).consolePeek).toBe(true)
    const file = join(dir, 'peek.json')
    writeFileSync(file, JSON.stringify({ ...http, consolePeek: true }))
    expect(loadConfig({ config: file }).consolePeek).toBe(true)
  })

  it('refuses a flag of the HTTP port that would do nothing, naming what it needs', () => {
    const http = { ...base, httpListen: '127.0.0.1:9000' }
    for (const [raw, problem] of [
      [{ ...base, httpAllowedHosts: 'mq.example.com' }, /--http-allowed-hosts .* give --http-listen/],
      [{ ...base, consolePeek: true }, /--console-peek .* needs the console, on --http-listen/],
      [{ ...http, console: false, consolePeek: true }, /--console-peek .* not --no-console/],
      [{ ...http, metricsOpen: true }, /--metrics-open .* needs --http-listen and --auth-file/],
      [{ ...base, metricsOpen: true, authFile: '/etc/mq/auth.json', peerToken: 'p' }, /--metrics-open/],
    ] as const)
      expect(() => loadConfig(raw), JSON.stringify(raw)).toThrow(problem)
  })

  it('takes --http-allowed-hosts as a list of names, from a flag or a file, and refuses what is no name', () => {
    const http = { ...base, httpListen: '127.0.0.1:9000' }
    expect(loadConfig(http).httpAllowedHosts).toEqual([])
    expect(
      loadConfig({ ...http, httpAllowedHosts: 'mq.example.com, MQ-2.example.com,[::1],fe80::1' })
        .httpAllowedHosts,
    ).toEqual(['mq.example.com', 'mq-2.example.com', '::1', 'fe80::1'])
    expect(loadConfig({ ...http, httpAllowedHosts: '*' }).httpAllowedHosts).toEqual(['*'])
    const file = join(dir, 'hosts.json')
    writeFileSync(file, JSON.stringify({ ...http, httpAllowedHosts: ['console.internal', '10.0.0.7'] }))
    expect(loadConfig({ config: file }).httpAllowedHosts).toEqual(['console.internal', '10.0.0.7'])
    for (const [value, problem] of [
      ['mq.example.com:8080', /"mq.example.com:8080" is no host name/],
      ['http://mq.example.com', /is no host name/],
      ['*,mq.example.com', /stands alone/],
      ['[::g]', /"\[::g\]" is no host name/],
      [7, /httpAllowedHosts must be host names/],
      [['a', 7], /httpAllowedHosts must be host names/],
    ] as const) {
      expect(() => loadConfig({ ...http, httpAllowedHosts: value })).toThrow(problem)
    }
  })

  it('turns operability and security off by default and resolves their paths', () => {
    expect(loadConfig(base, '/srv')).toMatchObject({
      httpListen: '',
      logLevel: 'info',
      logFormat: 'json',
      authFile: '',
      tlsCert: '',
      tlsClientAuth: false,
      tlsPeerIds: false,
    })
    const secure = loadConfig(
      {
        ...base,
        httpListen: '127.0.0.1:9101',
        authFile: 'tokens.json',
        peerToken: 'peer-secret-0123456789',
        tlsCert: 'n1.crt',
        tlsKey: 'n1.key',
        tlsCa: '/etc/mq/ca.crt',
        tlsClientAuth: true,
        tlsPeerIds: true,
      },
      '/srv',
    )
    expect(secure).toMatchObject({
      httpListen: '127.0.0.1:9101',
      authFile: '/srv/tokens.json',
      tlsCert: '/srv/n1.crt',
      tlsCa: '/etc/mq/ca.crt',
      tlsClientAuth: true,
      tlsPeerIds: true,
    })
  })

  it('names a missing, malformed or unknown-keyed config file', () => {
    expect(() => loadConfig({ config: join(dir, 'missing.json') })).toThrow(/cannot read config file/)
    const bad = join(dir, 'bad.json')
    writeFileSync(bad, '{ nope')
    expect(() => loadConfig({ config: bad })).toThrow(/is not valid JSON: .* at line 1, column 3$/)
    const unknown = join(dir, 'unknown.json')
    writeFileSync(unknown, JSON.stringify({ ...base, colour: 'blue' }))
    expect(() => loadConfig({ config: unknown })).toThrow(/unknown setting "colour"/)
  })

  it('refuses a wildcard as an address others dial, and the HTTP listener on the gRPC port', () => {
    const joining = { nodeId: 'n4', dataDir: '/tmp/x', join: '10.0.0.1:7001' }
    for (const wildcard of ['0.0.0.0:7004', '[::]:7004']) {
      // Listening on a wildcard is fine with an address to advertise; alone it is not.
      expect(
        loadConfig({ ...joining, listen: wildcard, advertise: '10.0.0.4:7004' }, '/srv', {}).advertise,
      ).toBe('10.0.0.4:7004')
      expect(() => loadConfig({ ...joining, listen: wildcard }, '/srv', {})).toThrow(
        /is a wildcard: give --advertise HOST:PORT/,
      )
      expect(() =>
        loadConfig({ ...joining, listen: '10.0.0.4:7004', advertise: wildcard }, '/srv', {}),
      ).toThrow(ConfigError)
      expect(() => loadConfig({ ...joining, listen: '10.0.0.4:7004', join: wildcard }, '/srv', {})).toThrow(
        /--join names .* a wildcard/,
      )
    }
    expect(() => loadConfig({ ...base, initialMeta: 'n1=0.0.0.0:7001' }, '/srv', {})).toThrow(
      /--initial-meta names 0.0.0.0:7001, a wildcard/,
    )
    for (const [listen, httpListen] of [
      ['127.0.0.1:7001', '127.0.0.1:7001'],
      ['0.0.0.0:7001', '127.0.0.1:7001'],
      ['127.0.0.1:7001', '[::]:7001'],
    ]) {
      expect(() =>
        loadConfig({ ...base, listen, advertise: '127.0.0.1:7001', httpListen }, '/srv', {}),
      ).toThrow(/--http-listen .* and --listen .* take the same port/)
    }
    // Another port, or the same port on another host, is fine.
    expect(loadConfig({ ...base, httpListen: '127.0.0.1:8001' }, '/srv', {}).httpListen).toBe(
      '127.0.0.1:8001',
    )
    expect(loadConfig({ ...base, httpListen: '127.0.0.2:7001' }, '/srv', {}).httpListen).toBe(
      '127.0.0.2:7001',
    )
  })
})

describe('jsonSyntaxProblem', () => {
  const problem = (text: string) => {
    try {
      JSON.parse(text)
    } catch (error) {
      return jsonSyntaxProblem(error, text)
    }
    throw new Error('parsed')
  }

  it('says where the fault is when the message names no position, quoting nothing', () => {
    // V8 quotes the text for an unexpected token and gives no position.
    expect(problem('{\n  "peerToken": SECRET-123,\n  "nodeId": "n1"\n}')).toBe(
      'Unexpected token at line 2, column 16',
    )
    expect(problem('{"a":}')).toBe('Unexpected token at line 1, column 6')
    expect(problem('{"a": 1}\n\n  ]')).toMatch(/ at line 3, column 3$/)
    expect(problem('{"a":"x","b":tru}')).not.toMatch(/tru/)
  })

  it('takes the position from the message when it names one', () => {
    expect(problem('{"a":1,}')).toBe('Expected double-quoted property name at line 1, column 8')
    expect(problem('{\n"a": 1\n"b": 2}')).toBe("Expected ',' or '}' after property value at line 3, column 1")
    expect(problem('{"a": 1}\n x')).toBe('Unexpected non-whitespace character after JSON at line 2, column 2')
  })

  it('says only that the text ends too early when it does', () => {
    expect(problem('')).toBe('Unexpected end of JSON input (where is not shown: the text may hold a secret)')
    expect(problem('{"tokens": [')).toMatch(/^Unexpected end of JSON input \(where is not shown/)
  })
})

describe('loadConfig: addresses that name one host or node twice', () => {
  it('refuses --http-listen on the gRPC port when the two name one host differently (localhost, 127.1)', () => {
    // `--listen localhost:7001 --http-listen 127.0.0.1:7001` was accepted; the HTTP server bound
    // first and the node exited 1 with "cannot listen on localhost:7001: … EADDRINUSE", as if
    // another process held its port.
    for (const [listen, httpListen] of [
      ['localhost:7001', '127.0.0.1:7001'],
      ['127.0.0.1:7001', 'localhost:7001'],
      ['127.0.0.1:7001', '127.1:7001'],
      ['127.0.0.1:7001', '0x7f.0.0.1:7001'],
    ]) {
      expect(() =>
        loadConfig({ ...base, listen, advertise: '127.0.0.1:7001', httpListen }, '/srv', {}),
      ).toThrow(/--http-listen .* and --listen .* take the same port/)
    }
    // Other hosts on the same port stay fine.
    expect(
      loadConfig({ ...base, listen: '127.0.0.1:7001', httpListen: '[::1]:7001' }, '/srv', {}).httpListen,
    ).toBe('[::1]:7001')
  })

  it('refuses a --join that names the node itself', () => {
    // A new node joining "through" its own address asked itself for a meta leader for ever
    // ("no meta leader is known yet"), and its data dir kept that address as its cluster entry.
    const joining = { nodeId: 'n4', listen: '127.0.0.1:7004', dataDir: 'data/n4' }
    expect(() => loadConfig({ ...joining, join: '127.0.0.1:7004' }, '/srv', {})).toThrow(
      /--join names this node's own address/,
    )
    expect(() =>
      loadConfig(
        { ...joining, listen: '0.0.0.0:7004', advertise: 'mq-4.example:7004', join: 'MQ-4.example:7004' },
        '/srv',
        {},
      ),
    ).toThrow(ConfigError)
    expect(loadConfig({ ...joining, join: '127.0.0.1:7001' }, '/srv', {}).join).toBe('127.0.0.1:7001')
    // An --advertise naming another node (its port not the one listened on) is that node's
    // address: the join goes there, and the node warns of its --advertise once it serves.
    const wrong = { ...joining, advertise: '127.0.0.1:7001', join: '127.0.0.1:7001' }
    expect(loadConfig(wrong, '/srv', {}).join).toBe('127.0.0.1:7001')
  })

  it('refuses a --join that names the node itself in another spelling (localhost, 127.1), or by loopback on a wildcard --listen', () => {
    // `--listen 127.0.0.1:7004 --join localhost:7004` was taken: the node asked itself for a
    // meta leader for ever, warning only that none answered, and kept that as its cluster entry.
    const joining = { nodeId: 'n4', listen: '127.0.0.1:7004', dataDir: 'data/n4' }
    for (const join of ['localhost:7004', '127.1:7004', '0x7f.0.0.1:7004'])
      expect(() => loadConfig({ ...joining, join }, '/srv', {})).toThrow(
        /--join names this node's own address/,
      )
    expect(() =>
      loadConfig({ ...joining, listen: 'localhost:7004', join: '127.0.0.1:7004' }, '/srv', {}),
    ).toThrow(/--join names this node's own address/)
    // A loopback address reaches a wildcard --listen.
    const wildcard = { ...joining, listen: '0.0.0.0:7004', advertise: 'mq-4.example:7004' }
    for (const join of ['127.0.0.1:7004', 'localhost:7004', '[::1]:7004'])
      expect(() => loadConfig({ ...wildcard, join }, '/srv', {})).toThrow(
        /--join names this node's own address/,
      )
    // Another port of the same host is another node.
    expect(loadConfig({ ...joining, join: 'localhost:7001' }, '/srv', {}).join).toBe('localhost:7001')
    expect(loadConfig({ ...wildcard, join: '127.0.0.1:7001' }, '/srv', {}).join).toBe('127.0.0.1:7001')
  })
})

describe('loadConfig: a config file saved with a byte order mark', () => {
  it('reads it (Notepad and PowerShell save UTF-8 with one), not "Unexpected token at line 1, column 1"', () => {
    const file = join(dir, 'bom.json')
    writeFileSync(file, `\uFEFF${JSON.stringify({ ...base, tickMs: 20 })}`)
    expect(loadConfig({ config: file }, '/srv', {}).tickMs).toBe(20)
  })
})
