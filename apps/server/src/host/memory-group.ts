import {
  type DataCommand,
  DataGroupMachine,
  type DataGroupPort,
  type DataResult,
  encodeDataCommand,
  storedQueueName,
} from '@mq/data-service'
import { MemoryEngine, stateMachineRange } from '@mq/kv-storage'
import { NotLeaderError } from '@mq/protocol'

/** For tests: a data group on a memory engine whose proposals apply at once (a leader of one). */
export async function memoryGroup(groupId: number, leads = true) {
  const engine = new MemoryEngine()
  const machine = await DataGroupMachine.open(groupId, engine)
  const proposed: DataCommand[] = []
  const port: DataGroupPort = {
    groupId,
    machine,
    propose: async (command): Promise<DataResult> => {
      proposed.push(command)
      const applied = await machine.apply(encodeDataCommand(command), port.nowMs())
      await engine.write(applied.ops, { sync: false })
      applied.written()
      return applied.result
    },
    assertLeader: () => {
      if (!leads) throw new NotLeaderError('not the leader', { leaderId: 'n2', leaderAddress: '', groupId })
      return 1
    },
    settled: async () => {},
    readBarrier: async () => {},
    nowMs: () => 1_000,
  }
  const open = async (queue: string, queueId: number, partition: number) => {
    const stored = storedQueueName(queue, queueId)
    await port.propose({ type: 'open', queue: stored, partition, config: {} })
    await port.propose({
      type: 'apply',
      queue: stored,
      partition,
      command: { type: 'enqueue', messages: [{ body: Uint8Array.of(1, 2, 3), weight: 1 }] },
    })
  }
  const keys = async () => (await engine.range(stateMachineRange(groupId))).length
  return { port, engine, proposed, open, keys }
}

/**
 * For tests: leases up to `count` ready messages of partition `queue/partition` of `port`'s
 * group and nacks them (dead letters, when the partition allows one delivery).
 */
export async function leaseAndNack(port: DataGroupPort, queue: string, partition: number, count: number) {
  const leased = await port.propose({
    type: 'apply',
    queue,
    partition,
    command: { type: 'lease', consumerId: 'c', max: count, visibilityMs: 1_000 },
  })
  const leaseIds =
    leased.type === 'applied' && leased.result.type === 'lease'
      ? leased.result.leases.map((l) => l.leaseId)
      : []
  await port.propose({ type: 'apply', queue, partition, command: { type: 'nack', leaseIds } })
}
