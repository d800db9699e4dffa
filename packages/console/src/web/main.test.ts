import { afterEach, describe, expect, it, vi } from 'vitest'

// The page (main.ts) driven in Node on fake timers, with a stand-in for the few DOM objects it
// and h() touch, and a fetch whose answers come from the test after `answerMs`.

interface FakeElement {
  value: string
  textContent: string
  returnValue: string
  onclose: (() => void) | null
  readonly dataset: Record<string, string>
  readonly attrs: Map<string, string>
  readonly listeners: Map<string, (event: unknown) => void>
  children: unknown[]
}

function fakeElement(created: FakeElement[]): FakeElement & Record<string, unknown> {
  const el = {
    value: '',
    textContent: '',
    returnValue: '',
    onclose: null,
    dataset: {},
    attrs: new Map<string, string>(),
    listeners: new Map<string, (event: unknown) => void>(),
    children: [] as unknown[],
    classList: { toggle: () => {} },
    addEventListener: (type: string, fn: (event: unknown) => void) => el.listeners.set(type, fn),
    setAttribute: (key: string, value: string) => el.attrs.set(key, value),
    append: (...children: unknown[]) => el.children.push(...children),
    replaceChildren: (...children: unknown[]) => {
      el.children = children
    },
    contains: () => false,
    showModal: () => {},
  }
  created.push(el)
  return el
}

/** An answer the fake fetch gives as an HTTP error. */
class Failure {
  constructor(readonly status: number) {}
}

/** An answer the fake fetch gives after `ms` (read when asked, answered late). */
class Slow {
  constructor(
    readonly ms: number,
    readonly body: unknown,
  ) {}
}

/** The element with `data-testid` `id` in the tree under `el` (as drawn in the page). */
function findIn(el: unknown, id: string): FakeElement | undefined {
  if (typeof el !== 'object' || el === null || !('attrs' in el)) return undefined
  const e = el as FakeElement
  if (e.attrs.get('data-testid') === id) return e
  for (const c of e.children) {
    const found = findIn(c, id)
    if (found) return found
  }
  return undefined
}

/** Opens the page at `hash`; `answer` gives each API call's JSON body. */
async function openPage(
  hash: string,
  answerMs: number,
  answer: (path: string, authorization?: string) => unknown,
) {
  vi.useFakeTimers()
  vi.resetModules()
  const created: FakeElement[] = []
  const byId = new Map<string, FakeElement>()
  const windowListeners = new Map<string, () => void>()
  const fetches = {
    inFlight: 0,
    mostInFlight: 0,
    sessions: 0,
    paths: [] as string[],
    bodies: new Map<string, unknown>(),
  }
  let currentHash = hash
  vi.stubGlobal('document', {
    getElementById: (id: string) => {
      if (!byId.has(id)) byId.set(id, fakeElement(created))
      return byId.get(id)
    },
    createElement: () => fakeElement(created),
    createElementNS: () => fakeElement(created),
    querySelectorAll: () => [],
    activeElement: null,
    hidden: false,
  })
  vi.stubGlobal('HTMLSelectElement', class {})
  const stored = new Map<string, string>()
  vi.stubGlobal('sessionStorage', {
    getItem: (key: string) => stored.get(key) ?? null,
    setItem: (key: string, value: string) => stored.set(key, value),
    removeItem: (key: string) => stored.delete(key),
  })
  vi.stubGlobal('location', {
    get hash() {
      return currentHash
    },
    // As a browser does: the hashchange event comes in a task of its own, after the setter.
    set hash(value: string) {
      if (value === currentHash) return
      currentHash = value
      setTimeout(() => windowListeners.get('hashchange')?.(), 0)
    },
  })
  vi.stubGlobal('window', {
    addEventListener: (type: string, fn: () => void) => windowListeners.set(type, fn),
  })
  vi.stubGlobal('fetch', (path: string, init?: { body?: string; headers?: Record<string, string> }) => {
    if (path === '/api/session') fetches.sessions++
    fetches.paths.push(path)
    if (init?.body !== undefined) fetches.bodies.set(path, JSON.parse(init.body))
    fetches.inFlight++
    fetches.mostInFlight = Math.max(fetches.mostInFlight, fetches.inFlight)
    const given = answer(path, init?.headers?.authorization)
    const body = given instanceof Slow ? given.body : given
    const status = body instanceof Failure ? body.status : 200
    const json = body instanceof Failure ? { error: { code: 'UNAVAILABLE', message: 'try again' } } : body
    return new Promise((resolve) =>
      setTimeout(
        () => {
          fetches.inFlight--
          resolve({ ok: status === 200, status, text: async () => JSON.stringify(json) })
        },
        given instanceof Slow ? given.ms : answerMs,
      ),
    )
  })
  await import('./main')
  return {
    fetches,
    byId: (id: string) => byId.get(id) as FakeElement,
    byTestId: (id: string) => created.filter((el) => el.attrs.get('data-testid') === id).at(-1),
    navigate: () => windowListeners.get('hashchange')?.(),
  }
}

