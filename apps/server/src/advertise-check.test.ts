import { describe, expect, it } from 'vitest'
import { advertiseProblem } from './advertise-check'

const noWait = { wait: async () => {} }

describe('advertiseProblem', () => {
  it('is none when the address answers with this node', async () => {
    expect(await advertiseProblem('n1', 'a:1', async () => ({ nodeId: 'n1' }), noWait)).toBeUndefined()
  })

  it('names the node another address reaches', async () => {
    expect(await advertiseProblem('n7', 'a:1', async () => ({ nodeId: 'n6' }), noWait)).toBe(
      '--advertise a:1 reaches node n6, not node n7: the cluster sends what is meant for n7 there; give this node an address of its own (--advertise, default --listen)',
    )
  })

  it('says the address cannot be reached after three tries, with the last error', async () => {
    let tries = 0
    const problem = await advertiseProblem(
      'n1',
      'a:1',
      async () => {
        tries++
        throw new Error(`refused ${tries}`)
      },
      noWait,
    )
    expect(tries).toBe(3)
    expect(problem).toMatch(/^node n1 cannot reach its own --advertise a:1 \(refused 3\): /)
  })

  it('takes a later answer after a failed try', async () => {
    let tries = 0
    const probe = async () => {
      if (++tries === 1) throw new Error('not yet')
      return { nodeId: 'n1' }
    }
    expect(await advertiseProblem('n1', 'a:1', probe, noWait)).toBeUndefined()
  })

  it('tries no more once it is no longer wanted (the node stops)', async () => {
    let tries = 0
    let wanted = true
    const probe = async () => {
      tries++
      wanted = false
      throw new Error('closed')
    }
    expect(await advertiseProblem('n1', 'a:1', probe, { ...noWait, wanted: () => wanted })).toBeUndefined()
    expect(tries).toBe(1)
  })
})
