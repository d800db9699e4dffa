import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type Server, type ServerResponse } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  type ClusterInfo,
  NAMED_PARTITIONS_MAX,
  PEEK_BODY_CHARS,
  PEEK_PER_PARTITION,
  type PeekedMessage,
  type QueueDetail,
  type QueueSummary,
  type SessionInfo,
} from '@mq/console'
import { InvalidArgumentError, QueueExistsError, type QueueRoute, UnavailableError } from '@mq/protocol'
import type { ListedMessage, MqClient } from '@mq/router-client'
import { afterEach, describe, expect, it, onTestFinished, vi } from 'vitest'
import { AccessControl } from '../auth/access'
import { parseTokenFile } from '../auth/token-file'
import type { Logger } from '../log'
import { capturedLog } from '../log-capture'
import {
  bodyText,
  CLUSTER_CALLS_RUNNING_MAX,
  CLUSTER_CALLS_WAITING_MAX,
  ConsoleApi,
  PEEK_BODY_BYTES_MAX,
  PEEKS_RUNNING_MAX,
  PEEKS_WAITING_MAX,
  QUEUES_STATS_CALLS_AT_ONCE,
  QUEUES_WITH_STATS_MAX,
} from './console-api'
import { ConsoleAssets } from './console-assets'
import { ConsoleClients } from './console-clients'

const ADMIN = 'admin-secret-0123456789'
const APP = 'app-secret-0123456789'
const DASH = 'dash-secret-0123456789'
const tokens = parseTokenFile(
  {
    tokens: [
      { name: 'ops', token: ADMIN, roles: ['admin'] },
      { name: 'app', token: APP, roles: ['consumer:jobs'] },
      { name: 'dash', token: DASH, roles: ['viewer:jobs'] },
    ],
  },
  'test',
)

const route: QueueRoute = {
  queue: 'jobs',
  queueId: 4,
  routeEpoch: 9,
  partitionsEpoch: 0,
  config: {
    partitions: 1,
    visibilityTimeoutMs: 30_000,
    maxDeliveries: 5,
    deadLetterQueue: '',
    messageBytesMax: 0,
    queueLengthMax: 0,
    strictPriority: false,
    dedupWindowMs: 0,
    engine: 'leveldb',
    messageTtlMs: 0,
    paused: false,
    orderedKeys: false,
    deliveryRate: 0,
    retryBackoffMinMs: 0,
    retryBackoffMaxMs: 0,
  },
  partitions: [
    { partition: 0, groupId: 1, leaderId: 'n2', leaderAddress: '', replicas: [], engine: 'leveldb' },
  ],
}

/** The stats every queue answers. */
const queueStats = [
  {
    queue: 'jobs',
    partition: 0,
    groupId: 1,
    messages: 6,
    windowLeases: 0,
    waiting: 2,
    weights: [
      {
        weight: 2,
        ready: 3,
        delayed: 1,
        leased: 1,
        dead: 1,
        oldestAgeMs: 50,
        targetShare: 1,
        achievedShare: 1,
      },
    ],
  },
]

interface FakeOptions {
  readonly groupPartitions?: number
  /** Peeks and queue descriptions answer once it resolves. */
  readonly hold?: Promise<void>
  /** What listQueues answers (default: `route`). */
  readonly queues?: readonly QueueRoute[]
  /** The Stats calls under way (a queue's stats count one per partition), and their most. */
  readonly stats?: { inFlight: number; inFlightMax: number }
  /** The bytes of the values a peek kept: a body's whole buffer while it keeps the bytes. */
  readonly peekKept?: number[]
  /** The body of the third peeked message (default: 300 x). */
  readonly peekBody?: Uint8Array
  /** Each queue's stats answer after this long; the queues asked are pushed to `statsAsked`. */
  readonly statsMs?: number
  readonly statsAsked?: string[]
}

/**
 * A stand-in for the SDK's admin: records what it was asked, answers canned figures. A peek
 * keeps what its `map` returns for each message, as the SDK does.
 */