afterEach(() => {
  vi.useRealTimers()
  vi.unstubAllGlobals()
})

const READ_ONLY = { nodeId: 'n1', auth: false, tokenName: '', roles: [], admin: false }
const ADMIN = { nodeId: 'n1', auth: true, tokenName: 'ops', roles: ['admin'], admin: true }

/** The console API's answer for an empty queue `name` of one partition. */
function queueDetail(name: string, { paused = false, mayPeek = false } = {}) {
  const rates = { enqueued: 0, delivered: 0, acked: 0, nacked: 0, expired: 0, deadLettered: 0, discarded: 0 }
  return {
    name,
    queueId: 1,
    routeEpoch: 1,
    config: { partitions: 1, visibilityTimeoutMs: 30_000, paused, orderedKeys: false },
    depth: { ready: 0, delayed: 0, leased: 0, dead: 0, waiting: 0, oldestAgeMs: 0 },
    weights: [],
    partitions: [],
    counters: rates,
    history: [],
    netRatePerS: 0,
    ratesPerS: rates,
    mayPeek,
  }
}

describe('polling', () => {
  it('keeps one poll loop after a navigation while a poll was under way (a slow server)', async () => {
    const answerMs = 3_000
    const page = await openPage('#/queues', answerMs, (path) => (path === '/api/session' ? READ_ONLY : []))
    // The first poll is under way (its session answered, its queues not yet): the user navigates.
    await vi.advanceTimersByTimeAsync(1.5 * answerMs)
    page.navigate()
    await vi.advanceTimersByTimeAsync(30_000)
    // From now on: one poll at a time, each a session and a queues call (6 s) then 2 s idle.
    page.fetches.mostInFlight = page.fetches.inFlight
    const before = page.fetches.sessions
    await vi.advanceTimersByTimeAsync(80_000)
    expect(page.fetches.mostInFlight).toBe(1)
    expect(page.fetches.sessions - before).toBeLessThanOrEqual(11)
  })
})

