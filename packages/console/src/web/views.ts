import type {
  ClusterInfo,
  Counts,
  Depth,
  GroupInfo,
  PeekedMessage,
  QueueConfigInfo,
  QueueDetail,
  QueueSummary,
  SessionInfo,
  UpdateQueueBody,
} from '../api-types'
import { shareLines, weightColour } from './chart'
import { h, s } from './dom'
import { count, duration, percent, perSecond, rate } from './format'
import { changedSettings } from './queue-update'

/** What the admin controls of a view do; every one asks for a confirmation first. */
export interface AdminActions {
  transferLeader(groupId: number, toNodeId: string): void
  drainNode(nodeId: string): void
  undrainNode(nodeId: string): void
  removeNode(nodeId: string): void
  scale(groups: number): void
  setMetaVoters(voters: number): void
  setReplicationFactor(factor: number): void
  createQueue(name: string, config: Partial<QueueConfigInfo>): void
  updateQueue(name: string, update: UpdateQueueBody): void
  /** Pauses (true) or resumes (false) the queue's deliveries. */
  setPaused(name: string, paused: boolean): void
  deleteQueue(name: string): void
  purgeQueue(name: string): void
  redriveQueue(name: string): void
}

/** The share chart spans the history it has, from one minute up to ten. */
export const CHART_SPAN_MS_MIN = 60_000
export const CHART_SPAN_MS_MAX = 10 * 60_000

function chartSpanMs(firstMs: number, lastMs: number): number {
  return Math.min(CHART_SPAN_MS_MAX, Math.max(CHART_SPAN_MS_MIN, lastMs - firstMs))
}

function table(headers: readonly string[], rows: readonly HTMLElement[], testId: string): HTMLElement {
  return h(
    'table',
    { 'data-testid': testId },
    h('thead', {}, h('tr', {}, ...headers.map((x) => h('th', {}, x)))),
    h('tbody', {}, ...rows),
  )
}

/** A table cell whose figure tests can find: `data-field`. */
function cell(field: string, value: string | number | Node): HTMLElement {
  return h('td', { 'data-field': field }, typeof value === 'number' ? count(value) : value)
}

function badge(text: string, kind: 'ok' | 'bad' | 'info'): HTMLElement {
  return h('span', { class: `badge ${kind}` }, text)
}

/** A weight's counts, or (with its `waiting`) a queue's depth. */
function depthCells(d: Counts | Depth): HTMLElement[] {
  return [
    cell('ready', d.ready),
    cell('delayed', d.delayed),
    cell('leased', d.leased),
    cell('dead', d.dead),
    ...('waiting' in d ? [cell('waiting', d.waiting)] : []),
    cell('oldest', d.oldestAgeMs > 0 ? duration(d.oldestAgeMs) : '–'),
  ]
}

/**
 * The cluster: meta leader, route epoch, nodes with their groups and leaderships, scaling;
 * admin: drain a node that holds replicas, remove one that is down and holds nothing.
 */
