import { InvalidConfigError } from './errors'
import type { ConfState, ReplicaId } from './types'

/**
 * Single-server membership changes (dissertation §4.1, Raft §6): each change adds or removes
 * one server, so any majority of the old voters and any majority of the new overlap.
 * A configuration takes effect as soon as its entry is in a replica's log (not when
 * committed) and is undone if that entry is truncated. Safety also needs the leader rule:
 * a leader proposes a change only after an entry of its own term is committed and while no
 * other change is uncommitted (the fix to the single-server bug, Ongaro 2015).
 */
export const ConfChangeType = {
  /** Adds a voter, or promotes a learner to voter. */
  AddVoter: 'addVoter',
  /** Adds a learner (replicated to, never counted), or demotes a voter to learner. */
  AddLearner: 'addLearner',
  /** Removes a voter or a learner; removing the leader makes it step down once committed. */
  Remove: 'remove',
} as const
export type ConfChangeType = (typeof ConfChangeType)[keyof typeof ConfChangeType]

export interface ConfChange {
  readonly type: ConfChangeType
  readonly id: ReplicaId
}

const encoder = new TextEncoder()
const decoder = new TextDecoder('utf-8', { ignoreBOM: true })

/** Encodes a change as the data of a ConfChange entry (UTF-8 `type:id`). */
export function encodeConfChange(change: ConfChange): Uint8Array {
  return encoder.encode(`${change.type}:${change.id}`)
}

/** Decodes a ConfChange entry's data, or returns null when it is not a valid change. */
export function decodeConfChange(data: Uint8Array): ConfChange | null {
  const text = decoder.decode(data)
  const colon = text.indexOf(':')
  if (colon < 0) return null
  const type = text.slice(0, colon)
  const id = text.slice(colon + 1)
  if (id === '') return null
  if (
    type !== ConfChangeType.AddVoter &&
    type !== ConfChangeType.AddLearner &&
    type !== ConfChangeType.Remove
  ) {
    return null
  }
  return { type, id }
}

/**
 * Returns `conf` with `change` applied. Each change assigns one replica a role (voter,
 * learner, none), so applying it twice gives the same result: replaying changes on restart
 * is safe.
 */
export function applyConfChange(conf: ConfState, change: ConfChange): ConfState {
  const voters = conf.voters.filter((v) => v !== change.id)
  const learners = conf.learners.filter((v) => v !== change.id)
  if (change.type === ConfChangeType.AddVoter) voters.push(change.id)
  else if (change.type === ConfChangeType.AddLearner) learners.push(change.id)
  return { voters, learners, votersOutgoing: [], learnersNext: [] }
}

/** True when the configuration names no replica at all (a replica waiting to be added). */
export function isEmptyConf(conf: ConfState): boolean {
  return conf.voters.length === 0 && conf.learners.length === 0
}

/**
 * Throws InvalidConfigError unless `conf` is a valid single (non-joint) configuration with at
 * least one voter and no id twice; with `self`, also unless self is a member.
 */
export function validateConfState(conf: ConfState, self?: ReplicaId): void {
  const problem = confStateProblem(conf)
  if (problem !== '') throw new InvalidConfigError(problem)
  if (self !== undefined && !conf.voters.includes(self) && !conf.learners.includes(self)) {
    throw new InvalidConfigError(
      `replica ${self} is not in its own configuration (voters ${conf.voters.join(',')}); add it, or start it with an empty configuration to join an existing group`,
    )
  }
}

/**
 * Why this core cannot hold `conf` ('' when it can): a joint configuration, no voter, an id
 * that is not a non-empty string, or one listed twice. A snapshot from a peer whose
 * configuration has one is dropped as malformed (message.ts): stored, it failed the replica's
 * next start.
 */
export function confStateProblem(conf: ConfState): string {
  if (conf.votersOutgoing.length > 0 || conf.learnersNext.length > 0)
    return 'joint configurations are not supported: this core changes membership one server at a time'
  if (conf.voters.length === 0)
    return 'a configuration needs at least one voter; list the voters in ConfState.voters'
  const seen = new Set<ReplicaId>()
  for (const id of [...conf.voters, ...conf.learners]) {
    if (typeof id !== 'string' || id === '') return 'replica ids must be non-empty strings'
    if (seen.has(id)) return `replica id ${id} appears twice in the configuration; ids must be unique`
    seen.add(id)
  }
  return ''
}
