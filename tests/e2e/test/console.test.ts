import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { MqClient } from '@mq/router-client'
import { type Browser, chromium, type Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ensureChromium } from '../src/browser'
import { freePort, LocalCluster } from '../src/cluster'
import { securedNode } from '../src/secured-cluster'

const ADMIN = 'console-admin-0123456789'
const VIEWER = 'console-viewer-0123456789'
const WATCHER = 'console-watcher-0123456789'
const SCREENSHOTS = join(import.meta.dirname, '..', 'console-screenshots')
const QUEUE = 'jobs'

interface ClusterFigures {
  metaLeaderId: string
  meta: { summary: string; voters: string[] }
  routeEpoch: number
  nodes: { nodeId: string; draining: boolean }[]
  groups: {
    groupId: number
    leaderId: string
    commitIndex: number
    partitions: string[]
    replicas: unknown[]
  }[]
}

interface Figures {
  ready: number
  delayed: number
  leased: number
  dead: number
}

// The web console in Debian's Chromium against a real 3-node cluster with tokens: the page
// shows what the JSON API answers, updates without a reload, and purges after a confirmation.
describe('the web console in a browser', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mq-e2e-console-'))
  const httpPorts = new Map<string, number>()
  let cluster: LocalCluster
  let client: MqClient
  let browser: Browser
  let page: Page
  let base: string
  /** Leases a consumer holds through the test (read from the API once they settled). */
  let held = 0
  /** Ready messages after the leases settled. */
  let ready = 0
  /** Messages the first consumer's handler took (each acked, by the time it closed). */
  let acked = 0

  /** The console API's answer at `path`, with `token` (a POST of `body` when given). */
  async function api<T>(path: string, token = VIEWER, body?: unknown): Promise<T> {
    const r = await fetch(`${base}${path}`, {
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { method: 'POST', body: JSON.stringify(body) }),
    })
    expect(r.status, `${path}: ${await r.clone().text()}`).toBe(200)
    return (await r.json()) as T
  }

  /** The figures of a table row the page shows (`data-testid` = `row`). */
  async function rowFigures(row: string): Promise<Figures> {
    const cells = page.getByTestId(row)
    const read = async (field: string) =>
      Number(((await cells.locator(`[data-field="${field}"]`).textContent()) ?? '').replace(/,/g, ''))
    return {
      ready: await read('ready'),
      delayed: await read('delayed'),
      leased: await read('leased'),
      dead: await read('dead'),
    }
  }

  /**
   * '' when the open view shows what the API answers now, else both: the meta leader and
   * route epoch ('cluster'), or each group's leader, commit index and partitions ('groups').
   */
  function mismatch(view: 'cluster' | 'groups'): () => Promise<string> {
    return async () => {
      const c = await api<ClusterFigures>('/api/cluster')
      const text = async (testId: string) => (await page.getByTestId(testId).textContent()) ?? ''
      let shown: string[]
      let expected: string[]
      if (view === 'cluster') {
        shown = [await text('meta-leader'), await text('meta-group'), await text('route-epoch')]
        expected = [c.metaLeaderId, c.meta.summary, String(c.routeEpoch)]
      } else {
        shown = []
        for (const g of c.groups) {
          const row = page.getByTestId(`group-${g.groupId}`)
          const field = (f: string) => row.locator(`[data-field="${f}"]`).textContent()
          shown.push(
            `${g.groupId}:${await field('leader')}:${await field('commit')}:${await field('partitions')}`,
          )
        }
        expected = c.groups.map(
          (g) => `${g.groupId}:${g.leaderId}:${g.commitIndex}:${g.partitions.join(' ') || '–'}`,
        )
      }
      const a = JSON.stringify(shown)
      const b = JSON.stringify(expected)
      return a === b ? '' : `page ${a} vs API ${b}`
    }
  }

  beforeAll(async () => {
    const executablePath = ensureChromium()
    mkdirSync(SCREENSHOTS, { recursive: true })
    const secured = await securedNode(
      dir,
      [
        { name: 'ops', token: ADMIN, roles: ['admin'] },
        { name: 'viewer', token: VIEWER, roles: [`consumer:${QUEUE}`] },
        { name: 'watcher', token: WATCHER, roles: [`viewer:${QUEUE}`] },
      ],
      { tls: false, peerToken: 'console-peer-secret-0123456789' },
    )
    for (const id of ['n1', 'n2', 'n3']) httpPorts.set(id, await freePort())
    cluster = await LocalCluster.start({
      nodes: 3,
      serverArgs: secured.serverArgs,
      nodeArgs: (id) => ['--http-listen', `127.0.0.1:${httpPorts.get(id)}`],
    })
    base = `http://127.0.0.1:${httpPorts.get('n2')}`
    client = await MqClient.connect({ servers: cluster.servers, token: ADMIN, deadlineMs: 30_000 })
    await client.admin.createQueue(QUEUE, { partitions: 2, visibilityTimeoutMs: 120_000 })
    // Round-robin, so that both partitions hold messages: the holder below then has no idle
    // partition to long-poll, and the late sends stay ready (sticky would fill one partition).
    const producer = client.producer(QUEUE, { keyless: 'round-robin' })
    await Promise.all(
      Array.from({ length: 90 }, (_, i) => producer.send({ body: `m${i}`, weight: i % 3 === 0 ? 1 : 3 })),
    )
    // Some leases for the achieved shares, then four held in flight (no expiry within the test).
    const sub = await client.consume(
      QUEUE,
      () => {
        acked++
      },
      { concurrency: 4, prefetch: 4 },
    )
    while (acked < 30) await new Promise((r) => setTimeout(r, 20))
    await sub.close()
    const holder = client.consumer(QUEUE, { prefetch: 4 })
    const it = holder[Symbol.asyncIterator]()
    for (let i = 0; i < 4; i++) await it.next()
    browser = await chromium.launch({ executablePath, args: ['--no-sandbox', '--disable-gpu'] })
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } })
  }, 600_000)

  afterAll(async () => {
    await browser?.close()
    await client?.close()
    await cluster?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  it('asks for a token, then shows the cluster and its groups as the API reports them', async () => {
    await page.goto(`${base}/`)
    await expect.poll(() => page.getByTestId('error').textContent()).toMatch(/UNAUTHENTICATED.*enter a token/)
    await page.getByTestId('token').fill(VIEWER)
    await page.getByTestId('use-token').click()
    await expect.poll(() => page.getByTestId('session').textContent()).toMatch(/token "viewer".*read-only/)
    // The controller may still be balancing leaders: page and API agree once it settled.
    await expect.poll(mismatch('cluster'), { timeout: 20_000 }).toBe('')
    const cluster = await api<ClusterFigures>('/api/cluster')
    expect(cluster.nodes.map((n) => n.nodeId)).toEqual(['n1', 'n2', 'n3'])
    expect(await page.locator('[data-testid^="node-n"]').count()).toBe(3)
    expect(await page.locator('[data-testid^="drain-"], [data-testid^="remove-"]').count()).toBe(0)
    await page.screenshot({ path: join(SCREENSHOTS, 'cluster.png'), fullPage: true })

    await page.getByRole('link', { name: 'Data groups' }).click()
    await expect.poll(mismatch('groups'), { timeout: 20_000 }).toBe('')
    const groups = (await api<ClusterFigures>('/api/cluster')).groups
    expect(groups.flatMap((g) => g.partitions).sort()).toEqual([`${QUEUE}/0`, `${QUEUE}/1`])
    // The groups that took the writes report their indexes (the leader's last heartbeat, every
    // 500 ms: a meta leader that took over, or a group leader that changed, reports at its next).
    const reported = async () =>
      (await api<ClusterFigures>('/api/cluster')).groups
        .filter((x) => x.partitions.length > 0)
        .every((g) => g.commitIndex > 0)
    await expect.poll(reported, { timeout: 10_000 }).toBe(true)
    expect(await page.locator('[data-testid^="transfer-"]').count()).toBe(0)
    await page.screenshot({ path: join(SCREENSHOTS, 'groups.png'), fullPage: true })
  })

  it('shows a queue per weight as the API does, with the share chart, and updates without a reload', async () => {
    await page.getByRole('link', { name: 'Queues' }).click()
    await page.getByRole('link', { name: QUEUE }).click()
    // The held leases settle within a moment (each partition's fetch loop leases up to the prefetch).
    let previous = ''
    await expect
      .poll(async () => {
        const d = (await api<{ depth: Figures }>(`/api/queues/${QUEUE}`)).depth
        const now = `${d.ready} ${d.leased} ${d.delayed} ${d.dead}`
        const same = now === previous
        previous = now
        return same
      })
      .toBe(true)
    const detail = await api<{ depth: Figures; weights: (Figures & { weight: number })[] }>(
      `/api/queues/${QUEUE}`,
    )
    held = detail.depth.leased
    ready = detail.depth.ready
    expect(held).toBeGreaterThanOrEqual(4)
    // 90 produced, at least 30 acked, and more may finish while the consumer closes: every
    // message the handler took is acked, the rest are ready or held.
    expect(ready + held).toBeGreaterThanOrEqual(90 - acked)
    expect(ready + held).toBeLessThanOrEqual(60)
    expect(detail.depth).toMatchObject({ delayed: 0, dead: 0 })
    await expect.poll(() => rowFigures('queue-depth')).toEqual({ ready, delayed: 0, leased: held, dead: 0 })
    for (const w of detail.weights) {
      expect(await rowFigures(`weight-${w.weight}`)).toEqual({
        ready: w.ready,
        delayed: w.delayed,
        leased: w.leased,
        dead: w.dead,
      })
    }
    expect(detail.weights.map((w) => w.weight)).toEqual([1, 3])
    // Two weights, a target and an achieved line each, once the page has two samples.
    await expect
      .poll(() => page.locator('[data-testid="share-chart"] polyline').count(), { timeout: 10_000 })
      .toBe(4)
    await expect
      .poll(
        async () =>
          (await page.locator('polyline[data-kind="achieved"]').first().getAttribute('points'))?.split(' ')
            .length ?? 0,
        { timeout: 10_000 },
      )
      .toBeGreaterThanOrEqual(2)

    const reloads: string[] = []
    page.on('framenavigated', (f) => reloads.push(f.url()))
    await Promise.all(
      Array.from({ length: 10 }, (_, i) => client.producer(QUEUE).send({ body: `late${i}`, weight: 1 })),
    )
    await expect
      .poll(() => rowFigures('queue-depth'), { timeout: 10_000 })
      .toMatchObject({ ready: ready + 10 })
    // The partitions' replicated counters make the rates: the ten late ones were enqueued
    // within the last minute of samples.
    await expect
      .poll(async () => Number.parseFloat((await page.getByTestId('rate-enqueued').textContent()) ?? ''), {
        timeout: 10_000,
      })
      .toBeGreaterThan(0)
    expect(reloads).toEqual([])
    // A peek at the next ready messages lists what the API lists and delivers none of them.
    await page.getByTestId('peek').click()
    const peeked = await api<{ partition: number; id: number; deliveryCount: number }[]>(
      `/api/queues/${QUEUE}/peek`,
    )
    expect(peeked.length).toBeGreaterThan(0)
    await expect.poll(() => page.locator('tr[data-testid^="peeked-"]').count()).toBe(peeked.length)
    expect(await page.getByTestId(`peeked-${peeked[0]?.partition}-${peeked[0]?.id}`).count()).toBe(1)
    expect(await rowFigures('queue-depth')).toMatchObject({ ready: ready + 10, leased: held })
    await page.screenshot({ path: join(SCREENSHOTS, 'queue.png'), fullPage: true })
  })

  it('offers admin actions only to an admin token, and purges only after a confirmation', async () => {
    expect(await page.getByTestId('purge').count()).toBe(0)
    const refused = await fetch(`${base}/api/queues/${QUEUE}/purge`, {
      method: 'POST',
      headers: { authorization: `Bearer ${VIEWER}`, 'content-type': 'application/json' },
      body: '{}',
    })
    expect(refused.status).toBe(403)
    // A token that may only look is offered no peek, and told why.
    await page.getByTestId('token').fill(WATCHER)
    await page.getByTestId('use-token').click()
    await expect.poll(() => page.getByTestId('session').textContent()).toMatch(/token "watcher"/)
    await expect
      .poll(() => page.getByTestId('no-peek').textContent())
      .toMatch(/a token that may consume this queue; token "watcher" may not/)
    expect(await page.getByTestId('peek').count()).toBe(0)

    await page.getByTestId('token').fill(ADMIN)
    await page.getByTestId('use-token').click()
    await expect.poll(() => page.getByTestId('session').textContent()).toMatch(/token "ops".*admin/)
    await page.getByTestId('purge').click()
    await expect(page.getByTestId('confirm').isVisible()).resolves.toBe(true)
    await page.getByTestId('confirm-no').click()
    await expect.poll(() => page.getByTestId('notice').textContent()).toBe('cancelled')
    expect((await api<{ depth: Figures }>(`/api/queues/${QUEUE}`)).depth.ready).toBe(ready + 10)

    await page.getByTestId('purge').click()
    await expect
      .poll(() => page.getByTestId('confirm-text').textContent())
      .toMatch(/Delete every ready message of/)
    await page.screenshot({ path: join(SCREENSHOTS, 'confirm.png') })
    await page.getByTestId('confirm-yes').click()
    await expect
      .poll(() => page.getByTestId('notice').textContent())
      .toBe(`purged ${ready + 10} ready (and waiting) messages of ${QUEUE}`)
    await expect
      .poll(() => rowFigures('queue-depth'))
      .toEqual({ ready: 0, delayed: 0, leased: held, dead: 0 })
    expect((await api<{ depth: Figures }>(`/api/queues/${QUEUE}`)).depth).toMatchObject({
      ready: 0,
      leased: held,
    })
    await page.screenshot({ path: join(SCREENSHOTS, 'purged.png'), fullPage: true })

    // Pause and resume delivery, each after a confirmation: the badge and the API agree.
    expect(await page.getByTestId('paused').count()).toBe(0)
    await page.getByTestId('pause').click()
    await expect.poll(() => page.getByTestId('confirm-text').textContent()).toMatch(/Pause delivery of/)
    await page.getByTestId('confirm-yes').click()
    await expect
      .poll(() => page.getByTestId('notice').textContent())
      .toBe(`paused delivery of ${QUEUE}: consumers get nothing until it is resumed`)
    await expect.poll(() => page.getByTestId('paused').count(), { timeout: 10_000 }).toBe(1)
    expect((await api<{ config: { paused: boolean } }>(`/api/queues/${QUEUE}`)).config.paused).toBe(true)
    await page.screenshot({ path: join(SCREENSHOTS, 'paused.png'), fullPage: true })
    await page.getByTestId('resume').click()
    await page.getByTestId('confirm-yes').click()
    await expect.poll(() => page.getByTestId('notice').textContent()).toBe(`resumed delivery of ${QUEUE}`)
    await expect.poll(() => page.getByTestId('paused').count(), { timeout: 10_000 }).toBe(0)
    expect((await api<{ config: { paused: boolean } }>(`/api/queues/${QUEUE}`)).config.paused).toBe(false)
  })

  it('scales the data groups from the groups view, after a confirmation', async () => {
    await page.getByRole('link', { name: 'Data groups' }).click()
    await page.getByTestId('scale-groups').fill('4')
    await page.getByTestId('scale').click()
    await expect.poll(() => page.getByTestId('confirm-text').textContent()).toMatch(/Scale to 4 data groups/)
    await page.getByTestId('confirm-yes').click()
    await expect.poll(() => page.getByTestId('notice').textContent()).toMatch(/^scaling to 4 data groups: /)
    await expect
      .poll(async () => (await api<ClusterFigures>('/api/cluster', ADMIN)).groups.length, { timeout: 20_000 })
      .toBe(4)
    await expect.poll(() => page.locator('[data-testid^="group-"]').count(), { timeout: 10_000 }).toBe(4)
    await page.getByRole('link', { name: 'Cluster' }).click()
    await expect.poll(() => page.getByTestId('group-count').textContent()).toBe('4')
    await page.screenshot({ path: join(SCREENSHOTS, 'scaled.png'), fullPage: true })
  })

  it('resizes the meta group from the cluster view, after a confirmation', async () => {
    const voters = async () => (await api<ClusterFigures>('/api/cluster', ADMIN)).meta.voters.length
    await page.getByRole('link', { name: 'Cluster' }).click()
    // An admin may drain a node that holds replicas, and remove one only once it is down and
    // holds nothing: every node here is up and holds some.
    await expect.poll(() => page.locator('[data-testid^="drain-n"]').count()).toBe(3)
    expect(await page.getByTestId('drain-n2').isDisabled()).toBe(false)
    expect(await page.getByTestId('remove-n2').isDisabled()).toBe(true)
    await page.getByTestId('meta-voters').selectOption('1')
    await page.getByTestId('set-meta-voters').click()
    await expect
      .poll(() => page.getByTestId('confirm-text').textContent())
      .toMatch(/Make the meta group keep 1 voters\?/)
    await page.getByTestId('confirm-yes').click()
    await expect
      .poll(() => page.getByTestId('notice').textContent())
      .toMatch(/^the meta group goes from 3 voters/)
    await expect.poll(voters, { timeout: 20_000 }).toBe(1)
    await expect
      .poll(() => page.getByTestId('meta-group').textContent(), { timeout: 10_000 })
      .toMatch(/^n\d$/)
    // Back to 3 (the API, as an admin): the other two voters are added again.
    expect((await api<{ ok: boolean }>('/api/meta-voters', ADMIN, { voters: 3 })).ok).toBe(true)
    await expect.poll(voters, { timeout: 30_000 }).toBe(3)
  })

  it('sets the replication factor from the cluster view, after a confirmation', async () => {
    const replicas = async () =>
      (await api<ClusterFigures>('/api/cluster', ADMIN)).groups
        .filter((g) => g.groupId !== 0)
        .map((g) => g.replicas.length)
    await page.getByRole('link', { name: 'Cluster' }).click()
    await expect.poll(() => page.getByTestId('replication').textContent()).toBe('3 replicas per data group')
    await page.getByTestId('replication-factor').selectOption('1')
    await page.getByTestId('set-replication-factor').click()
    await expect
      .poll(() => page.getByTestId('confirm-text').textContent())
      .toMatch(/Set the replication factor to 1\?/)
    await page.getByTestId('confirm-yes').click()
    await expect
      .poll(() => page.getByTestId('notice').textContent())
      .toMatch(/^replication factor 1 \(was 3\): data groups grow or shrink to 1 replica,/)
    await expect
      .poll(() => page.getByTestId('replication').textContent(), { timeout: 10_000 })
      .toBe('1 replica per data group')
    await expect.poll(async () => (await replicas()).every((n) => n === 1), { timeout: 30_000 }).toBe(true)
    // Back to 3 (the API, as an admin): every group grows again.
    expect((await api<{ ok: boolean }>('/api/replication', ADMIN, { factor: 3 })).ok).toBe(true)
    await expect.poll(async () => (await replicas()).every((n) => n === 3), { timeout: 60_000 }).toBe(true)
  })

  it('drains a node and takes the drain back from the cluster view, after confirmations', async () => {
    const draining = async () =>
      (await api<ClusterFigures>('/api/cluster', ADMIN)).nodes.find((n) => n.nodeId === 'n3')?.draining
    await page.getByRole('link', { name: 'Cluster' }).click()
    await page.getByTestId('drain-n3').click()
    await expect.poll(() => page.getByTestId('confirm-text').textContent()).toMatch(/Drain node n3\?/)
    await page.getByTestId('confirm-yes').click()
    await expect.poll(() => page.getByTestId('notice').textContent()).toMatch(/node n3/)
    expect(await draining()).toBe(true)
    // Every other node holds every group already: nothing moves, and n3 shows as draining.
    await expect
      .poll(() => page.getByTestId('node-n3').textContent(), { timeout: 10_000 })
      .toMatch(/draining/)
    await page.getByTestId('undrain-n3').click()
    await expect.poll(() => page.getByTestId('confirm-text').textContent()).toMatch(/Undrain node n3\?/)
    await page.getByTestId('confirm-yes').click()
    await expect.poll(() => page.getByTestId('notice').textContent()).toBe('node n3 is no longer draining')
    expect(await draining()).toBe(false)
    await expect.poll(() => page.getByTestId('undrain-n3').count(), { timeout: 10_000 }).toBe(0)
  })
})
