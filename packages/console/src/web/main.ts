import type {
  ActionResult,
  ClusterInfo,
  PeekedMessage,
  QueueDetail,
  QueueSummary,
  SessionInfo,
} from '../api-types'
import { ApiCallError, api, savedToken, saveToken } from './api'
import { h } from './dom'
import { parseRoute, type Route } from './route'
import {
  type AdminActions,
  clusterView,
  createQueueForm,
  groupsView,
  metaVotersForm,
  noPeek,
  peekPanel,
  queuesView,
  queueView,
  replicationForm,
  scaleForm,
  sessionView,
  updateQueueForm,
} from './views'

/** How often the open view is read again. */
const POLL_MS = 2_000

const byId = (id: string) => document.getElementById(id) as HTMLElement
let timer: ReturnType<typeof setTimeout> | undefined
/** Bumped on navigation: an answer for an older view is dropped. */
let generation = 0
/** Bumped by each refresh: only the latest one schedules the next poll. */
let refreshes = 0
/** The next navigation keeps the notice: an action's own (a deleted queue's view is left). */
let keepNotice = false
/**
 * The admin forms wait to be redrawn (a navigation or an action asked) until a refresh draws
 * them: a navigation whose first reading failed left the previous view's forms (another
 * queue's peek and settings) beside the new view for good, the polls drawing no forms.
 */
let formsDue = false

function notice(text: string, kind: 'ok' | 'bad'): void {
  byId('notice').replaceChildren(
    h('div', { class: `notice ${kind}`, 'data-testid': 'notice', role: 'status' }, text),
  )
}

function errorText(error: unknown): string {
  return error instanceof ApiCallError ? `${error.code}: ${error.message}` : String(error)
}

/** Asks for confirmation in the page's dialog; runs `action` (an API call) only when confirmed. */
function confirmThen(question: string, action: () => Promise<ActionResult>): void {
  const dialog = byId('confirm') as HTMLDialogElement
  byId('confirm-text').textContent = question
  dialog.returnValue = ''
  dialog.onclose = () => {
    if (dialog.returnValue !== 'yes') return notice('cancelled', 'ok')
    action().then(
      (r) => {
        notice(r.message, 'ok')
        refresh(true)
      },
      (error: unknown) => notice(errorText(error), 'bad'),
    )
  }
  dialog.showModal()
}

const q = encodeURIComponent
const actions: AdminActions = {
  transferLeader: (groupId, toNodeId) =>
    confirmThen(`Move the leadership of group ${groupId} to ${toNodeId}?`, () =>
      api(`/api/groups/${groupId}/transfer`, { toNodeId }),
    ),
  drainNode: (nodeId) =>
    confirmThen(`Drain node ${nodeId}? Its replicas and leaderships move to other nodes.`, () =>
      api(`/api/nodes/${q(nodeId)}/drain`, {}),
    ),
  undrainNode: (nodeId) =>
    confirmThen(
      `Undrain node ${nodeId}? It takes new replicas again; those moved off are not moved back at once.`,
      () => api(`/api/nodes/${q(nodeId)}/undrain`, {}),
    ),
  removeNode: (nodeId) =>
    confirmThen(
      `Remove node ${nodeId} from the cluster? It is down and holds nothing; it cannot come back under this id.`,
      () => api(`/api/nodes/${q(nodeId)}/remove`, {}),
    ),
  setMetaVoters: (voters) =>
    confirmThen(`Make the meta group keep ${voters} voters? Voters are added or removed one at a time.`, () =>
      api('/api/meta-voters', { voters }),
    ),
  setReplicationFactor: (factor) =>
    confirmThen(
      `Set the replication factor to ${factor}? Every data group grows or shrinks to it, one replica at a time.`,
      () => api('/api/replication', { factor }),
    ),
  scale: (groups) =>
    confirmThen(`Scale to ${groups} data groups? Partitions will move between groups.`, () =>
      api('/api/scale', { groups }),
    ),
  createQueue: (name, config) =>
    confirmThen(
      `Create queue "${name}" with ${config.partitions ? `${config.partitions} partitions` : 'the default number of partitions'}${config.orderedKeys ? ' and ordered keys' : ''}?`,
      () => api('/api/queues', { name, config }),
    ),
  updateQueue: (name, update) =>
    Object.keys(update).length === 0
      ? notice('nothing to update: change a setting first', 'bad')
      : confirmThen(`Update the settings of "${name}"?`, () => api(`/api/queues/${q(name)}/update`, update)),
  setPaused: (name, paused) =>
    confirmThen(
      paused
        ? `Pause delivery of "${name}"? Consumers get nothing until it is resumed; producers go on.`
        : `Resume delivery of "${name}"?`,
      () => api(`/api/queues/${q(name)}/update`, { paused }),
    ),
  deleteQueue: (name) =>
    confirmThen(`Delete queue "${name}" and all its messages? This cannot be undone.`, async () => {
      const r = await api<ActionResult>(`/api/queues/${q(name)}/delete`, {})
      // Its hashchange comes after the result's notice is shown, and cleared it.
      if (location.hash !== '#/queues') {
        keepNotice = true
        location.hash = '#/queues'
      }
      return r
    }),
  purgeQueue: (name) =>
    confirmThen(`Delete every ready message of "${name}" (and those waiting for their key's turn)?`, () =>
      api(`/api/queues/${q(name)}/purge`, {}),
    ),
  redriveQueue: (name) =>
    confirmThen(`Move the dead letters of "${name}" back to ready?`, () =>
      api(`/api/queues/${q(name)}/redrive`, {}),
    ),
}

