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

/** Opens the page at `hash`; `answer` gives each API call's JSON body. */
async function openPage(hash: string, answerMs: number, answer: (path: string) => unknown) {
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
  vi.stubGlobal('sessionStorage', { getItem: () => null, setItem: () => {}, removeItem: () => {} })
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
  vi.stubGlobal('fetch', (path: string, init?: { body?: string }) => {
    if (path === '/api/session') fetches.sessions++
    fetches.paths.push(path)
    if (init?.body !== undefined) fetches.bodies.set(path, JSON.parse(init.body))
    fetches.inFlight++
    fetches.mostInFlight = Math.max(fetches.mostInFlight, fetches.inFlight)
    const body = answer(path)
    return new Promise((resolve) =>
      setTimeout(() => {
        fetches.inFlight--
        resolve({ ok: true, status: 200, text: async () => JSON.stringify(body) })
      }, answerMs),
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
    const counts = { ready: 0, delayed: 0, leased: 0, dead: 0, waiting: 0, oldestAgeMs: 0 }
    const rates = { enqueued: 0, delivered: 0, acked: 0, nacked: 0, expired: 0, deadLettered: 0 }
    const detail = {
      name: 'jobs',
      queueId: 1,
      routeEpoch: 1,
      config: { partitions: 1, visibilityTimeoutMs: 30_000, paused: false, orderedKeys: false },
      depth: counts,
      weights: [],
      partitions: [],
      counters: { ...rates, discarded: 0 },
      history: [],
      netRatePerS: 0,
      ratesPerS: { ...rates, discarded: 0 },
      mayPeek: false,
    }
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