describe('admin actions', () => {
  it("shows a deleted queue's result after going back to the queues", async () => {
    const detail = queueDetail('jobs')
    const page = await openPage('#/queues/jobs', 10, (path) =>
      path === '/api/session'
        ? ADMIN
        : path === '/api/queues/jobs'
          ? detail
          : path === '/api/queues/jobs/delete'
            ? { ok: true, message: 'deleted queue jobs' }
            : [],
    )
    await vi.advanceTimersByTimeAsync(100)
    page.byTestId('delete')?.listeners.get('click')?.({})
    const dialog = page.byId('confirm')
    dialog.returnValue = 'yes'
    dialog.onclose?.()
    await vi.advanceTimersByTimeAsync(1_000)
    expect(page.fetches.paths).toContain('/api/queues/jobs/delete')
    expect(location.hash).toBe('#/queues')
    const shown = page.byId('notice').children as FakeElement[]
    expect(shown.map((el) => el.children.join(''))).toEqual(['deleted queue jobs'])
  })

  it("does not draw a slow poll's older answer over the view an action's refresh drew", async () => {
    let paused = false
    const detail = () => queueDetail('jobs', { paused })
    let reads = 0
    const page = await openPage('#/queues/jobs', 10, (path) => {
      if (path === '/api/session') return ADMIN
      if (path === '/api/queues/jobs/update') {
        paused = true
        return { ok: true, message: 'paused jobs' }
      }
      // The first poll's reading is answered late (a partition's leader changing).
      if (path === '/api/queues/jobs') return reads++ === 1 ? new Slow(5_000, detail()) : detail()
      return []
    })
    await vi.advanceTimersByTimeAsync(2_100)
    expect(reads).toBe(2)
    // Meanwhile the admin pauses the queue: its refresh reads it paused and draws it so.
    findIn(page.byId('view'), 'pause')?.listeners.get('click')?.({})
    const dialog = page.byId('confirm')
    dialog.returnValue = 'yes'
    dialog.onclose?.()
    await vi.advanceTimersByTimeAsync(100)
    expect(findIn(page.byId('view'), 'resume')).toBeDefined()
    // The slow poll's answer, read before the pause, comes in later: it must not draw "not paused".
    await vi.advanceTimersByTimeAsync(5_000)
    expect(findIn(page.byId('view'), 'pause')).toBeUndefined()
    expect(findIn(page.byId('view'), 'resume')).toBeDefined()
  })

  it("does not show a slow poll's failure over the view an action's refresh drew", async () => {
    const detail = queueDetail('jobs')
    let reads = 0
    const page = await openPage('#/queues/jobs', 10, (path) => {
      if (path === '/api/session') return ADMIN
      if (path === '/api/queues/jobs/purge') return { ok: true, message: 'purged jobs' }
      // The first poll's reading fails late (a partition's leader changing).
      if (path === '/api/queues/jobs') return reads++ === 1 ? new Slow(5_000, new Failure(503)) : detail
      return []
    })
    await vi.advanceTimersByTimeAsync(2_100)
    expect(reads).toBe(2)
    findIn(page.byId('view'), 'purge')?.listeners.get('click')?.({})
    const dialog = page.byId('confirm')
    dialog.returnValue = 'yes'
    dialog.onclose?.()
    await vi.advanceTimersByTimeAsync(100)
    // The slow poll fails after the action's refresh read the queue: the page is not in error.
    await vi.advanceTimersByTimeAsync(5_000)
    expect(findIn(page.byId('error'), 'error')).toBeUndefined()
  })

  it('creates a queue with the cluster default for a field left empty, and says so', async () => {
    const page = await openPage('#/queues', 10, (path) => (path === '/api/session' ? ADMIN : []))
    await vi.advanceTimersByTimeAsync(100)
    const name = page.byTestId('new-queue-name') as FakeElement
    name.value = 'jobs'
    const partitions = page.byTestId('new-queue-partitions') as FakeElement
    partitions.value = ''
    ;(page.byTestId('new-queue-max-deliveries') as FakeElement).value = '7'
    const form = page.byTestId('create-queue-form')
    form?.listeners.get('submit')?.({ preventDefault: () => {} })
    // It asked "with 0 partitions?" and sent 0 (which the cluster reads as its default, 4).
    expect(page.byId('confirm-text').textContent).toBe(
      'Create queue "jobs" with the default number of partitions?',
    )
    const dialog = page.byId('confirm')
    dialog.returnValue = 'yes'
    dialog.onclose?.()
    await vi.advanceTimersByTimeAsync(100)
    expect(page.fetches.bodies.get('/api/queues')).toEqual({ name: 'jobs', config: { maxDeliveries: 7 } })
  })
})

describe('navigation', () => {
  it("draws the new view's forms once it is read, when its first reading failed", async () => {
    const detail = (name: string) => queueDetail(name, { mayPeek: true })
    let failB = 1
    const page = await openPage('#/queues/a', 10, (path) => {
      if (path === '/api/session') return ADMIN
      if (path === '/api/queues/b' && failB-- > 0) return new Failure(503)
      if (path === '/api/queues/a' || path === '/api/queues/b')
        return detail(path.slice('/api/queues/'.length))
      return []
    })
    await vi.advanceTimersByTimeAsync(100)
    // The user opens queue b; the server fails that first reading (a leader changing), then answers.
    location.hash = '#/queues/b'
    await vi.advanceTimersByTimeAsync(100)
    expect(findIn(page.byId('error'), 'error')).toBeDefined()
    await vi.advanceTimersByTimeAsync(5_000)
    expect(findIn(page.byId('view'), 'queue-name')?.children).toEqual(['b'])
    // The peek (and update) form beside queue b's view is b's: it was queue a's, for good.
    findIn(page.byId('forms'), 'peek')?.listeners.get('click')?.({})
    await vi.advanceTimersByTimeAsync(100)
    expect(page.fetches.paths.filter((p) => p.endsWith('/peek'))).toEqual(['/api/queues/b/peek'])
  })

  it('keeps the error of the view opened when a slow answer for the view left comes in', async () => {
    let reads = 0
    const page = await openPage('#/queues', 10, (path) => {
      if (path === '/api/session') return READ_ONLY
      if (path === '/api/queues') return reads++ === 1 ? new Slow(5_000, []) : []
      return new Failure(503)
    })
    await vi.advanceTimersByTimeAsync(2_100)
    expect(reads).toBe(2)
    // The user opens the cluster view while the queues are read slowly: the cluster is not read.
    location.hash = '#/cluster'
    await vi.advanceTimersByTimeAsync(100)
    expect(findIn(page.byId('error'), 'error')).toBeDefined()
    // The queues' answer comes in (and is not drawn): the cluster view is still in error.
    await vi.advanceTimersByTimeAsync(4_900)
    expect(findIn(page.byId('error'), 'error')).toBeDefined()
  })
})