function fakeClient(calls: string[], options: FakeOptions = {}): MqClient {
  const { groupPartitions = 1, hold } = options
  const admin = {
    clusterStatus: async () => ({
      metaLeaderId: 'n1',
      metaVoters: ['n1', 'n2'],
      metaLearners: [],
      metaVotersWanted: 3,
      replicationFactor: 3,
      metaChange: { add: 'n3', remove: '', reason: 'grow', startedAtMs: 1 },
      routeEpoch: 9,
      nodes: [
        { nodeId: 'n2', address: 'a2', alive: true, lastHeartbeatMs: 1, groupIds: [1] },
        { nodeId: 'n1', address: 'a1', alive: false, lastHeartbeatMs: 1, groupIds: [1] },
      ],
      groups: [
        {
          groupId: 1,
          leaderId: 'n2',
          replicas: [
            { nodeId: 'n2', address: 'a2', learner: false, appliedIndex: 7 },
            { nodeId: 'n1', address: 'a1', learner: false, appliedIndex: 4 },
          ],
          term: 2,
          commitIndex: 10,
          appliedIndex: 7,
          partitions: groupPartitions,
          state: 'active',
        },
      ],
      moves: [],
    }),
    listQueues: async (_prefix = '', limit = 10_000) => {
      calls.push('list')
      return (options.queues ?? [route]).slice(0, limit)
    },
    describeQueue: async (name: string) => {
      calls.push(`describe ${name}`)
      await hold
      return route
    },
    queueStats: async (name: string) => {
      options.statsAsked?.push(name)
      if (options.statsMs) await new Promise((r) => setTimeout(r, options.statsMs))
      const stats = options.stats
      if (stats) {
        const partitions = options.queues?.find((q) => q.queue === name)?.partitions.length ?? 1
        stats.inFlight += partitions
        stats.inFlightMax = Math.max(stats.inFlightMax, stats.inFlight)
        for (let turn = 0; turn < 3; turn++) await new Promise<void>((r) => setImmediate(r))
        stats.inFlight -= partitions
      }
      return queueStats
    },
    createQueue: async (name: string, config: unknown) => {
      calls.push(`create ${name} ${JSON.stringify(config)}`)
      if (name === 'taken') throw new QueueExistsError('queue taken exists')
      return { ...route, queue: name }
    },
    updateQueue: async (name: string, update: unknown) => {
      calls.push(`update ${name} ${JSON.stringify(update)}`)
      return { ...route, queue: name }
    },
    purgeQueue: async (name: string) => {
      calls.push(`purge ${name}`)
      return 3
    },
    transferLeader: async (groupId: number, to: string) => {
      calls.push(`transfer ${groupId} ${to}`)
    },
    peek: async (name: string, limit: number, peekOptions?: { map: (m: ListedMessage) => unknown }) => {
      calls.push(`peek ${name} ${limit}`)
      await hold
      const m = { leaseId: '', headers: {}, deadlineMs: 0, enqueuedAtMs: 5, deliveryCount: 0 }
      const third = options.peekBody ?? new TextEncoder().encode('x'.repeat(300))
      const messages: ListedMessage[] = [
        { ...m, partition: 0, id: 1, weight: 3, key: 'k', body: new TextEncoder().encode('hello') },
        {
          ...m,
          partition: 0,
          id: 2,
          weight: 1,
          key: 'r\u202el',
          body: Uint8Array.of(0xff, 0xfe),
          deliveryCount: 2,
        },
        { ...m, partition: 1, id: 1, weight: 1, key: '', body: third },
      ]
      const kept = peekOptions ? messages.map(peekOptions.map) : messages
      for (const value of kept) {
        const body = (value as { body: unknown }).body
        options.peekKept?.push(body instanceof Uint8Array ? body.buffer.byteLength : String(body).length)
      }
      return kept
    },
    drainNode: async (nodeId: string) => {
      calls.push(`drain ${nodeId}`)
      return nodeId === 'n3' ? 2 : 0
    },
    undrainNode: async (nodeId: string) => {
      calls.push(`undrain ${nodeId}`)
      return nodeId === 'n3'
    },
    removeNode: async (nodeId: string) => {
      calls.push(`remove ${nodeId}`)
      if (nodeId === 'n1') throw new InvalidArgumentError('node n1 is alive (heard from 0.2 s ago)')
    },
    setReplicationFactor: async (factor: number) => {
      calls.push(`replication ${factor}`)
      if (factor > 7)
        throw new InvalidArgumentError(`the replication factor must be an integer from 1 to 7, not ${factor}`)
      return { previous: 3, factor }
    },
    setMetaVoters: async (voters: number) => {
      calls.push(`meta-voters ${voters}`)
      if (voters % 2 === 0)
        throw new InvalidArgumentError(`the meta group can keep 1, 3, 5, 7 voters, not ${voters}`)
      return { voters: ['n1', 'n2', 'n3'], votersWanted: voters }
    },
  }
  return { admin, close: async () => {} } as unknown as MqClient
}

const servers: Server[] = []
afterEach(() => {
  for (const s of servers.splice(0)) s.close()
})

