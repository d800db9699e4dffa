import {
  drainResult,
  META_VOTER_COUNTS,
  metaGroupSummary,
  metaVotersResult,
  REPLICAS_PER_GROUP_MAX,
  replicationResult,
  replicationSummary,
  undrainResult,
} from '@mq/router-client'
import type { Command } from 'commander'
import type { Runtime } from '../context'
import { formatDuration } from '../durations'
import type { CliAdmin } from '../io'
import { integerArg } from '../options'
import { formatFields, formatTable } from '../table'

type ClusterStatus = Awaited<ReturnType<CliAdmin['clusterStatus']>>
type NodeStatus = ClusterStatus['nodes'][number]
type GroupStatus = ClusterStatus['groups'][number]
type ScalePlan = NonNullable<ClusterStatus['scale']>
type PartitionMove = ClusterStatus['moves'][number]

/** `mq cluster status`, `mq node list|drain|remove`, `mq group list|scale|transfer-leader`. */
export function registerClusterCommands(program: Command, runtime: Runtime): void {
  const cluster = program
    .command('cluster')
    .description('the cluster as a whole')
    .addHelpText(
      'after',
      '\nExamples:\n  $ mq cluster status\n  $ mq cluster status --json | jq .metaLeaderId\n  $ mq cluster meta-voters 5   # the meta group keeps 5 voters\n',
    )
  cluster
    .command('status')
    .description('meta leader, route epoch, nodes, Raft groups and any scaling in progress')
    .action((_opts, command: Command) =>
      runtime.run(command, async ({ client, out, io }) => {
        const status = await client.admin.clusterStatus()
        if (out.json) {
          out.record(status)
          return
        }
        const alive = status.nodes.filter((n) => n.alive).length
        out.text(
          formatFields([
            ['meta leader', status.metaLeaderId || '(none)'],
            ['meta group', metaGroupSummary(status)],
            ['format level', status.formatLevel],
            ['replication', replicationSummary(status.replicationFactor)],
            ['route epoch', status.routeEpoch],
            ['nodes', `${alive} alive of ${status.nodes.length}`],
            ['groups', describeGroups(status)],
            ['scaling', status.scale ? describePlan(status.scale) : 'no'],
          ]),
        )
        out.text(`\n${formatTable(status.nodes, nodeColumns(io.now()))}`)
        out.text(`\n${formatTable(groupRows(status), groupColumns(io.now()))}`)
        if (status.moves.length > 0) out.text(`\n${formatTable(status.moves, moveColumns(io.now()))}`)
      }),
    )

  cluster
    .command('meta-voters')
    .argument(
      '<n>',
      `voters the meta group is to keep: ${META_VOTER_COUNTS.join(', ')}`,
      integerArg(1, Math.max(...META_VOTER_COUNTS)),
    )
    .description(
      'grow or shrink the meta group (the Raft group of the cluster metadata) to n voters, one at a time, on live nodes (see `mq cluster status`)',
    )
    .action((n: number, _opts, command: Command) =>
      runtime.run(command, async ({ client, out }) => {
        const r = await client.admin.setMetaVoters(n)
        out.result(metaVotersResult(r, n), r)
      }),
    )

  cluster
    .command('replication')
    .argument(
      '<n>',
      `replicas per data group: 1 to ${REPLICAS_PER_GROUP_MAX} (3 or 5 tolerate 1 or 2 failed nodes)`,
      integerArg(1, REPLICAS_PER_GROUP_MAX),
    )
    .description(
      "set the cluster's replication factor: every data group grows or shrinks to n replicas, one at a time, as live nodes allow (see `mq cluster status`)",
    )
    .action((n: number, _opts, command: Command) =>
      runtime.run(command, async ({ client, out }) => {
        const r = await client.admin.setReplicationFactor(n)
        out.result(replicationResult(r), r)
      }),
    )

  const node = program
    .command('node')
    .description('the nodes (mq-server processes) of the cluster')
    .addHelpText(
      'after',
      '\nExamples:\n  $ mq node list\n  $ mq node drain n3     # move every replica off n3 before removing it\n  $ mq node remove n3    # once drained and stopped: forget it\n',
    )
  node
    .command('list')
    .description('every node: address, liveness, last heartbeat, the Raft groups it holds')
    .action((_opts, command: Command) =>
      runtime.run(command, async ({ client, out, io }) => {
        const { nodes } = await client.admin.clusterStatus()
        out.table(nodes, nodeColumns(io.now()), (n) => n)
      }),
    )
  node
    .command('drain')
    .argument('<id>', 'the node id, as `mq node list` shows it')
    .description(
      'move every replica and leadership off a node so that it can be removed; prints how many replicas are left to move (run again to follow)',
    )
    .action((id: string, _opts, command: Command) =>
      runtime.run(command, async ({ client, out }) => {
        const remaining = await client.admin.drainNode(id)
        // The count alone repeats for ever when no node can take the replicas: say why.
        // Only a hint: a status that cannot be read does not fail the drain the cluster took.
        const status = remaining > 0 ? await client.admin.clusterStatus().catch(() => undefined) : undefined
        const stuck = status ? groupsWithoutTarget(status, id) : []
        // Fewer replicas need no new node: the meta group's size, or the replication factor
        // (a data group above it loses the drained replica instead of replacing it).
        const smaller = [
          ...(stuck.some((g) => g !== 0)
            ? ['keep fewer replicas per data group (mq cluster replication N)']
            : []),
          ...(stuck.includes(0) ? ['make the meta group smaller (mq cluster meta-voters N)'] : []),
        ]
          .map((s) => `, or ${s}`)
          .join('')
        const hint =
          stuck.length === 0
            ? ''
            : `\nit may not progress: no live node outside ${stuck.length === 1 ? 'group' : 'groups'} ${stuck.join(', ')} can take ${id}'s replica there; add a node (mq-server with --join)${smaller}`
        out.result(`${drainResult(id, remaining)}${hint}`, {
          nodeId: id,
          replicasRemaining: remaining,
          ...(stuck.length > 0 ? { groupsWithoutTarget: stuck } : {}),
        })
      }),
    )
  node
    .command('undrain')
    .argument('<id>', 'the node id, as `mq node list` shows it')
    .description(
      'undo a drain: the node takes new replicas again (those moved off are not moved back at once; new groups, `mq group scale` and the replica balancing use it)',
    )
    .action((id: string, _opts, command: Command) =>
      runtime.run(command, async ({ client, out }) => {
        const was = await client.admin.undrainNode(id)
        out.result(undrainResult(id, was), {
          nodeId: id,
          wasDraining: was,
        })
      }),
    )
  node
    .command('remove')
    .argument('<id>', 'the node id, as `mq node list` shows it')
    .description(
      'forget a node that holds nothing and has stopped (drained, or its replicas replaced): it leaves the node list and cannot come back under its id; refused while it is alive or holds a replica',
    )
    .action((id: string, _opts, command: Command) =>
      runtime.run(command, async ({ client, out }) => {
        await client.admin.removeNode(id)
        out.result(`removed node ${id}`, { nodeId: id, removed: true })
      }),
    )

  const group = program
    .command('group')
    .description('the Raft groups: group 0 is the meta group, the others hold queue partitions')
    .addHelpText(
      'after',
      '\nExamples:\n  $ mq group list\n  $ mq group scale 6                  # grow (or shrink) to 6 data groups\n  $ mq group transfer-leader 0 n2     # make n2 lead the meta group\n',
    )
  group
    .command('list')
    .description(
      'every Raft group, the meta group (0) first: leader, term, commit and applied index, replicas (the meta group shows no term or indexes, which the cluster status does not carry)',
    )
    .action((_opts, command: Command) =>
      runtime.run(command, async ({ client, out, io }) => {
        out.table(groupRows(await client.admin.clusterStatus()), groupColumns(io.now()), (g) => g)
      }),
    )
  group
    .command('scale')
    .argument('<n>', 'the number of data groups wanted', integerArg(1, 10_000))
    .description(
      'grow or shrink the number of data groups; partitions move in the background (see `mq cluster status`)',
    )
    .action((n: number, _opts, command: Command) =>
      runtime.run(command, async ({ client, out }) => {
        const plan = await client.admin.scaleDataGroups(n)
        out.result(
          plan ? `scaling to ${n} data groups: ${describePlan(plan)}` : `scaling to ${n} data groups`,
          plan ?? { targetGroups: n },
        )
      }),
    )
  group
    .command('transfer-leader')
    .argument('<group>', 'the group id (0 = meta)', integerArg(0))
    .argument('<node>', 'the node id to lead it')
    .description("move a group's leadership to another of its replicas")
    .action((groupId: number, nodeId: string, _opts, command: Command) =>
      runtime.run(command, async ({ client, out }) => {
        await client.admin.transferLeader(groupId, nodeId)
        out.result(`asked group ${groupId} to move its leadership to ${nodeId}`, {
          groupId,
          toNodeId: nodeId,
        })
      }),
    )
}

