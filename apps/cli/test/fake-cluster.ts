import type { ClientOptions, ConsumerOptions, QueueOptions } from '@mq/router-client'
import {
  InvalidArgumentError,
  QueueExistsError,
  QueueNotFoundError,
  UnavailableError,
} from '@mq/router-client'
import type { CliAdmin, CliClient, CliConsumer, CliDelivery, CliIO, CliProducer } from '../src/index'

type QueueRoute = Awaited<ReturnType<CliAdmin['describeQueue']>>
type QueueConfig = NonNullable<QueueRoute['config']>
type ClusterStatus = Awaited<ReturnType<CliAdmin['clusterStatus']>>
type PartitionStats = Awaited<ReturnType<CliAdmin['queueStats']>>[number]

/** A stored message of the fake. */
export interface FakeMessage {
  id: number
  body: Uint8Array
  weight: number
  key: string
  headers: Record<string, string>
  deliveryCount: number
  delayMs: number
}

interface FakeQueue {
  config: QueueConfig
  ready: FakeMessage[][]
  dead: FakeMessage[][]
}

/**
 * An in-memory stand-in for a cluster behind the CliClient interface: queues with partitions,
 * ready and dead messages, leases that are acked or given back. It records every call, and
 * can be made unavailable. Not a model of the broker beyond what the CLI relies on.
 */
export class FakeCluster {
  readonly queues = new Map<string, FakeQueue>()
  readonly tokens = new Map<
    string,
    { name: string; roles: string[]; createdAtMs: number; expiresAtMs: number }
  >()
  readonly calls: string[] = []
  /** Every call fails with UnavailableError (a retriable error) while set. */
  unavailable = false
  /** Fail produce with this error after this many messages were accepted. */
  produceFailsAfter: { count: number; error: Error } | undefined
  connectOptions: ClientOptions | undefined
  /** queueStats of these queues fails with this error (a token that may not read them). */
  readonly statsRefused = new Map<string, Error>()
  consumerOptions: Partial<ConsumerOptions> | undefined
  status: ClusterStatus = {
    metaLeaderId: 'n1',
    formatLevel: 2,
    metaVoters: ['n1', 'n2', 'n3'],
    metaLearners: ['n4'],
    metaChange: { add: 'n4', remove: 'n3', reason: 'dead', startedAtMs: 1_000 },
    metaVotersWanted: 0,
    replicationFactor: 3,
    routeEpoch: 7,
    nodes: [
      {
        nodeId: 'n1',
        address: '10.0.0.1:7001',
        alive: true,
        lastHeartbeatMs: 9_000,
        groupIds: [0, 1],
        draining: false,
        formatLevel: 2,
      },
      {
        nodeId: 'n2',
        address: '10.0.0.2:7001',
        alive: false,
        lastHeartbeatMs: 0,
        groupIds: [0],
        draining: true,
        formatLevel: 1,
      },
    ],
    groups: [
      {
        groupId: 0,
        leaderId: 'n1',
        replicas: [
          { nodeId: 'n1', address: '10.0.0.1:7001', learner: false, appliedIndex: 0 },
          { nodeId: 'n2', address: '10.0.0.2:7001', learner: true, appliedIndex: 0 },
        ],
        term: 3,
        commitIndex: 120,
        appliedIndex: 119,
        partitions: 0,
        state: 'active',
      },
    ],
    scale: undefined,
    moves: [
      { moveId: 3, queue: 'jobs', partition: 1, fromGroup: 1, toGroup: 2, phase: 'copy', startedAtMs: 8_000 },
      {
        moveId: 4,
        queue: 'jobs',
        partition: 2,
        fromGroup: 1,
        toGroup: 3,
        phase: 'abort',
        startedAtMs: 8_000,
      },
    ],
  }
  readonly acked: number[] = []
  /** Messages given back (released: their delivery count stays one up; max deliveries not enforced). */
  readonly released: number[] = []
  /**
   * Consumers stopping (`stop:<queue>`) and messages given back (`release:<id>`), in order: a
   * real consumer that still leases takes a message given back again at once.
   */
  readonly consumerEvents: string[] = []
  #nextId = 1
  #wakeConsumers: (() => void)[] = []

  addQueue(name: string, partitions = 1, config: Partial<QueueConfig> = {}): void {
    this.queues.set(name, {
      config: { ...defaultConfig(), partitions, ...config },
      ready: Array.from({ length: partitions }, () => []),
      dead: Array.from({ length: partitions }, () => []),
    })
  }