export function clusterView(c: ClusterInfo, session: SessionInfo, actions: AdminActions): HTMLElement {
  const nodes = c.nodes.map((n) =>
    h(
      'tr',
      { 'data-testid': `node-${n.nodeId}` },
      cell('node', h('b', {}, n.nodeId)),
      cell('address', n.address),
      cell(
        'alive',
        h(
          'span',
          {},
          n.alive ? badge('alive', 'ok') : badge('down', 'bad'),
          n.draining ? badge('draining', 'info') : null,
        ),
      ),
      cell(
        'heartbeat',
        n.lastHeartbeatMs > 0 ? `${duration(Math.max(0, c.atMs - n.lastHeartbeatMs))} ago` : '–',
      ),
      cell(
        'groups',
        h(
          'span',
          {},
          ...n.groupIds.map((g) =>
            n.leaderOf.includes(g)
              ? h('span', { class: 'group leader', title: 'leader' }, `★${g}`)
              : h('span', { class: 'group' }, String(g)),
          ),
        ),
      ),
      session.admin ? nodeActions(n, actions) : null,
    ),
  )
  const nodeHeaders = ['node', 'address', 'liveness', 'last heartbeat', 'groups']
  return h(
    'section',
    {},
    h('h2', {}, 'Cluster'),
    h(
      'dl',
      { class: 'facts' },
      h('dt', {}, 'meta leader'),
      h('dd', { 'data-testid': 'meta-leader' }, c.metaLeaderId || 'unknown'),
      h('dt', {}, 'meta group'),
      h('dd', { 'data-testid': 'meta-group' }, c.meta.summary),
      h('dt', {}, 'replication'),
      h('dd', { 'data-testid': 'replication' }, c.replication),
      h('dt', {}, 'route epoch'),
      h('dd', { 'data-testid': 'route-epoch' }, String(c.routeEpoch)),
      h('dt', {}, 'nodes'),
      h(
        'dd',
        { 'data-testid': 'node-count' },
        `${c.nodes.filter((n) => n.alive).length} alive of ${c.nodes.length}`,
      ),
      h('dt', {}, 'data groups'),
      h('dd', { 'data-testid': 'group-count' }, String(c.groups.filter((g) => g.groupId !== 0).length)),
      h('dt', {}, 'served by'),
      h('dd', {}, c.servedBy),
    ),
    scalingView(c),
    h('h3', {}, 'Nodes'),
    h('p', { class: 'hint' }, '★ = this node leads the group; group 0 is the meta group.'),
    table(session.admin ? [...nodeHeaders, 'actions'] : nodeHeaders, nodes, 'nodes'),
  )
}

/**
 * A node's admin buttons: drain while it holds a replica (its replicas and leaderships move
 * to other nodes), undrain while it is draining (it takes replicas again), remove once it is
 * down and holds nothing (it leaves this list).
 */
function nodeActions(n: ClusterInfo['nodes'][number], actions: AdminActions): HTMLElement {
  const holds = n.groupIds.length > 0
  return h(
    'td',
    {},
    n.draining
      ? h(
          'button',
          {
            'data-testid': `undrain-${n.nodeId}`,
            title: 'take the drain back: it takes new replicas again',
            onclick: () => actions.undrainNode(n.nodeId),
          },
          'undrain',
        )
      : null,
    h(
      'button',
      {
        'data-testid': `drain-${n.nodeId}`,
        disabled: !holds,
        title: holds ? 'move its replicas and leaderships to other nodes' : 'it holds no replica',
        onclick: () => actions.drainNode(n.nodeId),
      },
      'drain',
    ),
    h(
      'button',
      {
        'data-testid': `remove-${n.nodeId}`,
        disabled: n.alive || holds,
        title: n.alive || holds ? 'stop it and drain it first' : 'forget this node',
        onclick: () => actions.removeNode(n.nodeId),
      },
      'remove',
    ),
  )
}

/** A scaling or partition moves under way, with their progress; nothing when idle. */
export function scalingView(c: ClusterInfo): HTMLElement | null {
  const sc = c.scale
  const active = (sc && sc.state !== 'done' && sc.state !== '') || c.moves.length > 0
  if (!active) return h('p', { 'data-testid': 'scaling', class: 'hint' }, 'No scaling or move in progress.')
  const done = sc?.movesDone ?? 0
  const total = sc?.movesTotal ?? 0
  return h(
    'div',
    { 'data-testid': 'scaling', class: 'scaling' },
    h('h3', {}, 'Scaling in progress'),
    sc
      ? h(
          'p',
          {},
          `to ${sc.targetGroups} data groups (${sc.state}): ${done} of ${total} moves done `,
          h('progress', { max: Math.max(1, total), value: done }),
        )
      : null,
    c.moves.length > 0
      ? table(
          ['queue/partition', 'from group', 'to group', 'phase', 'running for'],
          c.moves.map((m) =>
            h(
              'tr',
              {},
              cell('partition', `${m.queue}/${m.partition}`),
              cell('from', String(m.fromGroup)),
              cell('to', String(m.toGroup)),
              cell('phase', m.phase),
              cell('age', duration(Math.max(0, c.atMs - m.startedAtMs))),
            ),
          ),
          'moves',
        )
      : null,
  )
}