/** The Raft groups: the meta group (listed among the groups, or known by its voters) and the data groups. */
function describeGroups(status: ClusterStatus): string {
  const data = status.groups.filter((g) => g.groupId !== 0).length
  const meta = status.metaVoters.length > 0 || status.groups.some((g) => g.groupId === 0) ? 1 : 0
  return `${meta + data} (${meta} meta, ${data} data)`
}

/**
 * The groups holding a replica on `nodeId` that no live node outside them could take over (a
 * drain's replicas have nowhere to go): every live node that is not draining is a replica of
 * the group already. The meta group (0) counts by its voters and learners.
 */
export function groupsWithoutTarget(status: ClusterStatus, nodeId: string): number[] {
  const candidates = status.nodes.filter((n) => n.alive && !n.draining && n.nodeId !== nodeId)
  return groupRows(status)
    .filter((g) => g.replicas.some((r) => r.nodeId === nodeId))
    .filter((g) => candidates.every((n) => g.replicas.some((r) => r.nodeId === n.nodeId)))
    .map((g) => g.groupId)
}

/** How long ago `atMs` was, for people: `3s ago`, `just now`, `never` (0). */
export function formatAge(nowMs: number, atMs: number): string {
  if (atMs <= 0) return 'never'
  const ageMs = Math.max(0, Math.round(nowMs - atMs))
  return ageMs < 1 ? 'just now' : `${formatDuration(ageMs)} ago`
}

