import { InternalError, PermissionDeniedError, QueueNotFoundError } from '@mq/router-client'
import { beforeEach, describe, expect, it } from 'vitest'
import { type CliIO, runCli } from '../src/index'
import { FakeCluster } from './fake-cluster'
import { OTHER_KEY_PEM, TEST_CERT_PEM, TEST_KEY_PEM } from './test-certificate'

// The commands run in process against FakeCluster through the injected IO: what they call,
// what they print and how they exit.

let cluster: FakeCluster
beforeEach(() => {
  cluster = new FakeCluster()
})

async function mq(argv: string[], options: Parameters<FakeCluster['io']>[0] = {}) {
  const h = cluster.io(options)
  const code = await runCli(argv, h.io, '1.2.3')
  return { code, stdout: h.stdout(), stderr: h.stderr() }
}

const jsonLines = (text: string) =>
  text
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => JSON.parse(l) as Record<string, unknown>)

function expectOneLineError(stderr: string, pattern: RegExp): void {
  expect(stderr.endsWith('\n')).toBe(true)
  expect(stderr.trimEnd().split('\n')).toHaveLength(1)
  expect(stderr).toMatch(/^mq: /)
  expect(stderr).toMatch(pattern)
}

describe('global flags', () => {
  it('takes the servers and the deadline from the flags', async () => {
    const r = await mq(['--servers', 'a:1,b:2', '--timeout', '3s', 'queue', 'list'])
    expect(r.code).toBe(0)
    expect(cluster.connectOptions).toMatchObject({
      servers: ['a:1', 'b:2'],
      deadlineMs: 3_000,
      attemptMs: 3_000,
      // An explicit --timeout waits for a cluster not listening yet (a script waiting for it).
      refusedGiveUpMs: 0,
    })
  })

  it('takes the servers from MQ_SERVERS, and flags after the command', async () => {
    await mq(['queue', 'list', '--timeout', '20s'], { env: { MQ_SERVERS: 'x:7001' } })
    expect(cluster.connectOptions).toMatchObject({
      servers: ['x:7001'],
      deadlineMs: 20_000,
      attemptMs: 5_000,
    })
  })

  it('sends a token and TLS files from the flags, else from MQ_TOKEN and MQ_TLS_*', async () => {
    const pem = (text: string) => new TextEncoder().encode(text)
    const files = { '/ca.pem': pem(TEST_CERT_PEM), '/c.pem': pem(TEST_CERT_PEM), '/k.pem': pem(TEST_KEY_PEM) }
    await mq(['--token', 't0ken', '--tls-ca', '/ca.pem', 'queue', 'list'], { files })
    expect(cluster.connectOptions).toMatchObject({ token: 't0ken', tls: { ca: Buffer.from(TEST_CERT_PEM) } })
    await mq(['queue', 'list'], {
      files,
      env: { MQ_TOKEN: 'env-token', MQ_TLS_CA: '/ca.pem', MQ_TLS_CERT: '/c.pem', MQ_TLS_KEY: '/k.pem' },
    })
    expect(cluster.connectOptions).toMatchObject({
      token: 'env-token',
      tls: {
        ca: Buffer.from(TEST_CERT_PEM),
        cert: Buffer.from(TEST_CERT_PEM),
        key: Buffer.from(TEST_KEY_PEM),
      },
    })
    await mq(['queue', 'list'])
    expect(cluster.connectOptions).not.toHaveProperty('token')
    expect(cluster.connectOptions).not.toHaveProperty('tls')
  })

  it('refuses a token that cannot travel in a header as a usage error, never printing it', async () => {
    const flag = await mq(['--token', 'mq_secrété', 'queue', 'list'])
    expect(flag.code).toBe(1)
    expectOneLineError(flag.stderr, /^mq: --token: token must be non-empty printable ASCII/)
    expect(flag.stderr).not.toContain('secr')
    const env = await mq(['queue', 'list'], { env: { MQ_TOKEN: 'mq_a\tb' } })
    expect(env.code).toBe(1)
    expectOneLineError(env.stderr, /^mq: MQ_TOKEN: token must be/)
  })

  it('refuses a client certificate without its key, and a TLS file it cannot read', async () => {
    const r = await mq(['--tls-cert', '/c.pem', 'queue', 'list'])
    expect(r.code).toBe(1)
    expectOneLineError(r.stderr, /--tls-cert and --tls-key together/)
    const missing = await mq(['--tls-ca', '/nope.pem', 'queue', 'list'])
    expect(missing.code).toBe(1)
    expectOneLineError(missing.stderr, /--tls-ca \/nope.pem/)
  })

  // Refused at connect by grpc-js until 2026-12-07, naming neither flag ("error:0480006C:PEM
  // routines::no start line"), exit 4.
  it('refuses a CA or client certificate or key that is none, or a key of another certificate, naming the flag', async () => {
    const pem = (text: string) => new TextEncoder().encode(text)
    const files = {
      '/c.pem': pem(TEST_CERT_PEM),
      '/k.pem': pem(TEST_KEY_PEM),
      '/other-k.pem': pem(OTHER_KEY_PEM),
      '/junk': pem('not PEM'),
    }
    const cases: [string, string, RegExp][] = [
      ['/k.pem', '/c.pem', /^mq: --tls-cert \/k.pem holds no PEM certificate \(/],
      ['/junk', '/k.pem', /^mq: --tls-cert \/junk holds no PEM certificate/],
      ['/c.pem', '/junk', /^mq: --tls-key \/junk holds no PEM private key/],
      [
        '/c.pem',
        '/other-k.pem',
        /^mq: --tls-key \/other-k.pem is not the key of --tls-cert \/c.pem \(.*mismatch/,
      ],
    ]
    for (const [cert, key, said] of cases) {
      const r = await mq(['--tls-cert', cert, '--tls-key', key, 'queue', 'list'], { files })
      expect([cert, key, r.code]).toEqual([cert, key, 1])
      expectOneLineError(r.stderr, said)
    }
    const env = await mq(['queue', 'list'], { files, env: { MQ_TLS_CERT: '/c.pem', MQ_TLS_KEY: '/junk' } })
    expect(env.code).toBe(1)
    expectOneLineError(env.stderr, /--tls-key \/junk holds no PEM private key/)
    // A CA that is no certificate was left out without a word: every handshake then failed.
    for (const ca of ['/junk', '/k.pem']) {
      const r = await mq(['--tls-ca', ca, 'queue', 'list'], { files })
      expect([ca, r.code]).toEqual([ca, 1])
      expectOneLineError(r.stderr, new RegExp(`^mq: --tls-ca ${ca} holds no PEM certificate \\(`))
    }
    expect(cluster.calls).toEqual([])
  })

  it('defaults to 127.0.0.1:7001 and 10 s', async () => {
    await mq(['queue', 'list'])
    expect(cluster.connectOptions).toMatchObject({
      servers: ['127.0.0.1:7001'],
      deadlineMs: 10_000,
      refusedGiveUpMs: 2_000,
    })
  })

  it.each([
    [['--servers', 'nohost', 'queue', 'list'], /"nohost" is not a server address/],
    [['--timeout', 'soon', 'queue', 'list'], /--timeout.*"soon" is not a duration/],
    [['--timeout', '0', 'queue', 'list'], /--timeout must be longer than 0/],
    [['queue', 'frob'], /unknown command 'frob'/],
    [['queue', 'create'], /missing required argument 'name'.*mq queue create --help/],
    [['queue', 'list', '--bogus'], /unknown option '--bogus'/],
    // 0 would be CreateQueue's "default" (30 s), taken without a word.
    [['queue', 'create', 'q', '--visibility', '0'], /--visibility.*0 is too short: give at least 100ms/],
    // The meta service's bounds, named by the flag (the server named its wire field in ms).
    [['queue', 'create', 'q', '--visibility', '12h1ms'], /--visibility.*longer than the maximum of 12h/],
    [['queue', 'update', 'q', '--message-ttl', '366d'], /--message-ttl.*longer than the maximum of 8760h/],
    [['queue', 'update', 'q', '--dedup-window', '2d'], /--dedup-window.*longer than the maximum of 24h/],
    [
      ['queue', 'create', 'q', '--retry-backoff-max', '25h'],
      /--retry-backoff-max.*longer than the maximum of 24h/,
    ],
    [
      ['queue', 'create', 'q', '--max-deliveries', '1001'],
      /1001 is out of range: give an integer from 1 to 1000/,
    ],
    // The help says "at most 4 MiB": past it the server refused naming its wire field
    // (`messageBytesMax must be an integer from 1 to 4194304, got 5000000`), not the flag.
    [
      ['queue', 'create', 'q', '--max-message-bytes', '5000000'],
      /--max-message-bytes.*5000000 is out of range: give an integer from 1 to 4194304/,
    ],
    // Refused by the server naming its wire fields (`retryBackoffMaxMs (1000) is below retryBackoffMinMs (10000)`).
    [
      ['queue', 'create', 'q', '--retry-backoff', '10s', '--retry-backoff-max', '1s'],
      /--retry-backoff-max 1s is below --retry-backoff 10s/,
    ],
    [
      ['queue', 'update', 'q', '--retry-backoff', '10s', '--retry-backoff-max', '1s'],
      /--retry-backoff-max 1s is below --retry-backoff 10s/,
    ],
    [
      ['queue', 'update', 'q', '--max-length', '2000000000'],
      /--max-length.*2000000000 is out of range: give an integer from 1 to 1000000000/,
    ],
  ])('exits 1 on a usage error: %j', async (argv, why) => {
    const r = await mq(argv)
    expect(r.code).toBe(1)
    expectOneLineError(r.stderr, why)
    expect(cluster.calls).not.toContain('connect')
  })

  it('exits 1 when MQ_SERVERS is malformed, naming it', async () => {
    const r = await mq(['queue', 'list'], { env: { MQ_SERVERS: 'a:1,:' } })
    expect(r.code).toBe(1)
    expectOneLineError(r.stderr, /MQ_SERVERS: ":" is not a server address/)
  })

  it('exits 3 when the cluster is unavailable, naming the servers and the deadline', async () => {
    cluster.unavailable = true
    const r = await mq(['-s', '127.0.0.1:9', '-t', '500ms', 'cluster', 'status'])
    expect(r.code).toBe(3)
    expectOneLineError(
      r.stderr,
      /the cluster at 127\.0\.0\.1:9 did not answer within 500ms: no connection established/,
    )
  })

  it('prints its version and help with exit 0', async () => {
    expect(await mq(['--version'])).toMatchObject({ code: 0, stdout: '1.2.3\n' })
    const help = await mq(['--help'])
    expect(help.code).toBe(0)
    expect(help.stdout).toMatch(/Exit codes: 0 ok, 1 usage, 2 not found, 3 cluster unavailable, 4 other/)
    expect(help.stdout).toMatch(/MQ_SERVERS/)
  })

  it('explains each command with examples', async () => {
    for (const argv of [
      ['cluster', '--help'],
      ['node', '--help'],
      ['group', '--help'],
      ['queue', '--help'],
      ['queue', 'create', '--help'],
      ['queue', 'update', '--help'],
      ['queue', 'dlq', '--help'],
      ['queue', 'move', '--help'],
      ['produce', '--help'],
      ['consume', '--help'],
    ]) {
      const r = await mq(argv)
      expect(r.code, argv.join(' ')).toBe(0)
      expect(r.stdout, argv.join(' ')).toMatch(/Examples:\n {2}\$ mq /)
    }
  })
})

describe('cluster, node and group', () => {
  it('shows the cluster status as fields and tables', async () => {
    const r = await mq(['cluster', 'status'])
    expect(r.code).toBe(0)
    expect(r.stdout).toMatch(/meta leader: +n1/)
    expect(r.stdout).toMatch(/meta group: +n1, n2, n3 \+ learner n4; replacing n3 by n4 \(dead\)/)
    expect(r.stdout).toMatch(/format level: +2/)
    expect(r.stdout).toMatch(/nodes: +1 alive of 2/)
    expect(r.stdout).toMatch(/groups: +1 \(1 meta, 0 data\)/)
    expect(r.stdout).toMatch(/n1 +10\.0\.0\.1:7001 +yes +1s ago +0,1/)
    expect(r.stdout).toMatch(/NODE +ADDRESS +ALIVE +HEARTBEAT +GROUPS/)
    expect(r.stdout).toMatch(/n2 +10\.0\.0\.2:7001 +no, draining +never +0/)
    expect(r.stdout).toMatch(/MOVE +PARTITION +FROM +TO +PHASE +STARTED/)
    expect(r.stdout).toMatch(/3 +jobs\/1 +1 +2 +copy +2s ago/)
    expect(r.stdout).toMatch(/4 +jobs\/2 +1 +3 +abort \(its target lost its majority\) +2s ago/)
  })

  it('counts the meta group by its voters when the groups do not list it (as servers answer)', async () => {
    const saved = cluster.status
    cluster.status = { ...saved, groups: saved.groups.filter((g) => g.groupId !== 0) }
    try {
      expect((await mq(['cluster', 'status'])).stdout).toMatch(/groups: +1 \(1 meta, 0 data\)/)
    } finally {
      cluster.status = saved
    }
  })

  it('prints the status as one JSON object with --json', async () => {
    const r = await mq(['cluster', 'status', '--json'])
    const lines = jsonLines(r.stdout)
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatchObject({ metaLeaderId: 'n1', routeEpoch: 7 })
  })

  it('lists nodes and groups', async () => {
    const nodes = await mq(['node', 'list'])
    expect(nodes.stdout.split('\n')[0]).toBe('NODE  ADDRESS        ALIVE         HEARTBEAT  GROUPS')
    const groups = await mq(['group', 'list', '--json'])
    expect(jsonLines(groups.stdout)).toEqual([
      expect.objectContaining({ groupId: 0, leaderId: 'n1', term: 3 }),
    ])
    const table = await mq(['group', 'list'])
    expect(table.stdout).toMatch(/0 +n1 +active +- +3 +120 +119 +0 +n1,n2\(learner\)/)
  })

  it('lists the meta group (0) first when the status lists only the data groups (as servers answer)', async () => {
    const data = {
      ...cluster.status.groups[0],
      groupId: 1,
      term: 4,
      replicas: [],
    } as (typeof cluster.status.groups)[number]
    cluster.status = { ...cluster.status, groups: [data] }
    const table = await mq(['group', 'list'])
    expect(table.stdout.split('\n').slice(0, 3)).toEqual([
      expect.stringMatching(/^GROUP +LEADER +STATE +CHANGE +TERM +COMMIT +APPLIED +PARTITIONS +REPLICAS$/),
      expect.stringMatching(
        /^ +0 +n1 +changing +n3 → n4 \(dead, 9s ago\) +- +- +- +0 +n1,n2,n3,n4\(learner\)$/,
      ),
      expect.stringMatching(/^ +1 +n1 +active +- +4 +120 +119 +0 +-$/),
    ])
    const json = jsonLines((await mq(['group', 'list', '--json'])).stdout)
    expect(json.map((g) => g.groupId)).toEqual([0, 1])
    expect(json[0]).toMatchObject({
      groupId: 0,
      leaderId: 'n1',
      replicas: [{ nodeId: 'n1', address: '10.0.0.1:7001' }, {}, {}, { nodeId: 'n4', learner: true }],
    })
    expect((await mq(['cluster', 'status'])).stdout).toMatch(
      /\n +0 +n1 +changing +n3 → n4 \(dead, 9s ago\) +- +- +- +0 +n1,n2,n3,n4\(learner\)\n/,
    )
  })

  // A change given up (its new node lost, none to take it) adds and removes nobody until it
  // finishes.
  it.each([
    [
      { add: 'n5', remove: 'n2', reason: 'drain' },
      /^ +1 +n1 +changing +n2 → n5 \(drain, 6s ago\) +4 +120 +119 +0 +-$/,
    ],
    [
      { add: '', remove: '', reason: 'balance' },
      /^ +1 +n1 +changing +given up \(balance, 6s ago\) +4 +120 +119 +0 +-$/,
    ],
  ])('shows the replica change a group is under, and since when: %o', async (change, row) => {
    const data = {
      ...cluster.status.groups[0],
      groupId: 1,
      term: 4,
      state: 'changing',
      change: { ...change, startedAtMs: 4_000 },
      replicas: [],
    } as (typeof cluster.status.groups)[number]
    cluster.status = { ...cluster.status, groups: [data] }
    const table = await mq(['group', 'list'])
    expect(table.stdout.split('\n')[2]).toMatch(row)
  })

  it("shows the global flags in a command's --help (its examples use --json)", async () => {
    const r = await mq(['group', 'list', '--help'])
    expect(r.code).toBe(0)
    expect(r.stdout).toMatch(/Global Options:[\s\S]*--json/)
  })

  it('drains a node and reports what is left', async () => {
    // A spare live node: the replicas have somewhere to go.
    const spare = {
      ...(cluster.status.nodes[0] as (typeof cluster.status.nodes)[number]),
      nodeId: 'n5',
      groupIds: [],
    }
    cluster.status = { ...cluster.status, nodes: [...cluster.status.nodes, spare] }
    expect((await mq(['node', 'drain', 'n2'])).stdout).toBe('draining node n2: 3 replicas still to move\n')
    expect((await mq(['node', 'drain', 'n1'])).stdout).toBe('node n1 is drained: it holds no replica\n')
    expect(jsonLines((await mq(['node', 'drain', 'n2', '--json'])).stdout)).toEqual([
      { nodeId: 'n2', replicasRemaining: 3 },
    ])
  })

  it('undoes a drain, saying whether the node was draining; an unknown node exits 2', async () => {
    expect((await mq(['node', 'undrain', 'n2'])).stdout).toBe('node n2 is no longer draining\n')
    expect((await mq(['node', 'undrain', 'n1'])).stdout).toBe('node n1 was not draining\n')
    expect(jsonLines((await mq(['node', 'undrain', 'n2', '--json'])).stdout)).toEqual([
      { nodeId: 'n2', wasDraining: true },
    ])
    const unknown = await mq(['node', 'undrain', 'n9'])
    expect(unknown.code).toBe(2)
    expect(unknown.stderr).toBe('mq: node n9 is not registered\n')
  })

  it('says why a drain may not progress when no live node outside its groups can take the replicas', async () => {
    // n1 is the only other live node, and it holds group 0 already.
    const r = await mq(['node', 'drain', 'n2'])
    expect(r.code).toBe(0)
    expect(r.stdout).toBe(
      "draining node n2: 3 replicas still to move\nit may not progress: no live node outside group 0 can take n2's replica there; add a node (mq-server with --join), or make the meta group smaller (mq cluster meta-voters N)\n",
    )
    expect(jsonLines((await mq(['node', 'drain', 'n2', '--json'])).stdout)).toEqual([
      { nodeId: 'n2', replicasRemaining: 3, groupsWithoutTarget: [0] },
    ])
    // Drained: no status asked, no hint.
    const calls = cluster.calls.length
    expect((await mq(['node', 'drain', 'n1'])).stdout).toBe('node n1 is drained: it holds no replica\n')
    expect(cluster.calls.slice(calls)).not.toContain('clusterStatus')
  })

  it('offers a new node or fewer replicas when a data group holds up a drain', async () => {
    const replica = (nodeId: string) => ({ nodeId, address: '', learner: false, appliedIndex: 0 })
    cluster.status = {
      ...cluster.status,
      metaVoters: ['n1', 'n3'],
      metaLearners: [],
      metaChange: undefined,
      groups: [
        {
          groupId: 1,
          leaderId: 'n1',
          replicas: [replica('n1'), replica('n2')],
          term: 3,
          commitIndex: 1,
          appliedIndex: 1,
          partitions: 1,
          state: 'active',
        },
      ],
    }
    expect((await mq(['node', 'drain', 'n2'])).stdout).toBe(
      "draining node n2: 3 replicas still to move\nit may not progress: no live node outside group 1 can take n2's replica there; add a node (mq-server with --join), or keep fewer replicas per data group (mq cluster replication N)\n",
    )
  })

  it('removes a stopped node, and says why not when the cluster refuses', async () => {
    expect((await mq(['node', 'remove', 'n2'])).stdout).toBe('removed node n2\n')
    expect(cluster.calls).toContain('removeNode:n2')
    expect(jsonLines((await mq(['node', 'remove', 'n2', '--json'])).stdout)).toEqual([
      { nodeId: 'n2', removed: true },
    ])
    const refused = await mq(['node', 'remove', 'n1'])
    expect(refused.code).toBe(1)
    expect(refused.stderr).toMatch(/node n1 is alive \(heard from 0\.2 s ago\): stop it/)
  })

  it('sets the meta group size and shows it until reached, with a growing or shrinking change', async () => {
    const r = await mq(['cluster', 'meta-voters', '5'])
    expect(r.stdout).toBe('the meta group goes from 3 voters (n1, n2, n3) to 5\n')
    expect(cluster.calls).toContain('setMetaVoters:5')
    cluster.status = {
      ...cluster.status,
      metaChange: { add: 'n4', remove: '', reason: 'grow', startedAtMs: 1 },
    }
    expect((await mq(['cluster', 'status'])).stdout).toMatch(
      /meta group: +n1, n2, n3 \(5 wanted\) \+ learner n4; adding n4 \(grow\)/,
    )
    cluster.status = {
      ...cluster.status,
      metaChange: { add: '', remove: 'n3', reason: 'shrink', startedAtMs: 1 },
    }
    expect((await mq(['cluster', 'status'])).stdout).toMatch(/; removing n3 \(shrink\)/)
    cluster.status = {
      ...cluster.status,
      metaChange: { add: '', remove: '', reason: 'dead', startedAtMs: 1 },
    }
    expect((await mq(['cluster', 'status'])).stdout).toMatch(
      /; giving up a change \(dead\): its new voter is gone/,
    )
    // Listed from the meta status (servers list only the data groups).
    cluster.status = { ...cluster.status, groups: [] }
    expect((await mq(['group', 'list'])).stdout).toMatch(/\n +0 +n1 +changing +given up \(dead, /)
    expect(jsonLines((await mq(['cluster', 'meta-voters', '3', '--json'])).stdout)).toEqual([
      { voters: ['n1', 'n2', 'n3'], votersWanted: 3 },
    ])
    const bad = await mq(['cluster', 'meta-voters', '9'])
    expect(bad.code).not.toBe(0)
    expect(bad.stderr).toMatch(/1.*7/)
  })

  it('sets the replication factor, and shows it', async () => {
    expect((await mq(['cluster', 'status'])).stdout).toMatch(/replication: +3 replicas per data group/)
    expect((await mq(['cluster', 'replication', '5'])).stdout).toBe(
      'replication factor 5 (was 3): data groups grow or shrink to 5 replicas, one at a time, as live nodes allow\n',
    )
    expect(cluster.calls).toContain('setReplicationFactor:5')
    expect((await mq(['cluster', 'status'])).stdout).toMatch(/replication: +5 replicas per data group/)
    expect(jsonLines((await mq(['cluster', 'replication', '1', '--json'])).stdout)).toEqual([
      { previous: 5, factor: 1 },
    ])
    expect((await mq(['cluster', 'status'])).stdout).toMatch(/replication: +1 replica per data group/)
    cluster.status = { ...cluster.status, replicationFactor: 0 }
    expect((await mq(['cluster', 'status'])).stdout).toMatch(
      /replication: +each meta leader's own "replicationFactor" \(config file\)/,
    )
    const bad = await mq(['cluster', 'replication', '8'])
    expect(bad.code).not.toBe(0)
    expect(bad.stderr).toMatch(/1.*7/)
    expect(cluster.calls).not.toContain('setReplicationFactor:8')
  })

  it('scales the data groups and transfers leadership', async () => {
    const scale = await mq(['group', 'scale', '6'])
    expect(scale.stdout).toBe('scaling to 6 data groups: target 6 groups, 0/4 moves done, moving\n')
    const transfer = await mq(['group', 'transfer-leader', '0', 'n2', '--json'])
    expect(jsonLines(transfer.stdout)).toEqual([{ groupId: 0, toNodeId: 'n2' }])
    expect(cluster.calls).toContain('scaleDataGroups:6')
    expect(cluster.calls).toContain('transferLeader:0:n2')
  })

  it('exits 2 (not found) for a node or a group that does not exist, as for a queue', async () => {
    const drain = await mq(['node', 'drain', 'nosuch'])
    expect(drain.code).toBe(2)
    expectOneLineError(drain.stderr, /node nosuch is not registered/)
    const transfer = await mq(['group', 'transfer-leader', '99', 'n1'])
    expect(transfer.code).toBe(2)
    expectOneLineError(transfer.stderr, /data group 99 does not exist/)
    expect((await mq(['queue', 'describe', 'nosuch'])).code).toBe(2)
  })

  it('rejects a group count that is not a positive integer', async () => {
    const r = await mq(['group', 'scale', '0'])
    expect(r.code).toBe(1)
    expectOneLineError(r.stderr, /give an integer from 1 to 10000/)
  })
})

describe('queue', () => {
  it('creates a queue with the settings given, in the SDK units', async () => {
    const r = await mq([
      'queue',
      'create',
      'jobs',
      '--partitions',
      '4',
      '--visibility',
      '45s',
      '--max-deliveries',
      '7',
      '--max-length',
      '1000',
      '--dedup-window',
      '2m',
      '--message-ttl',
      '1h',
      '--strict-priority',
    ])
    expect(r).toMatchObject({ code: 0, stdout: 'created queue jobs (4 partitions)\n' })
    expect(cluster.calls).toContain(
      `createQueue:jobs:${JSON.stringify({ visibilityTimeoutMs: 45_000, maxDeliveries: 7, queueLengthMax: 1000, dedupWindowMs: 120_000, messageTtlMs: 3_600_000, strictPriority: true, partitions: 4 })}`,
    )
  })

  it('exits 4 when the queue exists', async () => {
    cluster.addQueue('jobs')
    const r = await mq(['queue', 'create', 'jobs'])
    expect(r.code).toBe(4)
    expectOneLineError(r.stderr, /queue jobs exists/)
  })

  it('lists queues as a table or JSON lines', async () => {
    cluster.addQueue('jobs', 4)
    cluster.addQueue('mail', 1, {
      strictPriority: true,
      dedupWindowMs: 90_000,
      paused: true,
      orderedKeys: true,
    })
    const r = await mq(['queue', 'list'])
    expect(r.stdout.split('\n')).toEqual([
      'NAME  PARTITIONS  DELIVERY  VISIBILITY  MAX-DELIVERIES  MAX-LENGTH  DEDUP  STRICT  ORDERED  ENGINE',
      'jobs           4  running   30s                      5     1000000  off    no      no       leveldb',
      'mail           1  paused    30s                      5     1000000  1m30s  yes     keys     leveldb',
      '',
    ])
    const json = jsonLines((await mq(['queue', 'list', '--json', '--prefix', 'ma'])).stdout)
    expect(json.map((q) => q.queue)).toEqual(['mail'])
  })

  it('describes a queue with its partitions and depths by weight', async () => {
    cluster.addQueue('jobs', 2)
    cluster.put('jobs', 0, { body: 'a', weight: 5 })
    cluster.put('jobs', 0, { body: 'b', weight: 5 })
    const r = await mq(['queue', 'describe', 'jobs'])
    expect(r.code).toBe(0)
    expect(r.stdout).toMatch(/visibility: +30s/)
    expect(r.stdout).toMatch(/message TTL: +none \(until consumed\)/)
    expect(r.stdout).toMatch(/PARTITION +GROUP +LEADER +REPLICAS +READY +DELAYED +LEASED +DEAD/)
    expect(r.stdout).toMatch(/\n +0 +1 +n1 +n1 +2 +0 +0 +0\n/)
    expect(r.stdout).toMatch(/\n +0 +5 +2 +0 +0 +0 +1s500ms +50\.0% +25\.0%\n/)
    const json = jsonLines((await mq(['queue', 'describe', 'jobs', '--json'])).stdout)
    expect(json).toHaveLength(1)
    expect(json[0]).toMatchObject({ queue: 'jobs', stats: [{ partition: 0 }, { partition: 1 }] })
    const placement = await mq(['queue', 'describe', 'jobs', '--no-stats'])
    expect(placement.stdout).toMatch(/\nPARTITION +GROUP +LEADER +REPLICAS\n/)
    expect(cluster.calls.filter((c) => c.startsWith('queueStats'))).toHaveLength(2)
  })

  it('describes the settings when the token may not read the stats, saying so', async () => {
    cluster.addQueue('other', 2)
    cluster.statsRefused.set(
      'other',
      new PermissionDeniedError('token app may not read queue "other" (mq.v1.Queue/Stats)'),
    )
    const r = await mq(['queue', 'describe', 'other'])
    expect(r.code).toBe(0)
    expect(r.stdout).toMatch(/visibility: +30s/)
    expect(r.stdout).toMatch(/\nPARTITION +GROUP +LEADER +REPLICAS\n/)
    expectOneLineError(
      r.stderr,
      /depths not shown: this token may not read the stats of other \(.*Queue\/Stats\)/,
    )
    const json = jsonLines((await mq(['queue', 'describe', 'other', '--json'])).stdout)
    expect(json).toHaveLength(1)
    expect(json[0]).toMatchObject({ queue: 'other' })
    expect(json[0]).not.toHaveProperty('stats')
    // Other failures of the stats still fail the command.
    cluster.statsRefused.set('other', new InternalError('disk on fire'))
    expect((await mq(['queue', 'describe', 'other'])).code).toBe(4)
  })

  it('exits 2 for a queue that does not exist', async () => {
    for (const argv of [
      ['queue', 'describe', 'nope'],
      ['queue', 'delete', 'nope'],
      ['queue', 'purge', 'nope'],
      ['queue', 'dlq', 'nope'],
      ['produce', 'nope', 'x'],
      ['consume', 'nope'],
    ]) {
      const r = await mq(argv)
      expect(r.code, argv.join(' ')).toBe(2)
      expectOneLineError(r.stderr, /queue nope does not exist/)
    }
  })

  it('updates only the settings given, including turning strict priority off', async () => {
    cluster.addQueue('jobs', 1, { strictPriority: true })
    const r = await mq(['queue', 'update', 'jobs', '--visibility', '2m', '--no-strict-priority'])
    expect(r).toMatchObject({ code: 0, stdout: 'updated queue jobs (1 partition)\n' })
    expect(cluster.calls).toContain(
      `updateQueue:jobs:${JSON.stringify({ visibilityTimeoutMs: 120_000, strictPriority: false })}`,
    )
    expect(cluster.queues.get('jobs')?.config.strictPriority).toBe(false)
  })

  it('refuses --strict-priority with --no-strict-priority, naming both', async () => {
    cluster.addQueue('jobs')
    for (const argv of [
      ['queue', 'update', 'jobs', '--strict-priority', '--no-strict-priority'],
      ['queue', 'update', 'jobs', '--no-strict-priority', '--visibility', '1m', '--strict-priority'],
    ]) {
      const r = await mq(argv)
      expect(r.code, argv.join(' ')).toBe(1)
      expectOneLineError(r.stderr, /give --strict-priority or --no-strict-priority, not both/)
    }
    expect(cluster.calls.filter((c) => c.startsWith('updateQueue'))).toEqual([])
    expect((await mq(['queue', 'update', 'jobs', '--strict-priority'])).code).toBe(0)
  })

  it('pauses and resumes a queue, and creates one paused', async () => {
    cluster.addQueue('jobs')
    const paused = await mq(['queue', 'pause', 'jobs'])
    expect(paused.code).toBe(0)
    expect(paused.stdout).toMatch(/^paused queue jobs: .*mq queue resume jobs to deliver again\n$/)
    expect(cluster.calls).toContain(`updateQueue:jobs:${JSON.stringify({ paused: true })}`)
    expect((await mq(['queue', 'describe', 'jobs', '--no-stats'])).stdout).toMatch(
      /delivery: +paused \(mq queue resume jobs\)/,
    )
    const resumed = await mq(['queue', 'resume', 'jobs', '--json'])
    expect(jsonLines(resumed.stdout)[0]).toMatchObject({ queue: 'jobs', config: { paused: false } })
    expect((await mq(['queue', 'describe', 'jobs', '--no-stats'])).stdout).toMatch(/delivery: +running/)
    const created = await mq(['queue', 'create', 'held', '--paused'])
    expect(created.stdout).toBe('created queue held (1 partition, paused)\n')
    expect(cluster.calls).toContain(`createQueue:held:${JSON.stringify({ paused: true })}`)
    const missing = await mq(['queue', 'pause', 'nope'])
    expect(missing.code).toBe(2)
    expectOneLineError(missing.stderr, /queue nope does not exist/)
  })

  it('creates a queue with ordered keys and shows its ordering and waiting messages', async () => {
    const created = await mq(['queue', 'create', 'orders', '--ordered-keys', '--paused'])
    expect(created.stdout).toBe('created queue orders (1 partition, ordered keys, paused)\n')
    expect(cluster.calls).toContain(
      `createQueue:orders:${JSON.stringify({ paused: true, orderedKeys: true })}`,
    )
    const described = await mq(['queue', 'describe', 'orders'])
    expect(described.stdout).toMatch(
      /ordering: +per key: one message of a key at a time, in the order they arrived/,
    )
    expect(described.stdout).toMatch(/READY +DELAYED +LEASED +DEAD +WAITING\n +0 +1 +n1 +n1 +0 +0 +0 +0 +3\n/)
    cluster.addQueue('jobs')
    const plain = await mq(['queue', 'describe', 'jobs'])
    expect(plain.stdout).toMatch(/ordering: +none \(a key only picks the partition\)/)
    expect(plain.stdout).not.toMatch(/WAITING/)
  })

  it("sets and lifts a queue's delivery rate, and shows it", async () => {
    cluster.addQueue('jobs', 2)
    const r = await mq(['queue', 'update', 'jobs', '--delivery-rate', '50'])
    expect(r).toMatchObject({ code: 0, stdout: 'updated queue jobs (2 partitions)\n' })
    expect(cluster.calls).toContain(`updateQueue:jobs:${JSON.stringify({ deliveryRate: 50 })}`)
    expect((await mq(['queue', 'describe', 'jobs', '--no-stats'])).stdout).toMatch(
      /delivery rate: +at most 50 messages\/s/,
    )
    await mq(['queue', 'update', 'jobs', '--delivery-rate', '0'])
    expect((await mq(['queue', 'describe', 'jobs', '--no-stats'])).stdout).toMatch(/delivery rate: +no limit/)
    const bad = await mq(['queue', 'update', 'jobs', '--delivery-rate', '-1'])
    expect(bad.code).toBe(1)
    expectOneLineError(bad.stderr, /--delivery-rate/)
  })

  it("sets a queue's retry backoff on create and update, shows it, and turns it off", async () => {
    const created = await mq([
      'queue',
      'create',
      'retry',
      '--retry-backoff',
      '2s',
      '--retry-backoff-max',
      '5m',
    ])
    expect(created.code).toBe(0)
    expect(cluster.calls).toContain(
      `createQueue:retry:${JSON.stringify({ retryBackoffMinMs: 2_000, retryBackoffMaxMs: 300_000 })}`,
    )
    expect((await mq(['queue', 'describe', 'retry', '--no-stats'])).stdout).toMatch(
      /retry backoff: +2s doubling up to 5m/,
    )
    cluster.addQueue('jobs', 2)
    await mq(['queue', 'update', 'jobs', '--retry-backoff', '500ms'])
    expect(cluster.calls).toContain(`updateQueue:jobs:${JSON.stringify({ retryBackoffMinMs: 500 })}`)
    await mq(['queue', 'update', 'jobs', '--retry-backoff', '0'])
    expect((await mq(['queue', 'describe', 'jobs', '--no-stats'])).stdout).toMatch(
      /retry backoff: +none \(a failed delivery is ready again at once\)/,
    )
    const bad = await mq(['queue', 'update', 'jobs', '--retry-backoff', 'soon'])
    expect(bad.code).toBe(1)
    expectOneLineError(bad.stderr, /--retry-backoff/)
  })

  it('adds partitions to a queue', async () => {
    cluster.addQueue('jobs', 2)
    const r = await mq(['queue', 'update', 'jobs', '--partitions', '6'])
    expect(r).toMatchObject({ code: 0, stdout: 'updated queue jobs (6 partitions)\n' })
    expect(cluster.calls).toContain(`updateQueue:jobs:${JSON.stringify({ partitions: 6 })}`)
    const bad = await mq(['queue', 'update', 'jobs', '--partitions', '0'])
    expect(bad.code).toBe(1)
    expectOneLineError(bad.stderr, /--partitions/)
    // Above the meta service's bound: refused here, before asking.
    const many = await mq(['queue', 'create', 'wide', '--partitions', '257'])
    expect(many.code).toBe(1)
    expectOneLineError(many.stderr, /--partitions.*256/)
  })

  it('refuses an update with nothing to change', async () => {
    cluster.addQueue('jobs')
    const r = await mq(['queue', 'update', 'jobs'])
    expect(r.code).toBe(1)
    expectOneLineError(r.stderr, /nothing to change/)
  })

  it('deletes and purges', async () => {
    cluster.addQueue('jobs')
    cluster.put('jobs', 0, { body: 'a' })
    cluster.put('jobs', 0, { body: 'b' })
    expect((await mq(['queue', 'purge', 'jobs'])).stdout).toBe('purged 2 messages from jobs\n')
    expect(cluster.ready('jobs')).toEqual([])
    expect(jsonLines((await mq(['queue', 'delete', 'jobs', '--json'])).stdout)).toEqual([
      { queue: 'jobs', deleted: true },
    ])
    expect(cluster.queues.has('jobs')).toBe(false)
  })

  it('peeks at ready messages without consuming them', async () => {
    cluster.addQueue('jobs', 2)
    cluster.put('jobs', 0, { body: 'light' })
    cluster.put('jobs', 0, { body: 'heavy', weight: 9, key: 'k' })
    cluster.put('jobs', 1, { body: 'other' })
    const table = await mq(['queue', 'peek', 'jobs'])
    expect(table.stdout.split('\n')).toEqual([
      'PARTITION  ID  WEIGHT  DELIVERIES  KEY  BODY',
      '        0   2       9           0  k    heavy',
      '        0   1       1           0  -    light',
      '        1   3       1           0  -    other',
      '',
    ])
    expect(cluster.calls).toContain('peek:jobs:20')
    const json = jsonLines((await mq(['queue', 'peek', 'jobs', '--limit', '1', '--json'])).stdout)
    expect(json.map((m) => [m.partition, m.body])).toEqual([
      [0, 'heavy'],
      [1, 'other'],
    ])
    expect(cluster.ready('jobs')).toHaveLength(3)
    expect((await mq(['queue', 'peek', 'jobs', '--limit', '0'])).code).toBe(1)
  })

  it('escapes control characters in the KEY column of peek and dlq, one message a line', async () => {
    cluster.addQueue('jobs', 1)
    cluster.put('jobs', 0, { body: 'b', key: 'user\n42\u001b[2J' })
    const table = await mq(['queue', 'peek', 'jobs'])
    expect(table.stdout.split('\n')).toEqual([
      'PARTITION  ID  WEIGHT  DELIVERIES  KEY                BODY',
      '        0   1       1           0  user\\n42\\u001b[2J  b',
      '',
    ])
    cluster.bury('jobs', 0, 'dead')
    const dead = cluster.queues.get('jobs')?.dead[0]?.[0]
    if (dead) dead.key = 'k\rx'
    const list = await mq(['queue', 'dlq', 'jobs'])
    expect(list.stdout).not.toMatch(/\r/)
    expect(list.stdout).toContain('k\\rx')
  })

  it('escapes DEL, C1 and bidi controls in the BODY column of peek, as consume does', async () => {
    cluster.addQueue('jobs', 1)
    cluster.put('jobs', 0, { body: 'a\u009b2Jb\u202ec\u007f"\\' })
    const table = await mq(['queue', 'peek', 'jobs'])
    expect(table.stdout.split('\n')).toEqual([
      'PARTITION  ID  WEIGHT  DELIVERIES  KEY  BODY',
      '        0   1       1           0  -    a\\u009b2Jb\\u202ec\\u007f\\"\\\\',
      '',
    ])
  })

  it('cuts a long BODY in the peek table before an escape or an emoji it would split', async () => {
    cluster.addQueue('jobs', 1)
    cluster.put('jobs', 0, { body: `${'a'.repeat(58)}\nbbb` })
    cluster.put('jobs', 0, { body: `${'a'.repeat(58)}\u{1F600}bbb` })
    const rows = (await mq(['queue', 'peek', 'jobs'])).stdout.split('\n').slice(1, 3)
    expect(rows.map((r) => r.slice(r.indexOf('a')))).toEqual([`${'a'.repeat(58)}…`, `${'a'.repeat(58)}…`])
  })

  it('lists, redrives and purges dead letters', async () => {
    cluster.addQueue('jobs', 2)
    cluster.bury('jobs', 0, 'poison\nline')
    cluster.bury('jobs', 1, 'other')
    const list = await mq(['queue', 'dlq', 'jobs'])
    expect(list.stdout).toMatch(/PARTITION +ID +WEIGHT +DELIVERIES +KEY +BODY/)
    expect(list.stdout).toMatch(/poison\\nline/)
    const json = jsonLines((await mq(['queue', 'dlq', 'jobs', '--json'])).stdout)
    expect(json.map((m) => m.body)).toEqual(['poison\nline', 'other'])
    expect((await mq(['queue', 'dlq', 'jobs', '--redrive', '1'])).stdout).toBe(
      'moved 2 dead-lettered messages of jobs back to ready\n',
    )
    expect(cluster.calls).toContain('redriveDeadLetters:jobs:1')
    expect(cluster.ready('jobs')).toHaveLength(2)
    cluster.bury('jobs', 0, 'again')
    expect((await mq(['queue', 'dlq', 'jobs', '--purge'])).stdout).toBe(
      'deleted 1 dead-lettered message of jobs\n',
    )
    const both = await mq(['queue', 'dlq', 'jobs', '--purge', '--redrive', '5'])
    expect(both.code).toBe(1)
    expectOneLineError(both.stderr, /--redrive or --purge, not both/)
    expect((await mq(['queue', 'dlq', 'jobs'])).stdout).not.toMatch(/leaders move/)
  })

  it('moves messages to another queue, keeping key, weight and headers, and acks them only once copied', async () => {
    cluster.addQueue('jobs-dead', 2)
    cluster.addQueue('jobs', 1)
    cluster.put('jobs-dead', 0, {
      body: 'a',
      key: 'k1',
      weight: 7,
      headers: { 'mq-dead-letter-deliveries': '5' },
    })
    cluster.put('jobs-dead', 1, { body: 'b' })
    cluster.put('jobs-dead', 1, { body: 'c' })
    const one = await mq(['queue', 'move', 'jobs-dead', '--to', 'jobs', '--max', '1', '--wait', '100ms'])
    expect(one).toMatchObject({ code: 0, stdout: 'moved 1 message from jobs-dead to jobs\n' })
    const rest = await mq(['queue', 'move', 'jobs-dead', '--to', 'jobs', '--wait', '100ms', '--json'])
    expect(jsonLines(rest.stdout)).toEqual([{ from: 'jobs-dead', to: 'jobs', moved: 2 }])
    expect(cluster.ready('jobs-dead')).toEqual([])
    const moved = cluster.ready('jobs')
    expect(moved.map((m) => new TextDecoder().decode(m.body)).sort()).toEqual(['a', 'b', 'c'])
    expect(moved.find((m) => m.key === 'k1')).toMatchObject({
      weight: 7,
      headers: { 'mq-dead-letter-deliveries': '5' },
    })
    // An empty source: nothing to move, not an error.
    expect(await mq(['queue', 'move', 'jobs-dead', '--to', 'jobs', '--wait', '100ms'])).toMatchObject({
      code: 0,
      stdout: 'moved 0 messages from jobs-dead to jobs\n',
    })
    // A paused source hands nothing out: an error that says why, the message stays.
    cluster.put('jobs-dead', 0, { body: 'd' })
    await mq(['queue', 'pause', 'jobs-dead'])
    const paused = await mq(['queue', 'move', 'jobs-dead', '--to', 'jobs', '--wait', '100ms'])
    expect(paused.code).not.toBe(0)
    expectOneLineError(
      paused.stderr,
      /moved nothing from jobs-dead to jobs: jobs-dead is paused: nothing is handed out of it until mq queue resume jobs-dead/,
    )
    expect(cluster.ready('jobs-dead')).toHaveLength(1)
  })

  it('leaves messages in the source when the target refuses them, and refuses a move to the same queue', async () => {
    cluster.addQueue('jobs-dead', 1)
    cluster.put('jobs-dead', 0, { body: 'a' })
    const missing = await mq(['queue', 'move', 'jobs-dead', '--to', 'nope', '--wait', '100ms'])
    expect(missing.code).toBe(2)
    expectOneLineError(
      missing.stderr,
      /could not go to nope; it stays in jobs-dead.*queue nope does not exist/,
    )
    expect(cluster.ready('jobs-dead')).toHaveLength(1)
    // Leasing stopped before the refused message went back (else it was leased again at once
    // and held for the visibility timeout, a delivery counted: the operator audit).
    expect(cluster.consumerEvents.slice(0, 2)).toEqual(['stop:jobs-dead', `release:${cluster.released[0]}`])
    // An empty source: a target that does not exist is still said (it was "moved 0", exit 0).
    cluster.addQueue('empty', 1)
    const typo = await mq(['queue', 'move', 'empty', '--to', 'nope', '--wait', '100ms'])
    expect(typo.code).toBe(2)
    expectOneLineError(typo.stderr, /moved nothing from empty to nope: queue nope does not exist/)
    const same = await mq(['queue', 'move', 'jobs-dead', '--to', 'jobs-dead'])
    expect(same.code).toBe(1)
    expectOneLineError(same.stderr, /--to must name another queue/)
  })

  it('says where dead letters go when the queue has a dead-letter queue', async () => {
    cluster.addQueue('jobs', 1, { deadLetterQueue: 'jobs-dead' })
    const list = await mq(['queue', 'dlq', 'jobs'])
    expect(list.stdout).toMatch(
      /jobs's leaders move its dead letters to queue jobs-dead: .*consume jobs-dead/,
    )
    // Nothing but the records with --json.
    expect((await mq(['queue', 'dlq', 'jobs', '--json'])).stdout).toBe('')
  })
})

describe('produce', () => {
  beforeEach(() => cluster.addQueue('jobs', 2))

  it('sends one body with weight, key, delay and headers', async () => {
    const r = await mq([
      'produce',
      'jobs',
      '--weight',
      '5',
      '--key',
      'k',
      '--delay',
      '10s',
      '-H',
      'a=b',
      '-H',
      'c=d=e',
      'hi',
    ])
    expect(r).toMatchObject({ code: 0, stdout: 'produced 1 message to jobs (partition 0, id 1)\n' })
    const [m] = cluster.ready('jobs')
    expect(m).toMatchObject({ weight: 5, key: 'k', delayMs: 10_000, headers: { a: 'b', c: 'd=e' } })
    expect(new TextDecoder().decode(m?.body)).toBe('hi')
  })

  it('sends the body --count times and prints one JSON line per message', async () => {
    const r = await mq(['produce', 'jobs', '--count', '5', '--json', 'x'])
    const lines = jsonLines(r.stdout)
    expect(lines.map((l) => l.seq).sort()).toEqual([0, 1, 2, 3, 4])
    expect(lines[0]).toEqual({ seq: 0, id: 1, partition: 0, duplicate: false })
    expect(cluster.ready('jobs')).toHaveLength(5)
  })

  it('sends one message per stdin line, skipping empty lines', async () => {
    const r = await mq(['produce', 'jobs'], { stdin: ['one\ntw', 'o\n\nthree'] })
    expect(r).toMatchObject({ code: 0, stdout: 'produced 3 messages to jobs in 0.0s\n' })
    const bodies = cluster.ready('jobs').map((m) => new TextDecoder().decode(m.body))
    expect(bodies.sort()).toEqual(['one', 'three', 'two'])
  })

  // Each stdin line was decoded as UTF-8: its invalid bytes were sent as U+FFFD (EF BF BD),
  // other bytes than stdin held, and exit 0 without a word.
  it('sends a stdin line that is not UTF-8 as its bytes, unchanged', async () => {
    const latin1 = new Uint8Array([0x63, 0x61, 0x66, 0xe9]) // "café" in Latin-1
    const r = await mq(['produce', 'jobs'], { stdin: [latin1, new Uint8Array([0x0a, 0x6f, 0x6b, 0x0a])] })
    expect(r.code).toBe(0)
    const bodies = cluster.ready('jobs').map((m) => Buffer.from(m.body).toString('hex'))
    expect(bodies.sort()).toEqual(['636166e9', '6f6b'])
  })

  it('sends the bytes of --file as they are', async () => {
    const bytes = new Uint8Array([0xff, 0x00, 0x80])
    const r = await mq(['produce', 'jobs', '--file', 'blob.bin'], { files: { 'blob.bin': bytes } })
    expect(r.code).toBe(0)
    expect(cluster.ready('jobs')[0]?.body).toEqual(bytes)
  })

  it('exits 1 for a missing file, a body with --file, or --count on stdin', async () => {
    for (const [argv, why] of [
      [['produce', 'jobs', '--file', 'missing'], /--file missing: ENOENT/],
      [['produce', 'jobs', '--file', 'f', 'body'], /BODY or --file, not both/],
      [['produce', 'jobs', '--count', '3'], /does not apply to stdin lines/],
      [['produce', 'jobs', '--header', 'nokv', 'x'], /key=value/],
      [['produce', 'jobs', '--delay', '10', 'x'], /"10" has no unit/],
      [['produce', 'jobs', '--delay', '8d', 'x'], /"8d" is longer than the maximum of 168h/],
    ] as const) {
      const r = await mq([...argv])
      expect(r.code, argv.join(' ')).toBe(1)
      expectOneLineError(r.stderr, why)
    }
    expect(cluster.ready('jobs')).toEqual([])
  })

  /**
   * A CliIO of `h` whose producer's sends wait for `gate`, each calling `onSend(n)` first
   * (n: sends so far), reading `stdin` when given.
   */
  function gatedIO(
    h: ReturnType<FakeCluster['io']>,
    gate: Promise<void>,
    onSend: (n: number) => void,
    stdin?: CliIO['stdin'],
  ): CliIO {
    let sends = 0
    return {
      ...h.io,
      ...(stdin ? { stdin } : {}),
      connect: async (options) => {
        const client = await h.io.connect(options)
        return {
          ...client,
          producer: (queue) => {
            const p = client.producer(queue)
            return {
              ...p,
              send: async (m) => {
                onSend(++sends)
                await gate
                return p.send(m)
              },
            }
          },
        }
      },
    }
  }

  /** gatedIO reading `stdin`, whose sends go on once Ctrl-C came, right after send `at`. */
  function ctrlCAfterSend(h: ReturnType<FakeCluster['io']>, at: number, stdin: CliIO['stdin']): CliIO {
    let release = () => {}
    const gate = new Promise<void>((r) => (release = r))
    const onSend = (n: number) => {
      if (n !== at) return
      setImmediate(() => {
        h.interrupt.abort()
        setImmediate(release)
      })
    }
    return gatedIO(h, gate, onSend, stdin)
  }

  it('on Ctrl-C stops reading stdin, waits for the sends under way, says what was produced and exits 130', async () => {
    const h = cluster.io()
    const stdin = (async function* () {
      yield 'a\nb\nc\n'
      await new Promise(() => {}) // a pipe that stays open (tail -f)
    })()
    const io = ctrlCAfterSend(h, 3, stdin)
    const code = await runCli(['produce', 'jobs'], io, '0')
    expect(code).toBe(130)
    expectOneLineError(
      h.stderr(),
      /produce to jobs stopped \(Ctrl-C\): 3 of 3 messages produced; the rest of stdin was not read/,
    )
    expect(cluster.ready('jobs')).toHaveLength(3)
  })

  it('on Ctrl-C while its window of sends is full, reads no more of the closed stdin and exits 130', async () => {
    const h = cluster.io()
    const window = 10_000 // SENDS_IN_FLIGHT_MAX: the loop waits for room, not on stdin
    const stdin = (async function* () {
      yield 'x\n'.repeat(window)
      // nodeIO destroys stdin on the interrupt: a read after it fails.
      throw new Error('Premature close')
    })()
    const io = ctrlCAfterSend(h, window, stdin)
    const code = await runCli(['produce', 'jobs'], io, '0')
    expect(code).toBe(130)
    expectOneLineError(
      h.stderr(),
      /stopped \(Ctrl-C\): 10000 of 10000 messages produced; the rest of stdin was not read/,
    )
    expect(cluster.ready('jobs')).toHaveLength(window)
  })

  it("on SIGTERM stops a --count run, and exits with the signal's code", async () => {
    const h = cluster.io()
    let release = () => {}
    const gate = new Promise<void>((r) => (release = r))
    const io = gatedIO(h, gate, (n) => {
      if (n === 5) {
        h.interrupt.abort({ why: 'SIGTERM', exitCode: 143 })
        setImmediate(release)
      }
    })
    const code = await runCli(['produce', 'jobs', '--count', '1000', 'x'], io, '0')
    expect(code).toBe(143)
    expectOneLineError(h.stderr(), /stopped \(SIGTERM\): 5 of 5 messages produced; 995 were not sent/)
    expect(cluster.ready('jobs')).toHaveLength(5)
  })

  it('stops at the first failure and says how many messages were sent', async () => {
    cluster.produceFailsAfter = { count: 2, error: new InternalError('disk full') }
    const r = await mq(['produce', 'jobs', '--count', '5', 'x'])
    expect(r.code).toBe(4)
    expectOneLineError(r.stderr, /produce to jobs failed after 2 of \d messages were sent: disk full/)
    expect(cluster.ready('jobs')).toHaveLength(2)
  })

  it('exits 2 when the queue disappears while sending', async () => {
    cluster.produceFailsAfter = { count: 0, error: new QueueNotFoundError('queue jobs does not exist') }
    const r = await mq(['produce', 'jobs', 'x'])
    expect(r.code).toBe(2)
    expectOneLineError(r.stderr, /failed after 0 of 1 messages were sent: queue jobs does not exist/)
  })

  it('exits 3 when sends keep failing with a retriable error', async () => {
    const h = cluster.io()
    const client = cluster.client()
    h.io.connect = async () => ({
      ...client,
      producer: () => ({
        send: async () => {
          throw Object.assign(new Error('gave up after 7 attempts in 1500 ms: no leader'), {
            code: 'UNAVAILABLE',
            retriable: true,
          })
        },
        flush: async () => {},
        close: async () => {},
      }),
    })
    expect(await runCli(['produce', 'jobs', 'x'], h.io, '0')).toBe(3)
    expect(h.stderr()).toMatch(
      /^mq: the cluster at 127\.0\.0\.1:7001 did not answer within 10s: produce to jobs failed/,
    )
  })
})

describe('consume', () => {
  beforeEach(() => cluster.addQueue('jobs', 2))

  it('takes one message by default, prints it and acks it', async () => {
    cluster.put('jobs', 0, { body: 'first', weight: 3, key: 'k', headers: { a: 'b' } })
    cluster.put('jobs', 1, { body: 'second' })
    const r = await mq(['consume', 'jobs'])
    expect(r).toMatchObject({ code: 0, stdout: '0/1  weight=3  deliveries=1  key=k  headers={a=b}  first\n' })
    expect(cluster.acked).toEqual([1])
    expect(cluster.ready('jobs').map((m) => m.id)).toEqual([2])
    expect(cluster.calls.at(-1)).toBe('close')
  })

  it('prints JSON records, with base64 for bodies that are not UTF-8', async () => {
    cluster.put('jobs', 0, { body: 'text' })
    cluster.put('jobs', 0, { body: new Uint8Array([0xff, 0xfe]) })
    const r = await mq(['consume', 'jobs', '--max', '2', '--json'])
    expect(jsonLines(r.stdout)).toEqual([
      { id: 1, partition: 0, weight: 1, key: '', body: 'text', headers: {}, deliveryCount: 1 },
      {
        id: 2,
        partition: 0,
        weight: 1,
        key: '',
        body: '//4=',
        encoding: 'base64',
        headers: {},
        deliveryCount: 1,
      },
    ])
    expect(cluster.acked.sort()).toEqual([1, 2])
  })

  it('acks only what left mq, and gives back the rest when stdout is gone (mq consume | head -2)', async () => {
    for (const body of ['a', 'b', 'c', 'd', 'e']) cluster.put('jobs', 0, { body })
    const r = await mq(['consume', 'jobs', '--max', '5'], { stdoutLines: 2 })
    expect(r.code).toBe(0)
    expect(r.stdout.split('\n').filter(Boolean)).toHaveLength(2)
    expect(cluster.acked.sort()).toEqual([1, 2])
    expect(
      cluster
        .ready('jobs')
        .map((m) => m.id)
        .sort(),
    ).toEqual([3, 4, 5])
  })

  it('gives the messages back with --no-ack', async () => {
    for (const body of ['a', 'b', 'c']) cluster.put('jobs', 0, { body })
    const r = await mq(['consume', 'jobs', '--no-ack', '--max', '2'])
    expect(r.stdout.split('\n').filter(Boolean)).toHaveLength(2)
    expect(cluster.acked).toEqual([])
    expect(cluster.released.sort()).toEqual([1, 2])
    expect(
      cluster
        .ready('jobs')
        .map((m) => m.id)
        .sort(),
    ).toEqual([1, 2, 3])
  })

  it('stops after --wait without a message and says so', async () => {
    // A wait shorter than a lease's round trip counts as 250ms (--wait 0 gave up before the
    // first lease could answer).
    const r = await mq(['consume', 'jobs', '--wait', '0'])
    expect(r).toMatchObject({ code: 0, stdout: '', stderr: 'mq: no message in jobs within 250ms\n' })
    cluster.put('jobs', 0, { body: 'waits' })
    await mq(['queue', 'pause', 'jobs'])
    expect(await mq(['consume', 'jobs', '--wait', '300ms'])).toMatchObject({
      code: 0,
      stdout: '',
      stderr:
        'mq: no message in jobs within 300ms (jobs is paused: nothing is handed out of it until mq queue resume jobs)\n',
    })
  })

  it('follows until --max', async () => {
    for (let i = 0; i < 5; i++) cluster.put('jobs', i % 2, { body: `m${i}` })
    const r = await mq(['consume', 'jobs', '--follow', '--max', '4', '--json'])
    expect(jsonLines(r.stdout)).toHaveLength(4)
    expect(cluster.ready('jobs')).toHaveLength(1)
  })

  it('follows messages that arrive later, until Ctrl-C', async () => {
    const h = cluster.io()
    const printed: string[] = []
    h.io.stdout.write = (s: string) => {
      printed.push(s)
      if (printed.length === 1) cluster.put('jobs', 1, { body: 'later' })
      if (printed.length === 2) h.interrupt.abort()
      return true
    }
    cluster.put('jobs', 0, { body: 'now' })
    const code = await runCli(['consume', 'jobs', '--follow'], h.io, '0')
    expect(code).toBe(0)
    expect(printed.map((l) => l.trim().split('  ').at(-1))).toEqual(['now', 'later'])
    expect(cluster.acked.sort()).toEqual([1, 2])
  })

  it('leases no more than it will print, with a short long poll', async () => {
    await mq(['consume', 'jobs', '--wait', '20ms'])
    expect(cluster.consumerOptions).toMatchObject({ prefetch: 1, waitMs: 50 })
    await mq(['consume', 'jobs', '--max', '500', '--wait', '10ms', '--no-ack'])
    expect(cluster.consumerOptions).toMatchObject({ prefetch: 500 })
    cluster.put('jobs', 0, { body: 'x' })
    await mq(['consume', 'jobs', '--follow', '--max', '1', '--wait', '1ms'])
    expect(cluster.consumerOptions).toMatchObject({ prefetch: 1, waitMs: 1_000 })
    await mq(['consume', 'jobs', '--max', '500', '--wait', '10ms'])
    expect(cluster.consumerOptions).toMatchObject({ prefetch: 64, waitMs: 50 })
  })

  it("says in --help what --no-ack's give-back does to the delivery count", async () => {
    const help = (await mq(['consume', '--help'])).stdout.replace(/\s+/g, ' ')
    expect(help).not.toMatch(/not counted as a delivery attempt/)
    expect(help).toMatch(/the delivery count the next consumer sees still goes up by one/)
    expect(help).toMatch(/never dead-letters a message \(the queue's max deliveries is not enforced for it\)/)
  })

  it('refuses --no-ack --follow without a bound', async () => {
    const r = await mq(['consume', 'jobs', '--no-ack', '--follow'])
    expect(r.code).toBe(1)
    expectOneLineError(r.stderr, /--no-ack holds every message until mq exits; give --max 1000 or less/)
  })
})

describe('mq token', () => {
  it('creates a token with its roles and prints the secret alone, lists and deletes tokens', async () => {
    const created = await mq([
      'token',
      'create',
      'app',
      '--role',
      'producer:orders.*',
      '-r',
      'consumer:orders.*',
    ])
    expect(created).toMatchObject({ code: 0, stdout: 'mq_secret_of_app\n' })
    expect(cluster.calls).toContain('createToken:app:producer:orders.*,consumer:orders.*:0')
    const listed = await mq(['token', 'list'])
    expect(listed.stdout).toMatch(
      /^NAME +ROLES +CREATED +EXPIRES\napp +producer:orders\.\*,consumer:orders\.\* +2023-11-14T22:13:20.000Z +never\n$/,
    )
    expect(jsonLines((await mq(['token', 'list', '--json'])).stdout)).toEqual([
      {
        name: 'app',
        roles: ['producer:orders.*', 'consumer:orders.*'],
        createdAtMs: 1_700_000_000_000,
        expiresAtMs: 0,
      },
    ])
    expect(await mq(['token', 'delete', 'app'])).toMatchObject({ code: 0, stdout: 'deleted token app\n' })
    const again = await mq(['token', 'delete', 'app'])
    expect(again.code).toBe(2)
    expectOneLineError(again.stderr, /no token is named app/)
  })

  it('escapes control characters in the ROLES column of token list, one token a line', async () => {
    // The cluster takes any text as a role's pattern (up to 256 characters), newlines too.
    expect((await mq(['token', 'create', 'odd', '-r', 'producer:a\nb\u001b[2J'])).code).toBe(0)
    const listed = await mq(['token', 'list'])
    expect(listed.stdout.split('\n')).toEqual([
      'NAME  ROLES                   CREATED                   EXPIRES',
      'odd   producer:a\\nb\\u001b[2J  2023-11-14T22:13:20.000Z  never',
      '',
    ])
  })

  it('exits 4 for a token that exists, as for a queue that exists', async () => {
    expect((await mq(['token', 'create', 'app2', '-r', 'admin'])).code).toBe(0)
    const again = await mq(['token', 'create', 'app2', '-r', 'admin'])
    expect(again.code).toBe(4)
    expectOneLineError(again.stderr, /a token named app2 exists/)
    cluster.addQueue('jobs')
    expect((await mq(['queue', 'create', 'jobs'])).code).toBe(4)
  })

  it('gives a token a lifetime with --expires-in (days too), and lists when it expires or expired', async () => {
    const created = await mq(['token', 'create', 'ci', '-r', 'admin', '--expires-in', '30d', '--json'])
    expect(cluster.calls).toContain('createToken:ci:admin:2592000000')
    expect(jsonLines(created.stdout)).toEqual([
      {
        name: 'ci',
        token: 'mq_secret_of_ci',
        roles: ['admin'],
        expiresAtMs: 1_700_000_000_000 + 2_592_000_000,
      },
    ])
    // (The fake's tokens were made in 2023: this one's 30 days are over.)
    expect((await mq(['token', 'list'])).stdout).toMatch(
      /\nci +admin +2023-11-14T22:13:20.000Z +2023-12-14T22:13:20.000Z \(expired\)\n/,
    )
    const bad = await mq(['token', 'create', 'x', '-r', 'admin', '--expires-in', '30'])
    expect(bad.code).toBe(1)
    expectOneLineError(bad.stderr, /"30" has no unit/)
    const never = await mq(['token', 'create', 'x', '-r', 'admin', '--expires-in', '0'])
    expect(never.code).toBe(1)
    expectOneLineError(never.stderr, /a lifetime must be above 0, not 0 \(leave the flag out for none\)/)
    // Past the cluster's 10 years: refused here, naming the flag (the server's refusal named
    // neither, in milliseconds, until 2026-12-07).
    const long = await mq(['token', 'create', 'x', '-r', 'admin', '--expires-in', '3651d'])
    expect(long.code).toBe(1)
    expectOneLineError(long.stderr, /--expires-in.*a lifetime is at most 3650d \(10 years\), not 3651d/)
    expect((await mq(['token', 'create', 'y', '-r', 'admin', '--expires-in', '3650d'])).code).toBe(0)
  })

  it('needs at least one --role', async () => {
    const r = await mq(['token', 'create', 'app'])
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/--role/)
  })
})