/** The groups: replicas, leader, term, commit/apply index, lag, partitions; admin: transfer. */
export function groupsView(c: ClusterInfo, session: SessionInfo, actions: AdminActions): HTMLElement {
  const rows = c.groups.map((g: GroupInfo) => {
    const others = g.replicas.filter((r) => r.nodeId !== g.leaderId && !r.learner)
    const select = h(
      'select',
      { 'aria-label': `new leader of group ${g.groupId}` },
      ...others.map((r) => h('option', { value: r.nodeId }, r.nodeId)),
    )
    return h(
      'tr',
      { 'data-testid': `group-${g.groupId}` },
      cell('group', g.groupId === 0 ? '0 (meta)' : String(g.groupId)),
      cell('leader', g.leaderId || badge('none', 'bad')),
      cell('term', String(g.term)),
      cell(
        'replicas',
        g.replicas
          .map(
            (r) =>
              `${r.nodeId}${r.nodeId === g.leaderId ? '★' : ''}${r.learner ? ' (learner)' : ''} lag ${r.lag}`,
          )
          .join(', '),
      ),
      cell('commit', String(g.commitIndex)),
      cell('applied', String(g.appliedIndex)),
      cell('lag', g.applyLag > 0 ? badge(String(g.applyLag), 'bad') : '0'),
      cell('state', g.state || '–'),
      cell(
        'partitions',
        g.partitions.length > 0 ? g.partitions.join(' ') : g.partitionCount > 0 ? `${g.partitionCount}` : '–',
      ),
      session.admin
        ? h(
            'td',
            {},
            select,
            h(
              'button',
              {
                'data-testid': `transfer-${g.groupId}`,
                disabled: others.length === 0,
                onclick: () => actions.transferLeader(g.groupId, (select as HTMLSelectElement).value),
              },
              'transfer leader',
            ),
          )
        : null,
    )
  })
  const headers = [
    'group',
    'leader',
    'term',
    'replicas',
    'commit',
    'applied',
    'apply lag',
    'state',
    'partitions',
  ]
  return h(
    'section',
    {},
    h('h2', {}, 'Data groups'),
    scalingView(c),
    table(session.admin ? [...headers, 'admin'] : headers, rows, 'groups'),
    h(
      'p',
      { class: 'hint' },
      'Indexes as the replicas last reported them to the meta group; a replica’s lag is the group’s commit index minus what it has applied.',
    ),
  )
}

/** The admin form that scales the data groups (rendered once per visit, not on each poll). */
export function scaleForm(current: number, actions: AdminActions): HTMLElement {
  const input = h('input', {
    type: 'number',
    min: 1,
    max: 10000,
    value: current,
    'data-testid': 'scale-groups',
  }) as HTMLInputElement
  return h(
    'form',
    {
      class: 'admin',
      onsubmit: (e) => {
        e.preventDefault()
        actions.scale(Number(input.value))
      },
    },
    h('h3', {}, 'Scale data groups'),
    h('label', {}, 'data groups ', input),
    h('button', { type: 'submit', 'data-testid': 'scale' }, 'scale'),
  )
}

/** The admin form that sets how many voters the meta group keeps (one of `choices`: the server's). */
export function metaVotersForm(
  current: number,
  choices: readonly number[],
  actions: AdminActions,
): HTMLElement {
  return choiceForm(
    { title: 'Meta group size', label: 'voters ', testId: 'meta-voters', choices, current },
    (n) => actions.setMetaVoters(n),
  )
}

/** The admin form that sets the replication factor, replicas per data group (one of `choices`: the server's). */
export function replicationForm(
  current: number,
  choices: readonly number[],
  actions: AdminActions,
): HTMLElement {
  return choiceForm(
    {
      title: 'Replication factor',
      label: 'replicas per data group ',
      testId: 'replication-factor',
      choices,
      current,
    },
    (n) => actions.setReplicationFactor(n),
  )
}