/**
 * Reads the open view's data and redraws it; `forms` also redraws the admin forms. Draws
 * nothing once refresh `ticket` is overtaken: a slow poll's answer, read before an action,
 * was drawn over the action's newer one (a queue just paused shown as not paused).
 */
async function render(route: Route, forms: boolean, ticket: number): Promise<void> {
  const mine = generation
  // Its own: a page-wide one was set by an overtaken render's late answer (the token before's)
  // while this one read its view, which was then drawn for that token (no admin forms, for good).
  const session = await api<SessionInfo>('/api/session')
  // An overtaken answer (for the token before the one just entered) names the wrong token.
  if (mine === generation && ticket === refreshes) byId('session').replaceChildren(sessionView(session))
  let view: HTMLElement
  let form: HTMLElement | null = null
  switch (route.view) {
    case 'cluster': {
      const c = await api<ClusterInfo>('/api/cluster')
      view = clusterView(c, session, actions)
      if (session.admin) {
        form = h(
          'div',
          {},
          metaVotersForm(c.meta.votersWanted || c.meta.voters.length, c.meta.voterChoices, actions),
          replicationForm(c.replicationFactor, c.replicationChoices, actions),
        )
      }
      break
    }
    case 'groups': {
      const c = await api<ClusterInfo>('/api/cluster')
      view = groupsView(c, session, actions)
      if (session.admin) form = scaleForm(c.groups.filter((g) => g.groupId !== 0).length, actions)
      break
    }
    case 'queues':
      view = queuesView(await api<QueueSummary[]>('/api/queues'))
      if (session.admin) form = createQueueForm(actions)
      break
    case 'queue': {
      const detail = await api<QueueDetail>(`/api/queues/${q(route.name)}`)
      view = queueView(detail, session, actions)
      const peek = detail.mayPeek
        ? peekPanel(() => api<PeekedMessage[]>(`/api/queues/${q(detail.name)}/peek`))
        : noPeek(session)
      form = session.admin ? h('div', {}, peek, updateQueueForm(detail.name, detail.config, actions)) : peek
      break
    }
  }
  if (mine !== generation || ticket !== refreshes) return
  // A control of the view in use (a leader being picked) is not redrawn under the user's hand.
  const active = document.activeElement
  const busy = active instanceof HTMLSelectElement && byId('view').contains(active)
  if (forms) {
    byId('forms').replaceChildren(...(form ? [form] : []))
    formsDue = false
  }
  if (busy) return
  byId('view').replaceChildren(view)
  // Only a view redrawn is stamped: one left as drawn (a control in use) showed the time of each
  // poll over figures as old as the control's use.
  byId('updated').textContent = `updated ${new Date().toLocaleTimeString()}`
  byId('updated').dataset.at = String(Date.now())
}

/** Redraws now and schedules the next poll; `forms` after navigation or an action. */
function refresh(forms: boolean): void {
  clearTimeout(timer)
  const mine = ++refreshes
  if (forms) formsDue = true
  const route = parseRoute(location.hash)
  for (const a of document.querySelectorAll('nav a')) {
    a.classList.toggle(
      'active',
      (a as HTMLAnchorElement).hash.startsWith(`#/${route.view === 'queue' ? 'queues' : route.view}`),
    )
  }
  // An overtaken refresh's outcome is not shown: its failure said the page was in error over
  // a newer refresh's view, and its success cleared a newer refresh's error.
  render(route, formsDue, mine)
    .then(() => {
      if (mine === refreshes) byId('error').replaceChildren()
    })
    .catch((error: unknown) => {
      if (mine !== refreshes) return
      const text = errorText(error)
      const auth = error instanceof ApiCallError && (error.status === 401 || error.status === 403)
      byId('error').replaceChildren(
        h(
          'div',
          { class: 'notice bad', 'data-testid': 'error' },
          auth ? `${text} — enter a token above.` : text,
        ),
      )
    })
    .finally(() => {
      // A refresh overtaken by another (a navigation or an action while it was under way) schedules
      // nothing: its timer was a second poll loop, for good while the server was slow.
      if (mine !== refreshes) return
      timer = setTimeout(() => refresh(false), document.hidden ? POLL_MS * 5 : POLL_MS)
    })
}

function start(): void {
  const token = byId('token') as HTMLInputElement
  token.value = savedToken()
  byId('token-form').addEventListener('submit', (e) => {
    e.preventDefault()
    saveToken(token.value.trim())
    generation++
    refresh(true)
  })
  window.addEventListener('hashchange', () => {
    generation++
    if (!keepNotice) byId('notice').replaceChildren()
    keepNotice = false
    refresh(true)
  })
  refresh(true)
}

start()