async function serve(
  auth: boolean,
  /** `clusterDown`: every client's connect fails UNAVAILABLE (after `opened` records it). */
  options: FakeOptions & { peekWithoutAuth?: boolean; clusterDown?: boolean; log?: Logger } = {},
): Promise<{ base: string; calls: string[]; opened: string[] }> {
  const calls: string[] = []
  const opened: string[] = []
  const api = new ConsoleApi({
    nodeId: 'n1',
    access: new AccessControl({ peerToken: '', tokens: auth ? tokens : undefined }),
    clients: new ConsoleClients(async (token) => {
      opened.push(token)
      if (options.clusterDown) throw new UnavailableError('no meta leader answered')
      return fakeClient(calls, options)
    }),
    nowMs: () => 1_000,
    ...(options.peekWithoutAuth ? { peekWithoutAuth: true } : {}),
    ...(options.log ? { log: options.log } : {}),
  })
  const server = createServer((req, res) => void api.handle(req, res, (req.url ?? '/').split('?')[0] ?? '/'))
  servers.push(server)
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const address = server.address()
  return {
    base: `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`,
    calls,
    opened,
  }
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` })
const post = (token: string, body: unknown) => ({
  method: 'POST',
  headers: { ...bearer(token), 'content-type': 'application/json' },
  body: JSON.stringify(body),
})

/** Posts each case's body to its path as the admin: each is answered 400. */
async function expectAll400(base: string, cases: readonly (readonly [string, unknown])[]): Promise<void> {
  for (const [path, body] of cases) {
    const r = await fetch(`${base}${path}`, post(ADMIN, body))
    expect([path, r.status]).toEqual([path, 400])
  }
}

describe('the console API', () => {
  it('without auth: reads work, every admin action is refused as read-only and reaches nothing', async () => {
    const { base, calls } = await serve(false)
    const session = (await (await fetch(`${base}/api/session`)).json()) as SessionInfo
    expect(session).toEqual({ nodeId: 'n1', auth: false, tokenName: '', roles: [], admin: false })
    const cluster = (await (await fetch(`${base}/api/cluster`)).json()) as ClusterInfo
    expect(cluster.nodes.map((n) => [n.nodeId, n.leaderOf])).toEqual([
      ['n1', [0]],
      ['n2', [1]],
    ])
    expect(cluster.groups[0]).toMatchObject({ applyLag: 3, partitionCount: 1, partitions: ['jobs/0'] })
    expect(cluster.meta).toEqual({
      voters: ['n1', 'n2'],
      votersWanted: 3,
      summary: 'n1, n2 (3 wanted); adding n3 (grow)',
      voterChoices: [1, 3, 5, 7],
    })
    expect(cluster).toMatchObject({
      replicationFactor: 3,
      replication: '3 replicas per data group',
      replicationChoices: [1, 2, 3, 4, 5, 6, 7],
    })
    expect(cluster.groups[0]?.replicas).toEqual([
      { nodeId: 'n2', learner: false, appliedIndex: 7, lag: 3 },
      { nodeId: 'n1', learner: false, appliedIndex: 4, lag: 6 },
    ])
    // No message body to whoever reaches the HTTP port: a peek is refused before any call.
    const hidden = await fetch(`${base}/api/queues/jobs/peek`)
    expect(hidden.status).toBe(403)
    const { error } = (await hidden.json()) as { error: { code: string; message: string } }
    expect(error.code).toBe('PEEK_DISABLED')
    expect(error.message).toMatch(/--auth-file.*--console-peek/)
    expect(calls.filter((c) => c.startsWith('peek'))).toEqual([])
    // The page is told so, and offers no peek.
    expect(((await (await fetch(`${base}/api/queues/jobs`)).json()) as QueueDetail).mayPeek).toBe(false)
    const refused = await fetch(`${base}/api/queues/jobs/purge`, post('', {}))
    expect(refused.status).toBe(403)
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('READ_ONLY')
    expect(calls.filter((c) => c.startsWith('purge'))).toEqual([])
  })

  it('without auth, peeks with --console-peek: ready messages, bodies as text, base64 when not UTF-8, cut', async () => {
    const { base, calls } = await serve(false, { peekWithoutAuth: true })
    expect(((await (await fetch(`${base}/api/queues/jobs`)).json()) as QueueDetail).mayPeek).toBe(true)
    const peeked = (await (await fetch(`${base}/api/queues/jobs/peek`)).json()) as PeekedMessage[]
    expect(calls).toContain(`peek jobs ${PEEK_PER_PARTITION}`)
    expect(
      peeked.map((m) => [m.partition, m.id, m.weight, m.deliveryCount, m.key, m.body.slice(0, 12)]),
    ).toEqual([
      [0, 1, 3, 0, 'k', 'hello'],
      [0, 2, 1, 2, 'r\\u202el', 'base64://4='], // a key's controls escaped too
      [1, 1, 1, 0, '', 'xxxxxxxxxxxx'],
    ])
    expect(peeked[2]?.body).toHaveLength(PEEK_BODY_CHARS)
    expect(peeked[2]?.body.endsWith('…')).toBe(true)
  })

  it('with auth: peeks with a token, --console-peek or not (the cluster checks the consume role)', async () => {
    const { base, calls } = await serve(true)
    const peeked = await fetch(`${base}/api/queues/jobs/peek`, { headers: bearer(APP) })
    expect(peeked.status).toBe(200)
    expect(calls).toEqual([`peek jobs ${PEEK_PER_PARTITION}`])
    // The queue's page offers a peek to a token that may consume it (or admin), not to a viewer.
    const mayPeek = async (token: string) =>
      ((await (await fetch(`${base}/api/queues/jobs`, { headers: bearer(token) })).json()) as QueueDetail)
        .mayPeek
    expect([await mayPeek(APP), await mayPeek(ADMIN), await mayPeek(DASH)]).toEqual([true, true, false])
  })

  it('keeps of each peeked message only what the page shows, cut as its answer arrives', async () => {
    const peekKept: number[] = []
    // A 1 MiB body that is not UTF-8 past its first bytes, as a view into a larger answer.
    const answer = new Uint8Array(4 * 1024 * 1024).fill(0x61)
    answer.fill(0xff, 2048)
    const { base } = await serve(false, {
      peekWithoutAuth: true,
      peekKept,
      peekBody: answer.subarray(0, 1 << 20),
    })
    const peeked = (await (await fetch(`${base}/api/queues/jobs/peek`)).json()) as PeekedMessage[]
    expect(peeked[2]?.body).toBe(`${'a'.repeat(PEEK_BODY_CHARS - 1)}…`)
    // Not the answer's buffer: a string of at most PEEK_BODY_CHARS per message.
    expect(peekKept).toHaveLength(3)
    expect(Math.max(...peekKept)).toBeLessThanOrEqual(PEEK_BODY_CHARS)
  })

  it('runs a bounded number of peeks at once, lines up a bounded number, refuses the rest with 429', async () => {
    let release = () => {}
    const hold = new Promise<void>((r) => (release = r))
    const { base, calls } = await serve(false, { peekWithoutAuth: true, hold })
    const total = PEEKS_RUNNING_MAX + PEEKS_WAITING_MAX + 1
    const answered: Response[] = []
    const answers = Array.from({ length: total }, () =>
      fetch(`${base}/api/queues/jobs/peek`).then((r) => {
        answered.push(r)
        return r
      }),
    )
    await vi.waitFor(() => expect(answered.length + calls.length).toBeGreaterThan(PEEKS_RUNNING_MAX), {
      timeout: 10_000,
    })
    expect([answered.map((r) => r.status), calls.length]).toEqual([[429], PEEKS_RUNNING_MAX])
    const { error } = (await (answered[0] as Response).json()) as { error: { code: string; message: string } }
    expect(error).toEqual({ code: 'TOO_MANY_REQUESTS', message: expect.stringMatching(/2 peeks.*try again/) })
    // The peeks waiting hold no cluster call's slot: other reads are answered meanwhile.
    expect((await fetch(`${base}/api/cluster`)).status).toBe(200)
    release()
    const statuses = (await Promise.all(answers)).map((r) => r.status)
    expect(statuses.filter((s) => s === 200)).toHaveLength(total - 1)
    expect(calls.filter((c) => c.startsWith('peek'))).toHaveLength(total - 1)
  })

  it('reads the stats of the first queues with a bounded number of Stats calls at once', async () => {
    const stats = { inFlight: 0, inFlightMax: 0 }
    const partitions = (n: number) =>
      Array.from({ length: n }, (_, partition) => ({
        ...(route.partitions[0] as QueueRoute['partitions'][0]),
        partition,
      }))
    // 60 queues of 16 partitions, then one of 256 (past the first 50: not read).
    const queues: QueueRoute[] = [
      ...Array.from({ length: 60 }, (_, i) => ({ ...route, queue: `q${i}`, partitions: partitions(16) })),
    ]
    queues.splice(10, 0, { ...route, queue: 'big', partitions: partitions(256) })
    const { base } = await serve(false, { queues, stats })
    const listed = (await (await fetch(`${base}/api/queues`)).json()) as QueueSummary[]
    expect(listed.map((q) => q.name)).toEqual(queues.map((q) => q.queue))
    expect(listed.filter((q) => q.depth !== null)).toHaveLength(QUEUES_WITH_STATS_MAX)
    expect(listed[QUEUES_WITH_STATS_MAX]).toMatchObject({
      depth: null,
      error: expect.stringMatching(/not read/),
    })
    // The queue of 256 partitions was read alone; the others QUEUES_STATS_CALLS_AT_ONCE / 16 at a time.
    expect(stats.inFlightMax).toBe(256)
    expect(stats.inFlight).toBe(0)
    const small = { inFlight: 0, inFlightMax: 0 }
    const { base: smallBase } = await serve(false, {
      queues: queues.filter((q) => q.queue !== 'big'),
      stats: small,
    })
    expect((await fetch(`${smallBase}/api/queues`)).status).toBe(200)
    expect(small.inFlightMax).toBe(QUEUES_STATS_CALLS_AT_ONCE)
  })

  it('stops reading queue stats for a caller that left (a slow cluster: its slot is not held for minutes)', async () => {
    // 50 queues of 64 partitions, read one at a time, each 100 ms here (up to 8 s, the
    // call's deadline, while a group has no leader): the page gives up after 10 s and polls again.
    const queues: QueueRoute[] = Array.from({ length: QUEUES_WITH_STATS_MAX }, (_, i) => ({
      ...route,
      queue: `q${i}`,
      partitions: Array.from({ length: QUEUES_STATS_CALLS_AT_ONCE }, (_, partition) => ({
        ...(route.partitions[0] as QueueRoute['partitions'][0]),
        partition,
      })),
    }))
    const statsAsked: string[] = []
    const { base } = await serve(false, { queues, statsMs: 100, statsAsked })
    const left = new AbortController()
    const gone = fetch(`${base}/api/queues`, { signal: left.signal }).catch(() => undefined)
    await new Promise((r) => setTimeout(r, 150))
    left.abort()
    await gone
    await new Promise((r) => setTimeout(r, 1_000))
    // Not every queue's stats read (5 s here, 400 s with a leaderless group) for nobody.
    expect(statsAsked.length).toBeLessThanOrEqual(3)
  })

  it('shows a peeked body from its first bytes: text with a character cut in two left out, else base64', () => {
    // 'a' then 2-byte characters: PEEK_BODY_BYTES_MAX cuts the last one kept in two.
    const text = bodyText(new TextEncoder().encode(`a${'é'.repeat(PEEK_BODY_BYTES_MAX)}`))
    expect(text).toBe(`a${'é'.repeat(PEEK_BODY_CHARS - 2)}…`)
    const binary = bodyText(new Uint8Array(PEEK_BODY_BYTES_MAX * 1000).fill(0xff))
    expect(binary).toBe(`base64:${'/'.repeat(PEEK_BODY_CHARS - 8)}…`)
    expect(bodyText(new TextEncoder().encode('short'))).toBe('short')
    expect(bodyText(new TextEncoder().encode('x'.repeat(PEEK_BODY_CHARS)))).toBe('x'.repeat(PEEK_BODY_CHARS))
    // Controls escaped: a right-to-left override or a C1 CSI in a body does not act on the page.
    expect(bodyText(new TextEncoder().encode('pay \u202e0001\u009b2J'))).toBe('pay \\u202e0001\\u009b2J')
    // An escape at the cut is left out whole, not cut to `\u20`.
    const long = `${'x'.repeat(PEEK_BODY_CHARS - 4)}\u202e${'y'.repeat(10)}`
    expect(bodyText(new TextEncoder().encode(long))).toBe(`${'x'.repeat(PEEK_BODY_CHARS - 4)}…`)
  })

  it('runs a bounded number of cluster calls at once, lines up a bounded number, refuses the rest with 429', async () => {
    let release = () => {}
    const hold = new Promise<void>((r) => (release = r))
    const { base, calls } = await serve(false, { hold })
    const total = CLUSTER_CALLS_RUNNING_MAX + CLUSTER_CALLS_WAITING_MAX + 1
    const answered: Response[] = []
    const answers = Array.from({ length: total }, () =>
      fetch(`${base}/api/queues/jobs`).then((r) => {
        answered.push(r)
        return r
      }),
    )
    // Every call is held: the only answer is the one request that found no room.
    await vi.waitFor(
      () => expect(answered.length + calls.length).toBeGreaterThan(CLUSTER_CALLS_RUNNING_MAX),
      {
        timeout: 10_000,
      },
    )
    expect([answered.map((r) => r.status), calls.length]).toEqual([[429], CLUSTER_CALLS_RUNNING_MAX])
    const { error } = (await (answered[0] as Response).json()) as { error: { code: string; message: string } }
    expect(error).toEqual({ code: 'TOO_MANY_REQUESTS', message: expect.stringMatching(/try again/) })
    // The session needs no cluster call: it is answered meanwhile.
    expect((await fetch(`${base}/api/session`)).status).toBe(200)
    release()
    const statuses = (await Promise.all(answers)).map((r) => r.status)
    expect(statuses.filter((s) => s === 200)).toHaveLength(total - 1)
    expect(calls).toHaveLength(total - 1)
  })

  it('answers 401 to an Authorization header that is not printable ASCII, without echoing it', async () => {
    for (const auth of [true, false]) {
      const { base, opened } = await serve(auth)
      const r = await fetch(`${base}/api/cluster`, { headers: { authorization: 'Bearer sécret-tökén' } })
      const text = await r.text()
      expect([auth, r.status, JSON.parse(text).error.code]).toEqual([auth, 401, 'UNAUTHENTICATED'])
      expect(text).not.toMatch(/cret-t/)
      expect(opened).toEqual([])
    }
  })

  it('with auth: 401 without a token or with an unknown one, reads with any known token', async () => {
    const { base, opened } = await serve(true)
    const none = await fetch(`${base}/api/cluster`)
    expect([none.status, none.headers.get('www-authenticate')]).toEqual([401, 'Bearer realm="mq"'])
    const wrong = await fetch(`${base}/api/cluster`, { headers: bearer('wrong-token') })
    expect([wrong.status, wrong.headers.get('www-authenticate')]).toEqual([401, 'Bearer realm="mq"'])
    expect(opened).toEqual([])
    const session = (await (
      await fetch(`${base}/api/session`, { headers: bearer(APP) })
    ).json()) as SessionInfo
    expect(session).toMatchObject({ auth: true, tokenName: 'app', roles: ['consumer:jobs'], admin: false })
    const detail = (await (
      await fetch(`${base}/api/queues/jobs`, { headers: bearer(APP) })
    ).json()) as QueueDetail
    expect(detail.depth).toEqual({ ready: 3, delayed: 1, leased: 1, dead: 1, waiting: 2, oldestAgeMs: 50 })
    expect(detail.partitions).toEqual([
      { partition: 0, groupId: 1, leaderId: 'n2', messages: 6, windowLeases: 0, waiting: 2 },
    ])
    expect(detail.history).toHaveLength(1)
    expect(opened).toEqual([APP])
  })

  it('refuses an action not sent as JSON, an empty one too (what another site can make a browser send)', async () => {
    const { base, calls } = await serve(true)
    for (const type of [
      undefined,
      'application/x-www-form-urlencoded',
      'text/plain',
      'multipart/form-data',
      'application/jsonp',
    ]) {
      const r = await fetch(`${base}/api/queues/jobs/purge`, {
        method: 'POST',
        headers: { ...bearer(ADMIN), ...(type ? { 'content-type': type } : {}) },
      })
      expect(r.status).toBe(415)
      expect(await r.json()).toMatchObject({ error: { code: 'UNSUPPORTED_MEDIA_TYPE' } })
    }
    expect(calls).toEqual([])
    // The media type in another case, with parameters: taken (HTTP compares it so).
    for (const type of ['Application/JSON', 'application/json; charset=UTF-8', ' application/json ']) {
      const r = await fetch(`${base}/api/queues/jobs/purge`, {
        method: 'POST',
        headers: { ...bearer(ADMIN), 'content-type': type },
      })
      expect(r.status, type).toBe(200)
    }
  })

  it('with auth: calls the cluster with a token whose scheme is sent in another case', async () => {
    const { base, calls, opened } = await serve(true)
    const read = await fetch(`${base}/api/queues/jobs`, { headers: { authorization: `bearer ${APP}` } })
    expect(read.status).toBe(200)
    const purged = await fetch(`${base}/api/queues/jobs/purge`, {
      method: 'POST',
      headers: { authorization: `BEARER ${ADMIN}`, 'content-type': 'application/json' },
    })
    expect(purged.status).toBe(200)
    expect(calls).toEqual(['describe jobs', 'purge jobs'])
    // Each with the token authenticated, not without one (the cluster would refuse it: 401).
    expect(opened).toEqual([APP, ADMIN])
  })

  it("counts the groups' partitions without listing every queue when the cluster holds many", async () => {
    const { base, calls } = await serve(false, { groupPartitions: NAMED_PARTITIONS_MAX + 1 })
    const cluster = (await (await fetch(`${base}/api/cluster`)).json()) as ClusterInfo
    expect(cluster.groups[0]).toMatchObject({ partitionCount: NAMED_PARTITIONS_MAX + 1, partitions: [] })
    expect(calls).not.toContain('list')
  })

  it("names a scoped token's partitions however many the cluster holds; an admin's only counted", async () => {
    const many = { groupPartitions: NAMED_PARTITIONS_MAX + 1 }
    const scoped = await serve(true, many)
    const mine = (await (
      await fetch(`${scoped.base}/api/cluster`, { headers: bearer(APP) })
    ).json()) as ClusterInfo
    expect(mine.groups[0]).toMatchObject({ partitionCount: NAMED_PARTITIONS_MAX + 1, partitions: ['jobs/0'] })
    const admin = await serve(true, many)
    const all = (await (
      await fetch(`${admin.base}/api/cluster`, { headers: bearer(ADMIN) })
    ).json()) as ClusterInfo
    expect(all.groups[0]).toMatchObject({ partitions: [] })
    expect(admin.calls).not.toContain('list')
  })

  it("counts a scoped token's partitions, naming none, once its queues hold more than the cluster view names", async () => {
    // 1,001 one-partition queues of the token: more than NAMED_PARTITIONS_MAX partitions.
    const queues = Array.from({ length: NAMED_PARTITIONS_MAX + 1 }, (_, i) => ({
      ...route,
      queue: `jobs${String(i).padStart(4, '0')}`,
    }))
    const { base } = await serve(true, { groupPartitions: NAMED_PARTITIONS_MAX + 1, queues })
    const mine = (await (await fetch(`${base}/api/cluster`, { headers: bearer(APP) })).json()) as ClusterInfo
    // Not 1,000 of its 1,001 partitions named as if they were all of them.
    expect(mine.groups[0]?.partitions).toEqual([])
  })

  it("logs each admin action with the browser's address (the gRPC audit line names this node)", async () => {
    const { log, lines } = capturedLog()
    const { base } = await serve(true, { log })
    expect((await fetch(`${base}/api/queues/jobs/purge`, post(ADMIN, {}))).status).toBe(200)
    expect((await fetch(`${base}/api/replication`, post(ADMIN, { factor: 8 }))).status).toBe(400)
    expect((await fetch(`${base}/api/queues/jobs/purge`, post(APP, {}))).status).toBe(403)
    // Done or failed, each action the cluster was asked for; a refused caller asked it nothing.
    expect(lines.map((l) => l.msg)).toEqual([
      'console: POST /api/queues/jobs/purge by token:ops from 127.0.0.1: done',
      'console: POST /api/replication by token:ops from 127.0.0.1: failed: the replication factor must be an integer from 1 to 7, not 8',
    ])
    expect(lines[0]).toMatchObject({ audit: 'console', path: '/api/queues/jobs/purge', from: '127.0.0.1' })
  })

  it('with auth: admin actions need the admin role, and pass the admin token on to the cluster', async () => {
    const { base, calls, opened } = await serve(true)
    const denied = await fetch(`${base}/api/queues/jobs/purge`, post(APP, {}))
    expect(denied.status).toBe(403)
    expect(calls).toEqual([])
    const purged = await fetch(`${base}/api/queues/jobs/purge`, post(ADMIN, {}))
    expect(await purged.json()).toEqual({
      ok: true,
      message: 'purged 3 ready (and waiting) messages of jobs',
    })
    const moved = await fetch(`${base}/api/groups/1/transfer`, post(ADMIN, { toNodeId: 'n3' }))
    expect(moved.status).toBe(200)
    const resized = await fetch(`${base}/api/meta-voters`, post(ADMIN, { voters: 5 }))
    expect(await resized.json()).toEqual({
      ok: true,
      message: 'the meta group goes from 3 voters (n1, n2, n3) to 5',
    })
    expect((await fetch(`${base}/api/meta-voters`, post(APP, { voters: 5 }))).status).toBe(403)
    const replicated = await fetch(`${base}/api/replication`, post(ADMIN, { factor: 5 }))
    expect(await replicated.json()).toEqual({
      ok: true,
      message:
        'replication factor 5 (was 3): data groups grow or shrink to 5 replicas, one at a time, as live nodes allow',
    })
    expect((await fetch(`${base}/api/replication`, post(APP, { factor: 5 }))).status).toBe(403)
    const eight = await fetch(`${base}/api/replication`, post(ADMIN, { factor: 8 }))
    expect(eight.status).toBe(400)
    expect(((await eight.json()) as { error: { message: string } }).error.message).toMatch(/1 to 7, not 8/)
    const even = await fetch(`${base}/api/meta-voters`, post(ADMIN, { voters: 4 }))
    expect(even.status).toBe(400)
    expect(((await even.json()) as { error: { message: string } }).error.message).toMatch(/not 4/)
    const updated = await fetch(
      `${base}/api/queues/jobs/update`,
      post(ADMIN, { partitions: 3, maxDeliveries: 4, deliveryRate: 25, retryBackoffMinMs: 500 }),
    )
    expect(updated.status).toBe(200)
    const paused = await fetch(`${base}/api/queues/jobs/update`, post(ADMIN, { paused: true }))
    expect(await paused.json()).toEqual({
      ok: true,
      message: 'paused delivery of jobs: consumers get nothing until it is resumed',
    })
    const resumed = await fetch(`${base}/api/queues/jobs/update`, post(ADMIN, { paused: false }))
    expect(await resumed.json()).toEqual({ ok: true, message: 'resumed delivery of jobs' })
    expect((await fetch(`${base}/api/queues/jobs/update`, post(APP, { paused: true }))).status).toBe(403)
    const draining = await fetch(`${base}/api/nodes/n3/drain`, post(ADMIN, {}))
    expect(await draining.json()).toEqual({ ok: true, message: 'draining node n3: 2 replicas still to move' })
    const drained = await fetch(`${base}/api/nodes/n4/drain`, post(ADMIN, {}))
    expect(await drained.json()).toEqual({ ok: true, message: 'node n4 is drained: it holds no replica' })
    const undrained = await fetch(`${base}/api/nodes/n3/undrain`, post(ADMIN, {}))
    expect(await undrained.json()).toEqual({ ok: true, message: 'node n3 is no longer draining' })
    const notDraining = await fetch(`${base}/api/nodes/n4/undrain`, post(ADMIN, {}))
    expect(await notDraining.json()).toEqual({ ok: true, message: 'node n4 was not draining' })
    expect((await fetch(`${base}/api/nodes/n3/undrain`, post(APP, {}))).status).toBe(403)
    const removed = await fetch(`${base}/api/nodes/n4/remove`, post(ADMIN, {}))
    expect(await removed.json()).toEqual({ ok: true, message: 'removed node n4' })
    const alive = await fetch(`${base}/api/nodes/n1/remove`, post(ADMIN, {}))
    expect(alive.status).toBe(400)
    expect(((await alive.json()) as { error: { message: string } }).error.message).toMatch(/n1 is alive/)
    expect((await fetch(`${base}/api/nodes/n4/remove`, post(APP, {}))).status).toBe(403)
    expect(calls).toEqual([
      'purge jobs',
      'transfer 1 n3',
      'meta-voters 5',
      'replication 5',
      'replication 8',
      'meta-voters 4',
      'update jobs {"partitions":3,"maxDeliveries":4,"deliveryRate":25,"retryBackoffMinMs":500}',
      'update jobs {"paused":true}',
      'update jobs {"paused":false}',
      'drain n3',
      'drain n4',
      'undrain n3',
      'undrain n4',
      'remove n4',
      'remove n1',
    ])
    expect(opened).toEqual([ADMIN])
  })

  it('refuses bad input with 400 and a reason before calling the cluster; maps cluster errors', async () => {
    const { base, calls } = await serve(true)
    const cases: [string, unknown][] = [
      ['/api/queues', { name: '' }],
      ['/api/queues', { name: 'q', config: { partitions: -1 } }],
      ['/api/queues', { name: 'q', config: { colour: 'red' } }],
      ['/api/queues', { name: 'q', config: { paused: 1 } }],
      ['/api/queues', [1, 2]],
      ['/api/queues/jobs/update', {}],
      ['/api/queues/jobs/update', { engine: 'memory' }],
      ['/api/queues/jobs/update', { partitions: 2.5 }],
      ['/api/queues/jobs/update', { paused: 'yes' }],
      ['/api/scale', { groups: 0 }],
      // Past uint32 on the wire (it would fail to encode); uint64 fields take more.
      ['/api/scale', { groups: 2 ** 32 }],
      ['/api/queues/jobs/update', { maxDeliveries: 2 ** 32 }],
      ['/api/meta-voters', { voters: 'five' }],
      ['/api/replication', { factor: -1 }],
      ['/api/groups/x/transfer', { toNodeId: 'n2' }],
      ['/api/groups/1/transfer', { toNodeId: '' }],
      ['/api/nodes/-n1/drain', {}],
      ['/api/nodes/n1%20n2/remove', {}],
    ]
    await expectAll400(base, cases)
    const notJson = await fetch(`${base}/api/scale`, {
      method: 'POST',
      headers: { ...bearer(ADMIN), 'content-type': 'application/json' },
      body: '{',
    })
    expect(notJson.status).toBe(400)
    // A value nested deep enough to overflow the stack if serialized (under the body's bound):
    // 400 with its kind, not a 502 (an audit).
    const deep = await fetch(`${base}/api/scale`, {
      method: 'POST',
      headers: { ...bearer(ADMIN), 'content-type': 'application/json' },
      body: `{"groups":${'['.repeat(32_000)}${']'.repeat(32_000)}}`,
    })
    expect(deep.status).toBe(400)
    expect(((await deep.json()) as { error: { message: string } }).error.message).toMatch(/got an array/)
    const big = await fetch(`${base}/api/scale`, post(ADMIN, { groups: 1, pad: 'x'.repeat(70_000) }))
    expect(big.status).toBe(413)
    expect(calls).toEqual([])
    const exists = await fetch(
      `${base}/api/queues`,
      post(ADMIN, { name: 'taken', config: { partitions: 2, paused: true, orderedKeys: true } }),
    )
    expect(exists.status).toBe(409)
    expect(calls).toEqual(['create taken {"partitions":2,"paused":true,"orderedKeys":true}'])
    expect((await fetch(`${base}/api/nothing`, { headers: bearer(ADMIN) })).status).toBe(404)
    expect((await fetch(`${base}/api/nodes/n1/explode`, post(ADMIN, {}))).status).toBe(404)
    expect((await fetch(`${base}/api/cluster`, { method: 'PUT', headers: bearer(ADMIN) })).status).toBe(405)
  })

  it('refuses a field an action does not take (a setting beside "config") instead of dropping it', async () => {
    // `{ "name": "jobs", "paused": true }` created a queue that was not paused, with a 200.
    const { base, calls } = await serve(true)
    await expectAll400(base, [
      ['/api/queues', { name: 'q', paused: true }],
      ['/api/queues', { name: 'q', partitions: 8 }],
      ['/api/scale', { groups: 2, group: 3 }],
      ['/api/meta-voters', { voters: 3, force: true }],
      ['/api/replication', { factor: 3, replicas: 5 }],
      ['/api/groups/1/transfer', { toNodeId: 'n2', groupId: 2 }],
    ])
    expect(calls).toEqual([])
    const bad = await fetch(`${base}/api/queues`, post(ADMIN, { name: 'q', paused: true }))
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(
      /"paused" is not a field of this action; it takes name, config/,
    )
  })

  it('answers a route asked with the wrong method 405 naming the methods it takes, an unknown one 404', async () => {
    // A read asked with POST, or an action with GET, was answered 404 "no API at …" (there is
    // one), and a 405 named no method in an Allow header (RFC 9110 §15.5.6).
    const { base, calls } = await serve(true)
    const cases: [string, string, string][] = [
      ['POST', '/api/session', 'GET, HEAD'],
      ['POST', '/api/cluster', 'GET, HEAD'],
      ['POST', '/api/queues/jobs/peek', 'GET, HEAD'],
      ['GET', '/api/queues/jobs/purge', 'POST'],
      ['GET', '/api/scale', 'POST'],
      ['GET', '/api/nodes/n1/drain', 'POST'],
      ['PUT', '/api/cluster', 'GET, HEAD'],
      ['DELETE', '/api/queues', 'GET, HEAD, POST'],
      ['DELETE', '/api/queues/jobs/delete', 'POST'],
    ]
    for (const [method, path, allow] of cases) {
      const r = await fetch(`${base}${path}`, {
        method,
        headers: { ...bearer(ADMIN), 'content-type': 'application/json' },
        ...(method === 'GET' ? {} : { body: '{}' }),
      })
      const { error } = (await r.json()) as { error: { code: string; message: string } }
      expect([method, path, r.status, r.headers.get('allow'), error.code]).toEqual([
        method,
        path,
        405,
        allow,
        'METHOD_NOT_ALLOWED',
      ])
      expect(error.message).toContain(allow)
    }
    expect(calls).toEqual([])
    const unknown = await fetch(`${base}/api/nothing`, { method: 'PUT', headers: bearer(ADMIN) })
    expect([unknown.status, unknown.headers.get('allow')]).toEqual([404, null])
  })

  it('refuses a bad action with 400 before it takes a slot or connects (with the cluster down)', async () => {
    // The action's input was checked once its client was connected, in a cluster call's slot:
    // with the cluster down a typo in a body waited out the connect's deadline and answered
    // 503, and with every slot taken it answered 429, not the 400 saying what to fix.
    const { base, opened } = await serve(true, { clusterDown: true })
    const cases: [string, unknown][] = [
      ['/api/queues', { name: 'q', config: { partitions: -1 } }],
      ['/api/queues/jobs/update', { colour: 'red' }],
      ['/api/scale', { groups: 'six' }],
      ['/api/meta-voters', {}],
      ['/api/replication', { factor: 1.5 }],
      ['/api/groups/x/transfer', { toNodeId: 'n2' }],
      ['/api/groups/1/transfer', {}],
      ['/api/nodes/-n1/drain', {}],
    ]
    await expectAll400(base, cases)
    expect(opened).toEqual([])
    // A good one does go to the cluster (and tells it is down).
    expect((await fetch(`${base}/api/scale`, post(ADMIN, { groups: 2 }))).status).toBe(503)
    expect(opened).toEqual([ADMIN])
  })
})

describe('the console assets', () => {
  it('redirects / to the page, serves the built files with a strict policy, and nothing else', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mq-console-'))
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
    writeFileSync(join(dir, 'index.html'), '<!doctype html><title>mq</title>')
    writeFileSync(join(dir, 'app.js'), 'void 0')
    writeFileSync(join(dir, 'notes.txt'), 'not served')
    const assets = new ConsoleAssets(dir)
    const server = createServer((req, res) => {
      if (!assets.serve((req.url ?? '/').split('?')[0] ?? '/', res)) res.writeHead(418).end()
    })
    servers.push(server)
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    const a = server.address()
    const base = `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}`
    const root = await fetch(`${base}/`, { redirect: 'manual' })
    expect([root.status, root.headers.get('location')]).toEqual([302, '/console/'])
    const page = await fetch(`${base}/console/`)
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8')
    expect(page.headers.get('content-security-policy')).toMatch(/default-src 'none'; script-src 'self'/)
    expect(await page.text()).toContain('<title>mq</title>')
    expect((await fetch(`${base}/console/app.js`)).headers.get('content-type')).toMatch(/^text\/javascript/)
    expect((await fetch(`${base}/console/notes.txt`)).status).toBe(404)
    expect((await fetch(`${base}/console/..%2Findex.html`)).status).toBe(404)
    expect((await fetch(`${base}/metrics`)).status).toBe(418)
  })

  it('says how to build the page when it was not built', async () => {
    const assets = new ConsoleAssets(join(tmpdir(), 'mq-console-missing-dir'))
    expect(assets.missing).toBe(true)
    let status = 0
    let body = ''
    const res = {
      writeHead: (code: number) => {
        status = code
      },
      end: (text: string) => {
        body = text
      },
    } as unknown as ServerResponse
    expect(assets.serve('/console/', res)).toBe(true)
    expect([status, body]).toEqual([404, expect.stringContaining('pnpm --filter @mq/console build')])
  })
})