/** An admin form choosing one of `choices` (select `testId`, button `set-<testId>`). */
function choiceForm(
  o: { title: string; label: string; testId: string; choices: readonly number[]; current: number },
  submit: (n: number) => void,
): HTMLElement {
  const select = h(
    'select',
    { 'data-testid': o.testId },
    ...o.choices.map((n) => h('option', { value: n, selected: n === o.current }, String(n))),
  ) as HTMLSelectElement
  return h(
    'form',
    {
      class: 'admin',
      onsubmit: (e) => {
        e.preventDefault()
        submit(Number(select.value))
      },
    },
    h('h3', {}, o.title),
    h('label', {}, o.label, select),
    h('button', { type: 'submit', 'data-testid': `set-${o.testId}` }, 'set'),
  )
}

/** The queues with their totals. */
export function queuesView(queues: readonly QueueSummary[]): HTMLElement {
  const rows = queues.map((q) =>
    h(
      'tr',
      { 'data-testid': `queue-${q.name}` },
      cell(
        'name',
        h(
          'span',
          {},
          h('a', { href: `#/queues/${encodeURIComponent(q.name)}` }, q.name),
          ...(q.config.paused ? [' ', badge('paused', 'bad')] : []),
          ...(q.config.orderedKeys ? [' ', badge('ordered keys', 'info')] : []),
        ),
      ),
      cell('partitions', String(q.config.partitions)),
      ...(q.depth ? depthCells(q.depth) : [h('td', { colspan: 6, class: 'error' }, q.error)]),
    ),
  )
  return h(
    'section',
    {},
    h('h2', {}, 'Queues'),
    queues.length === 0
      ? h('p', { class: 'hint' }, 'No queues yet.')
      : table(
          ['queue', 'partitions', 'ready', 'delayed', 'in flight', 'dead', 'waiting for key', 'oldest ready'],
          rows,
          'queues',
        ),
  )
}

/** The admin form that creates a queue. */
export function createQueueForm(actions: AdminActions): HTMLElement {
  const name = h('input', {
    required: true,
    placeholder: 'name',
    'data-testid': 'new-queue-name',
  }) as HTMLInputElement
  const partitions = h('input', {
    type: 'number',
    min: 1,
    value: 4,
    'data-testid': 'new-queue-partitions',
  }) as HTMLInputElement
  const maxDeliveries = h('input', {
    type: 'number',
    min: 1,
    value: 5,
    'data-testid': 'new-queue-max-deliveries',
  }) as HTMLInputElement
  const orderedKeys = h('input', { type: 'checkbox', 'data-testid': 'new-queue-ordered' }) as HTMLInputElement
  /** A field left empty is left out: the cluster's default (it was sent as 0, asked as "0 partitions"). */
  const given = (key: 'partitions' | 'maxDeliveries', input: HTMLInputElement) =>
    input.value.trim() === '' ? {} : { [key]: Number(input.value) }
  return h(
    'form',
    {
      class: 'admin',
      'data-testid': 'create-queue-form',
      onsubmit: (e) => {
        e.preventDefault()
        actions.createQueue(name.value.trim(), {
          ...given('partitions', partitions),
          ...given('maxDeliveries', maxDeliveries),
          ...(orderedKeys.checked ? { orderedKeys: true } : {}),
        })
      },
    },
    h('h3', {}, 'Create a queue'),
    h('label', {}, 'name ', name),
    h('label', {}, 'partitions ', partitions),
    h('label', {}, 'max deliveries ', maxDeliveries),
    h(
      'label',
      { title: "a key's messages one at a time, in the order they arrived; the partition count then stays" },
      orderedKeys,
      ' ordered keys',
    ),
    h('button', { type: 'submit', 'data-testid': 'create-queue' }, 'create'),
  )
}