function describePlan(plan: ScalePlan): string {
  return `target ${plan.targetGroups} groups, ${plan.movesDone}/${plan.movesTotal} moves done, ${plan.state || 'pending'}`
}

function nodeColumns(nowMs: number) {
  return [
    { header: 'NODE', value: (n: NodeStatus) => n.nodeId },
    { header: 'ADDRESS', value: (n: NodeStatus) => n.address },
    {
      header: 'ALIVE',
      value: (n: NodeStatus) => `${n.alive ? 'yes' : 'no'}${n.draining ? ', draining' : ''}`,
    },
    { header: 'HEARTBEAT', value: (n: NodeStatus) => formatAge(nowMs, n.lastHeartbeatMs) },
    { header: 'GROUPS', value: (n: NodeStatus) => n.groupIds.join(',') || '-' },
  ]
}

/** The partition moves under way (a scale plan's, shown under the groups). */
function moveColumns(nowMs: number) {
  return [
    { header: 'MOVE', value: (m: PartitionMove) => m.moveId },
    { header: 'PARTITION', value: (m: PartitionMove) => `${m.queue}/${m.partition}` },
    { header: 'FROM', value: (m: PartitionMove) => m.fromGroup },
    { header: 'TO', value: (m: PartitionMove) => m.toGroup },
    {
      header: 'PHASE',
      // An aborted move's source lifts its fence next (format level 37): say why it ends so.
      value: (m: PartitionMove) => (m.phase === 'abort' ? 'abort (its target lost its majority)' : m.phase),
    },
    { header: 'STARTED', value: (m: PartitionMove) => formatAge(nowMs, m.startedAtMs) },
  ]
}