describe('token', () => {
  /**
   * The queues view under a viewer token whose second session reading is answered `slowMs`
   * late; `enter` types a token in the page as the user does.
   */
  async function viewerPage(slowMs: number) {
    const VIEWER = { nodeId: 'n1', auth: true, tokenName: 'view', roles: ['viewer:*'], admin: false }
    let viewerReads = 0
    const page = await openPage('#/queues', 10, (path, authorization) => {
      if (path !== '/api/session') return []
      if (authorization === 'Bearer admin-secret') return ADMIN
      if (authorization !== 'Bearer view-secret') return READ_ONLY
      return viewerReads++ === 1 ? new Slow(slowMs, VIEWER) : VIEWER
    })
    const enter = (token: string) => {
      page.byId('token').value = token
      page.byId('token-form').listeners.get('submit')?.({ preventDefault: () => {} })
    }
    return { page, enter, viewerReads: () => viewerReads }
  }

  it('shows the session of the token entered, not an older slow answer for the one before', async () => {
    const { page, enter, viewerReads } = await viewerPage(5_000)
    enter('view-secret')
    await vi.advanceTimersByTimeAsync(2_100)
    expect(viewerReads()).toBe(2)
    // The user enters an admin token while the viewer's poll is under way: the page is the admin's.
    enter('admin-secret')
    await vi.advanceTimersByTimeAsync(100)
    const who = () => String(findIn(page.byId('session'), 'session')?.children[0])
    expect(who()).toContain('token "ops"')
    // The viewer's late answer comes in: the session line still names the admin token.
    await vi.advanceTimersByTimeAsync(4_900)
    expect(who()).toContain('token "ops"')
  })

  it("draws the admin's forms when the token before's slow session answer comes in meanwhile", async () => {
    // The viewer token's second session reading is answered between the admin's two readings.
    const { page, enter, viewerReads } = await viewerPage(75)
    enter('view-secret')
    await vi.advanceTimersByTimeAsync(2_080)
    expect(viewerReads()).toBe(2)
    enter('admin-secret')
    await vi.advanceTimersByTimeAsync(5_000)
    // The page is the admin's: it offers to create a queue (and goes on offering it).
    expect(findIn(page.byId('forms'), 'create-queue-form')).toBeDefined()
  })
})

describe('freshness', () => {
  it('does not stamp the view as updated while it is not redrawn (a control of it in use)', async () => {
    let term = 1
    const cluster = () => ({
      servedBy: 'n1',
      metaLeaderId: 'n1',
      meta: { voters: ['n1'], votersWanted: 1, summary: 'n1', voterChoices: [1] },
      replicationFactor: 2,
      replication: '2 replicas per data group',
      replicationChoices: [1, 2],
      routeEpoch: 1,
      nodes: [],
      groups: [
        {
          groupId: 1,
          leaderId: 'n1',
          term: term++,
          replicas: [
            { nodeId: 'n1', learner: false, appliedIndex: 5, lag: 0 },
            { nodeId: 'n2', learner: false, appliedIndex: 5, lag: 0 },
          ],
          commitIndex: 5,
          appliedIndex: 5,
          applyLag: 0,
          state: 'active',
          partitionCount: 0,
          partitions: [],
        },
      ],
      scale: null,
      moves: [],
      atMs: 0,
    })
    const page = await openPage('#/groups', 10, (path) => (path === '/api/session' ? ADMIN : cluster()))
    await vi.advanceTimersByTimeAsync(100)
    const drawnAt = page.byId('updated').dataset.at
    expect(drawnAt).toBeDefined()
    // The admin picks a new leader in the view's select: the view is left as drawn meanwhile.
    const select = new (globalThis as unknown as { HTMLSelectElement: new () => object }).HTMLSelectElement()
    ;(document as unknown as { activeElement: unknown }).activeElement = select
    ;(page.byId('view') as unknown as { contains: () => boolean }).contains = () => true
    const shown = page.byId('view').children
    await vi.advanceTimersByTimeAsync(10_000)
    expect(page.byId('view').children).toBe(shown)
    // …so the page must not say its figures are fresh: they are from when it was drawn.
    expect(page.byId('updated').dataset.at).toBe(drawnAt)
  })
})