/** One queue: config, depth, per-weight figures, the share chart, partitions; admin buttons. */
export function queueView(q: QueueDetail, session: SessionInfo, actions: AdminActions): HTMLElement {
  const c = q.config
  const weights = q.weights.map((w) =>
    h(
      'tr',
      { 'data-testid': `weight-${w.weight}` },
      cell('weight', h('span', {}, swatch(w.weight), ` ${w.weight}`)),
      ...depthCells(w),
      cell('target', percent(w.targetShare)),
      cell('achieved', percent(w.achievedShare)),
    ),
  )
  const partitions = q.partitions.map((p) =>
    h(
      'tr',
      {},
      cell('partition', String(p.partition)),
      cell('group', String(p.groupId)),
      cell('leader', p.leaderId || '–'),
      cell('messages', p.messages),
      cell('window', p.windowLeases),
      ...(c.orderedKeys ? [cell('waiting', p.waiting)] : []),
    ),
  )
  return h(
    'section',
    {},
    h(
      'h2',
      {},
      h('a', { href: '#/queues' }, 'Queues'),
      ' / ',
      h('span', { 'data-testid': 'queue-name' }, q.name),
      ...(c.paused ? [' ', h('span', { class: 'badge bad', 'data-testid': 'paused' }, 'paused')] : []),
      ...(c.orderedKeys
        ? [
            ' ',
            h(
              'span',
              {
                class: 'badge info',
                'data-testid': 'ordered-keys',
                title: "a key's messages are delivered one at a time, in the order they arrived",
              },
              'ordered keys',
            ),
          ]
        : []),
      ...(c.deliveryRate > 0
        ? [' ', h('span', { class: 'badge info', 'data-testid': 'delivery-rate' }, `≤ ${c.deliveryRate}/s`)]
        : []),
    ),
    session.admin
      ? h(
          'div',
          { class: 'admin buttons' },
          h(
            'button',
            {
              'data-testid': c.paused ? 'resume' : 'pause',
              title: c.paused
                ? 'consumers get its messages again'
                : 'consumers get nothing until it is resumed; producers, acks and peeks go on',
              onclick: () => actions.setPaused(q.name, !c.paused),
            },
            c.paused ? 'resume delivery' : 'pause delivery',
          ),
          h('button', { 'data-testid': 'purge', onclick: () => actions.purgeQueue(q.name) }, 'purge ready'),
          h(
            'button',
            { 'data-testid': 'redrive', onclick: () => actions.redriveQueue(q.name) },
            'redrive dead letters',
          ),
          h(
            'button',
            { 'data-testid': 'delete', class: 'danger', onclick: () => actions.deleteQueue(q.name) },
            'delete queue',
          ),
        )
      : null,
    h(
      'div',
      { class: 'columns' },
      h(
        'div',
        {},
        h('h3', {}, 'Depth'),
        table(
          ['ready', 'delayed', 'in flight', 'dead', 'waiting for key', 'oldest ready'],
          [h('tr', { 'data-testid': 'queue-depth' }, ...depthCells(q.depth))],
          'depth',
        ),
        h(
          'p',
          {},
          'net change: ',
          h('b', { 'data-testid': 'net-rate' }, rate(q.netRatePerS)),
          ' messages stored',
        ),
        h('h3', {}, 'Rates (last minute)'),
        table(
          ['enqueued', 'delivered', 'acked', 'nacked', 'expired', 'dead-lettered', 'past TTL'],
          [
            h(
              'tr',
              { 'data-testid': 'queue-rates' },
              ...(
                ['enqueued', 'delivered', 'acked', 'nacked', 'expired', 'deadLettered', 'discarded'] as const
              ).map((k) => h('td', { 'data-testid': `rate-${k}` }, perSecond(q.ratesPerS[k]))),
            ),
          ],
          'rates',
        ),
      ),
      h(
        'div',
        {},
        h('h3', {}, 'Config'),
        h(
          'dl',
          { class: 'facts', 'data-testid': 'config' },
          ...Object.entries(c).flatMap(([k, v]) => [
            h('dt', {}, k),
            h('dd', { 'data-field': k }, String(v === '' ? '–' : v)),
          ]),
        ),
      ),
    ),
    h('h3', {}, 'Weights'),
    q.weights.length === 0
      ? h('p', { class: 'hint' }, 'No messages yet.')
      : table(
          [
            'weight',
            'ready',
            'delayed',
            'in flight',
            'dead',
            'oldest ready',
            'target share',
            'achieved share',
          ],
          weights,
          'weights',
        ),
    h('h3', {}, 'Target (dashed) vs achieved share per weight'),
    shareChart(q),
    h('h3', {}, 'Partitions'),
    table(
      [
        'partition',
        'group',
        'leader',
        'messages',
        'lease window',
        ...(c.orderedKeys ? ['waiting for their key'] : []),
      ],
      partitions,
      'partitions',
    ),
  )
}