/**
 * A row of `group list`: a group as the cluster status lists it, or the meta group made from
 * the status's meta fields (servers list only the data groups), without the term and indexes
 * the status does not carry for it.
 */
type GroupRow =
  | GroupStatus
  | (Omit<GroupStatus, 'term' | 'commitIndex' | 'appliedIndex' | 'replicas'> & {
      readonly replicas: readonly { nodeId: string; address: string; learner: boolean }[]
      readonly term?: undefined
      readonly commitIndex?: undefined
      readonly appliedIndex?: undefined
    })

/** Every Raft group of `status`, the meta group (0) first even when the status lists only data groups. */
export function groupRows(status: ClusterStatus): GroupRow[] {
  if (status.groups.some((g) => g.groupId === 0))
    return [...status.groups].sort((a, b) => a.groupId - b.groupId)
  if (status.metaVoters.length === 0 && !status.metaLeaderId) return [...status.groups]
  const address = (id: string) => status.nodes.find((n) => n.nodeId === id)?.address ?? ''
  const meta: GroupRow = {
    groupId: 0,
    leaderId: status.metaLeaderId,
    state:
      // A change given up adds and removes nobody until it finishes.
      status.metaChange?.add || status.metaChange?.remove || status.metaChange?.startedAtMs
        ? 'changing'
        : status.metaLeaderId
          ? 'active'
          : 'electing',
    partitions: 0,
    ...(status.metaChange ? { change: status.metaChange } : {}),
    replicas: [
      ...status.metaVoters.map((nodeId) => ({ nodeId, address: address(nodeId), learner: false })),
      ...status.metaLearners.map((nodeId) => ({ nodeId, address: address(nodeId), learner: true })),
    ],
  }
  return [meta, ...status.groups]
}

const unknown = (n: number | undefined) => n ?? '-'

/**
 * A replica change under way: `n3 → n5 (drain, 4m 10s ago)`; one given up (adding and removing
 * nobody: its new node was lost, none could take its place) `given up (balance, 12s ago)`; '-'
 * for none.
 */
export function describeChange(nowMs: number, change: GroupStatus['change']): string {
  if (!change || (!change.add && !change.remove && !change.startedAtMs)) return '-'
  const age = formatAge(nowMs, change.startedAtMs)
  const what = change.add || change.remove ? `${change.remove || '∅'} → ${change.add || '∅'}` : 'given up'
  return `${what} (${change.reason || 'change'}, ${age})`
}

const groupColumns = (nowMs: number) => [
  { header: 'GROUP', value: (g: GroupRow) => g.groupId },
  { header: 'LEADER', value: (g: GroupRow) => g.leaderId || '(none)' },
  { header: 'STATE', value: (g: GroupRow) => g.state || '-' },
  { header: 'CHANGE', value: (g: GroupRow) => describeChange(nowMs, g.change) },
  { header: 'TERM', value: (g: GroupRow) => unknown(g.term) },
  { header: 'COMMIT', value: (g: GroupRow) => unknown(g.commitIndex) },
  { header: 'APPLIED', value: (g: GroupRow) => unknown(g.appliedIndex) },
  { header: 'PARTITIONS', value: (g: GroupRow) => g.partitions },
  {
    header: 'REPLICAS',
    value: (g: GroupRow) =>
      g.replicas.map((r) => (r.learner ? `${r.nodeId}(learner)` : r.nodeId)).join(',') || '-',
  },
]

/** The meta group's voters, learners being added and the change under way. */