  /** Adds a ready message directly (as another producer would). */
  put(
    queue: string,
    partition: number,
    message: Partial<Omit<FakeMessage, 'body'>> & { body: Uint8Array | string },
  ): FakeMessage {
    const m: FakeMessage = {
      id: this.#nextId++,
      weight: 1,
      key: '',
      headers: {},
      deliveryCount: 0,
      delayMs: 0,
      ...message,
      body: typeof message.body === 'string' ? new TextEncoder().encode(message.body) : message.body,
    }
    this.#queue(queue).ready[partition]?.push(m)
    for (const wake of this.#wakeConsumers.splice(0)) wake()
    return m
  }

  bury(queue: string, partition: number, body: string): void {
    this.#queue(queue).dead[partition]?.push({
      id: this.#nextId++,
      body: new TextEncoder().encode(body),
      weight: 1,
      key: '',
      headers: {},
      deliveryCount: 5,
      delayMs: 0,
    })
  }

  ready(queue: string): FakeMessage[] {
    return this.#queue(queue).ready.flat()
  }

  /** A CliIO around this cluster, capturing stdout and stderr. */
  io(
    options: {
      stdin?: (string | Uint8Array)[]
      env?: Record<string, string>
      files?: Record<string, Uint8Array>
      /** stdout's reader leaves after this many lines (a pipe to `head`): later writes fail with EPIPE. */
      stdoutLines?: number
    } = {},
  ) {
    const stdout: string[] = []
    const stderr: string[] = []
    const interrupt = new AbortController()
    const lines = options.stdoutLines
    let readerGone = false
    const write =
      lines === undefined
        ? (s: string) => stdout.push(s)
        : (s: string, done?: (error?: Error | null) => void) => {
            // A line past the reader's fails, and so does every write after it (an empty
            // write, mq's flush, fails only then).
            if (s !== '' && stdout.length >= lines) readerGone = true
            const gone = readerGone
            if (!gone && s !== '') stdout.push(s)
            const error = gone ? Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }) : null
            setImmediate(() => {
              done?.(error)
              // as the binary's nodeIO does
              if (error && !interrupt.signal.aborted)
                interrupt.abort({ why: "stdout's reader left (EPIPE)", exitCode: 0 })
            })
            return !gone
          }
    const io: CliIO = {
      stdout: { write },
      stderr: { write: (s: string) => stderr.push(s) },
      stdin: (async function* () {
        yield* options.stdin ?? []
      })(),
      env: options.env ?? {},
      connect: async (o) => {
        this.connectOptions = o
        this.#check('connect')
        return this.client()
      },
      readFile: async (path) => {
        const file = options.files?.[path]
        if (!file) throw new Error(`ENOENT: no such file or directory, open '${path}'`)
        return file
      },
      now: () => 10_000,
      interrupt: interrupt.signal,
    }
    return { io, stdout: () => stdout.join(''), stderr: () => stderr.join(''), interrupt }
  }

  client(): CliClient {
    let closed = false
    return {
      admin: this.#admin(),
      producer: (queue) => this.#producer(queue),
      consumer: (queue, options) => {
        this.consumerOptions = options
        return this.#consumer(queue, options?.prefetch ?? 64, () => closed)
      },
      close: async () => {
        closed = true
        this.calls.push('close')
      },
    }
  }

  #check(call: string): void {
    this.calls.push(call)
    if (this.unavailable) throw new UnavailableError('no connection established')
  }

  #queue(name: string): FakeQueue {
    const q = this.queues.get(name)
    if (!q) throw new QueueNotFoundError(`queue ${name} does not exist`)
    return q
  }

  #route(name: string): QueueRoute {
    const q = this.#queue(name)
    return {
      queue: name,
      queueId: 1,
      config: { ...q.config },
      routeEpoch: 7,
      partitionsEpoch: 0,
      partitions: q.ready.map((_, partition) => ({
        partition,
        groupId: partition + 1,
        leaderId: 'n1',
        leaderAddress: '10.0.0.1:7001',
        replicas: [{ nodeId: 'n1', address: '10.0.0.1:7001', learner: false, appliedIndex: 0 }],
        engine: q.config.engine,
      })),
    }
  }

  #admin(): CliAdmin {
    const call = <T>(name: string, fn: () => T): Promise<T> => {
      try {
        this.#check(name)
        return Promise.resolve(fn())
      } catch (error) {
        return Promise.reject(error)
      }
    }
    return {
      createQueue: (name: string, options: QueueOptions = {}) =>
        call(`createQueue:${name}:${JSON.stringify(options)}`, () => {
          if (this.queues.has(name)) throw new QueueExistsError(`queue ${name} exists`)
          this.addQueue(name, options.partitions || 1, options)
          return this.#route(name)
        }),
      updateQueue: (name, update) =>
        call(`updateQueue:${name}:${JSON.stringify(update)}`, () => {
          const q = this.#queue(name)
          q.config = { ...q.config, ...update }
          while (q.ready.length < q.config.partitions) q.ready.push([])
          return this.#route(name)
        }),
      deleteQueue: (name) =>
        call(`deleteQueue:${name}`, () => {
          this.#queue(name)
          this.queues.delete(name)
        }),
      describeQueue: (name) => call(`describeQueue:${name}`, () => this.#route(name)),
      listQueues: (prefix = '', limit = 10_000) =>
        call(`listQueues:${prefix}:${limit}`, () =>
          [...this.queues.keys()]
            .filter((q) => q.startsWith(prefix))
            .slice(0, limit)
            .map((q) => this.#route(q)),
        ),
      clusterStatus: () => call('clusterStatus', () => this.status),
      scaleDataGroups: (groups) =>
        call(`scaleDataGroups:${groups}`, () => ({
          targetGroups: groups,
          movesTotal: 4,
          movesDone: 0,
          state: 'moving',
        })),
      purgeQueue: (name) =>
        call(`purgeQueue:${name}`, () => {
          const q = this.#queue(name)
          const n = q.ready.flat().length
          q.ready = q.ready.map(() => [])
          return n
        }),
      deadLetters: (name, limit = 100) =>
        call(`deadLetters:${name}:${limit}`, () =>
          this.#queue(name).dead.flatMap((list, partition) =>
            list
              .slice(0, limit)
              .map((m) => ({ ...m, partition, leaseId: '', deadlineMs: 0, enqueuedAtMs: 0 })),
          ),
        ),
      // The SDK's peek has an overload with `map` (the console's); mq uses the plain one.
      peek: ((name: string, limit = 100) =>
        call(`peek:${name}:${limit}`, () =>
          this.#queue(name).ready.flatMap((list, partition) =>
            [...list]
              .sort((a, b) => b.weight - a.weight)
              .slice(0, limit)
              .map((m) => ({ ...m, partition, leaseId: '', deadlineMs: 0, enqueuedAtMs: 0 })),
          ),
        )) as CliAdmin['peek'],
      redriveDeadLetters: (name, max = 1_000_000) =>
        call(`redriveDeadLetters:${name}:${max}`, () => {
          const q = this.#queue(name)
          let moved = 0
          q.dead.forEach((list, p) => {
            const back = list.splice(0, max)
            moved += back.length
            q.ready[p]?.push(...back)
          })
          return moved
        }),
      purgeDeadLetters: (name) =>
        call(`purgeDeadLetters:${name}`, () => {
          const q = this.#queue(name)
          const n = q.dead.flat().length
          q.dead = q.dead.map(() => [])
          return n
        }),
      queueStats: (name) =>
        call(`queueStats:${name}`, () => {
          const refused = this.statsRefused.get(name)
          if (refused) throw refused
          return this.#queue(name).ready.map(
            (list, partition): PartitionStats =>
              // Only what the CLI reads; the totals of PartitionStats are left out on purpose.
              ({
                queue: name,
                partition,
                groupId: partition + 1,
                waiting: this.#queue(name).config.orderedKeys ? 3 : 0,
                weights: [...new Set(list.map((m) => m.weight))].map((weight) => ({
                  weight,
                  ready: list.filter((m) => m.weight === weight).length,
                  delayed: 0,
                  leased: 0,
                  dead: this.#queue(name).dead[partition]?.length ?? 0,
                  oldestAgeMs: 1_500,
                  targetShare: 0.5,
                  achievedShare: 0.25,
                })),
              }) as PartitionStats,
          )
        }),
      drainNode: (nodeId) =>
        call(`drainNode:${nodeId}`, () => {
          if (!this.status.nodes.some((n) => n.nodeId === nodeId))
            throw new InvalidArgumentError(`node ${nodeId} is not registered`)
          return nodeId === 'n2' ? 3 : 0
        }),
      undrainNode: (nodeId) =>
        call(`undrainNode:${nodeId}`, () => {
          if (!this.status.nodes.some((n) => n.nodeId === nodeId))
            throw new InvalidArgumentError(`node ${nodeId} is not registered`)
          return nodeId === 'n2'
        }),
      removeNode: (nodeId) =>
        call(`removeNode:${nodeId}`, () => {
          if (nodeId === 'n1')
            throw new InvalidArgumentError('node n1 is alive (heard from 0.2 s ago): stop it')
        }),
      setMetaVoters: (voters) =>
        call(`setMetaVoters:${voters}`, () => {
          this.status = { ...this.status, metaVotersWanted: voters }
          return { voters: [...this.status.metaVoters], votersWanted: voters }
        }),
      setReplicationFactor: (factor) =>
        call(`setReplicationFactor:${factor}`, () => {
          const previous = this.status.replicationFactor
          this.status = { ...this.status, replicationFactor: factor }
          return { previous, factor }
        }),
      transferLeader: (groupId, toNodeId) =>
        call(`transferLeader:${groupId}:${toNodeId}`, () => {
          if (groupId > 5) throw new InvalidArgumentError(`data group ${groupId} does not exist`)
        }),
      createToken: (name, roles, options = {}) =>
        call(`createToken:${name}:${roles.join(',')}:${options.ttlMs ?? 0}`, () => {
          if (this.tokens.has(name))
            throw new InvalidArgumentError(`a token named ${name} exists; delete it first`)
          const createdAtMs = 1_700_000_000_000
          const expiresAtMs = options.ttlMs ? createdAtMs + options.ttlMs : 0
          this.tokens.set(name, { name, roles: [...roles], createdAtMs, expiresAtMs })
          return { name, token: `mq_secret_of_${name}`, expiresAtMs }
        }),
      deleteToken: (name) =>
        call(`deleteToken:${name}`, () => {
          if (!this.tokens.delete(name)) throw new InvalidArgumentError(`no token is named ${name}`)
        }),
      listTokens: () => call('listTokens', () => [...this.tokens.values()]),
    }
  }

  #producer(queue: string): CliProducer {
    let accepted = 0
    let partitionNext = 0
    const send: CliProducer['send'] = async (message) => {
      this.#check('send')
      const q = this.#queue(queue)
      const failing = this.produceFailsAfter
      if (failing && accepted >= failing.count) throw failing.error
      accepted++
      const partition = partitionNext++ % q.ready.length
      const m = this.put(queue, partition, {
        body: message.body,
        weight: message.weight ?? 1,
        key: message.key ?? '',
        headers: { ...message.headers },
        delayMs: message.delayMs ?? 0,
      })
      return { id: m.id, partition, duplicate: false }
    }
    return { send, flush: async () => {}, close: async () => {} }
  }

  #consumer(queue: string, prefetch: number, clientClosed: () => boolean): CliConsumer {
    let closed = false
    let held = 0
    const cluster = this
    const wake = () => {
      for (const w of this.#wakeConsumers.splice(0)) w()
    }
    const take = (): CliDelivery | undefined => {
      const q = cluster.#queue(queue)
      if (q.config.paused) return undefined
      for (const [partition, list] of q.ready.entries()) {
        const m = list.shift()
        if (!m) continue
        m.deliveryCount++
        held++
        let settled = false
        const settle = async (kind: 'ack' | 'release') => {
          if (settled) throw new Error(`message ${m.id} is already settled`)
          settled = true
          held--
          if (kind === 'ack') cluster.acked.push(m.id)
          else {
            cluster.released.push(m.id)
            cluster.consumerEvents.push(`release:${m.id}`)
            list.unshift(m)
          }
          wake()
        }
        return {
          id: m.id,
          partition,
          body: m.body,
          weight: m.weight,
          headers: m.headers,
          key: m.key,
          deliveryCount: m.deliveryCount,
          ack: () => settle('ack'),
          release: () => settle('release'),
        }
      }
      return undefined
    }
    return {
      async *[Symbol.asyncIterator]() {
        cluster.#check(`consume:${queue}`)
        cluster.#queue(queue)
        while (!closed && !clientClosed()) {
          const d = held < prefetch ? take() : undefined
          if (d) {
            yield d
            continue
          }
          await new Promise<void>((resolve) => cluster.#wakeConsumers.push(resolve))
        }
      },
      stop: async () => {
        if (!closed) cluster.consumerEvents.push(`stop:${queue}`)
        closed = true
        wake()
      },
      close: async () => {
        closed = true
        wake()
      },
    }
  }
}

function defaultConfig(): QueueConfig {
  return {
    partitions: 1,
    visibilityTimeoutMs: 30_000,
    maxDeliveries: 5,
    deadLetterQueue: '',
    messageBytesMax: 1_048_576,
    queueLengthMax: 1_000_000,
    strictPriority: false,
    dedupWindowMs: 0,
    messageTtlMs: 0,
    paused: false,
    orderedKeys: false,
    deliveryRate: 0,
    retryBackoffMinMs: 0,
    retryBackoffMaxMs: 0,
    engine: 'leveldb',
  }
}