/**
 * A look at a queue's next ready messages without delivering them (rendered once per visit,
 * filled on demand: `peek` is the API call). Needs a token that may consume the queue.
 */
export function peekPanel(peek: () => Promise<readonly PeekedMessage[]>): HTMLElement {
  const out = h('div', { 'data-testid': 'peeked' })
  const button = h(
    'button',
    {
      'data-testid': 'peek',
      onclick: () => {
        out.replaceChildren(h('p', { class: 'hint' }, 'reading…'))
        peek().then(
          (messages) =>
            out.replaceChildren(
              messages.length === 0
                ? h('p', { class: 'hint' }, 'No ready message.')
                : table(
                    ['partition', 'id', 'weight', 'deliveries', 'key', 'body'],
                    messages.map((m) =>
                      h(
                        'tr',
                        { 'data-testid': `peeked-${m.partition}-${m.id}` },
                        cell('partition', String(m.partition)),
                        cell('id', String(m.id)),
                        cell('weight', String(m.weight)),
                        cell('deliveries', String(m.deliveryCount)),
                        cell('key', m.key || '–'),
                        cell('body', m.body),
                      ),
                    ),
                    'peeked-messages',
                  ),
            ),
          (error: unknown) => out.replaceChildren(h('p', { class: 'notice bad' }, (error as Error).message)),
        )
      },
    },
    'peek at ready messages',
  )
  return h(
    'div',
    { class: 'peek', 'data-testid': 'peek-panel' },
    h('b', {}, 'Next ready messages'),
    ' ',
    button,
    h(
      'p',
      { class: 'hint' },
      'Per partition the heaviest weight first, each weight in delivery order; nothing is delivered or leased.',
    ),
    out,
  )
}

/** In place of the peek panel, for a caller who may not read bodies: why, and what would let it. */
export function noPeek(session: SessionInfo): HTMLElement {
  return h(
    'p',
    { class: 'hint', 'data-testid': 'no-peek' },
    session.auth
      ? `Message bodies are shown to a token that may consume this queue; token "${session.tokenName}" may not.`
      : 'Message bodies are not shown: this node was started without --auth-file and without --console-peek.',
  )
}

/**
 * The admin form that updates a queue's settings (rendered once per visit): it sends only the
 * fields changed from the values drawn (changedSettings), an emptied field staying as it is.
 */
