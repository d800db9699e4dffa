import { MetaState } from './meta-state'

/** For tests: a meta state with nodes n1..n`nodes` registered and one data group per replica list. */
export function stateWith(nodes: number, groups: readonly string[][]): MetaState {
  const s = new MetaState()
  for (let i = 1; i <= nodes; i++)
    s.apply({ type: 'registerNode', nodeId: `n${i}`, address: `127.0.0.1:${7000 + i}` }, 1)
  for (const replicas of groups) s.apply({ type: 'createGroup', replicas }, 2)
  return s
}