export function updateQueueForm(name: string, c: QueueConfigInfo, actions: AdminActions): HTMLElement {
  const visibility = h('input', {
    type: 'number',
    min: 100,
    value: c.visibilityTimeoutMs,
    'data-testid': 'update-visibility',
  }) as HTMLInputElement
  const maxDeliveries = h('input', {
    type: 'number',
    min: 1,
    value: c.maxDeliveries,
    'data-testid': 'update-max-deliveries',
  }) as HTMLInputElement
  const lengthMax = h('input', { type: 'number', min: 1, value: c.queueLengthMax }) as HTMLInputElement
  const ttl = h('input', { type: 'number', min: 0, value: c.messageTtlMs }) as HTMLInputElement
  const rate = h('input', {
    type: 'number',
    min: 0,
    max: 1_000_000,
    step: 1,
    value: c.deliveryRate,
    'data-testid': 'update-delivery-rate',
  }) as HTMLInputElement
  const backoff = h('input', {
    type: 'number',
    min: 0,
    max: 86_400_000,
    value: c.retryBackoffMinMs,
    'data-testid': 'update-retry-backoff',
  }) as HTMLInputElement
  const backoffMax = h('input', {
    type: 'number',
    min: 0,
    max: 86_400_000,
    value: c.retryBackoffMaxMs,
    'data-testid': 'update-retry-backoff-max',
  }) as HTMLInputElement
  const partitions = h('input', {
    type: 'number',
    min: c.partitions,
    value: c.partitions,
    'data-testid': 'update-partitions',
  }) as HTMLInputElement
  return h(
    'form',
    {
      class: 'admin',
      onsubmit: (e) => {
        e.preventDefault()
        actions.updateQueue(
          name,
          changedSettings(c, {
            visibilityTimeoutMs: visibility.value,
            maxDeliveries: maxDeliveries.value,
            queueLengthMax: lengthMax.value,
            messageTtlMs: ttl.value,
            deliveryRate: rate.value,
            retryBackoffMinMs: backoff.value,
            retryBackoffMaxMs: backoffMax.value,
            partitions: partitions.value,
          }),
        )
      },
    },
    h('h3', {}, 'Update settings'),
    h('p', { class: 'hint' }, 'Only the fields you change are sent; an emptied field stays as it is.'),
    h('label', {}, 'visibility timeout (ms) ', visibility),
    h('label', {}, 'max deliveries ', maxDeliveries),
    h('label', {}, 'queue length max (messages) ', lengthMax),
    h('label', {}, 'message TTL (ms, 0 = none) ', ttl),
    h('label', {}, 'delivery rate (messages/s, 0 = no limit) ', rate),
    h('label', {}, 'retry backoff (ms, doubling per attempt; 0 = at once) ', backoff),
    h('label', {}, 'longest retry backoff (ms; 0 = 10 min, or the shortest if longer) ', backoffMax),
    h(
      'label',
      {},
      c.orderedKeys ? 'partitions (fixed: ordered keys) ' : 'partitions (more only) ',
      partitions,
    ),
    h('button', { type: 'submit', 'data-testid': 'update-queue' }, 'update'),
  )
}

/** A small square in the weight's colour (an SVG fill: the page's policy allows no inline styles). */
function swatch(weight: number): SVGElement {
  return s(
    'svg',
    { width: 10, height: 10, class: 'swatch' },
    s('rect', { width: 10, height: 10, fill: weightColour(weight) }),
  )
}

function shareChart(q: QueueDetail): HTMLElement {
  const endMs = q.history.at(-1)?.atMs ?? 0
  const spanMs = chartSpanMs(q.history[0]?.atMs ?? endMs, endMs)
  const box = { width: 600, height: 160, spanMs, endMs }
  const lines = shareLines(q.history, box)
  const grid = [0, 0.25, 0.5, 0.75, 1].map((share) =>
    s('line', {
      x1: 0,
      x2: box.width,
      y1: (1 - share) * box.height,
      y2: (1 - share) * box.height,
      class: 'grid',
    }),
  )
  return h(
    'figure',
    { class: 'chart' },
    s(
      'svg',
      {
        viewBox: `-4 -4 ${box.width + 8} ${box.height + 8}`,
        'data-testid': 'share-chart',
        role: 'img',
        'aria-label': 'target and achieved share per weight',
      },
      ...grid,
      ...lines.map((l) =>
        s('polyline', {
          points: l.points,
          fill: 'none',
          stroke: weightColour(l.weight),
          'stroke-width': l.kind === 'target' ? 1.5 : 2,
          'stroke-dasharray': l.kind === 'target' ? '5 4' : undefined,
          'data-weight': l.weight,
          'data-kind': l.kind,
        }),
      ),
    ),
    h(
      'figcaption',
      {},
      `last ${duration(spanMs)}, ${q.history.length} samples; y from 0% to 100%. `,
      ...q.weights.map((w) => h('span', { class: 'legend' }, swatch(w.weight), ` weight ${w.weight}`)),
    ),
  )
}

/** The session line: node, who the token is, read-only or admin. */
export function sessionView(session: SessionInfo | null): HTMLElement {
  if (!session) return h('span', { 'data-testid': 'session' }, 'not connected')
  const who = session.tokenName ? `token "${session.tokenName}" (${session.roles.join(', ')})` : 'no token'
  return h(
    'span',
    { 'data-testid': 'session' },
    `node ${session.nodeId} · ${session.auth ? who : 'authentication off'} · `,
    session.admin ? badge('admin', 'info') : badge('read-only', 'ok'),
  )
}
