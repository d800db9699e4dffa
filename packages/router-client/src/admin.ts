import type {
  ClusterStatusResponse,
  QueueConfig,
  QueueConfigUpdate,
  QueueRoute,
  ScalePlan,
} from '@mq/protocol'
import type { Router } from './router'

/** Settings of a new queue; anything left out takes the cluster's default. */
export type QueueOptions = Partial<QueueConfig>

/** Cluster administration through the meta group. Every call retries redirects until its deadline. */
export class Admin {
  readonly #router: Router

  constructor(router: Router) {
    this.#router = router
  }

  /** Creates `name`; throws QueueExistsError when it exists, InvalidArgumentError for bad settings. */
  async createQueue(name: string, options: QueueOptions = {}): Promise<QueueRoute> {
    const config: QueueConfig = {
      partitions: 0,
      visibilityTimeoutMs: 0,
      maxDeliveries: 0,
      deadLetterQueue: '',
      messageBytesMax: 0,
      queueLengthMax: 0,
      strictPriority: false,
      dedupWindowMs: 0,
      engine: '',
      ...options,
    }
    return this.#router.meta((m) => m.createQueue, { name, config })
  }

  /** Changes the settings given in `update`; the rest stay. */
  async updateQueue(name: string, update: QueueConfigUpdate): Promise<QueueRoute> {
    this.#router.invalidate(name)
    return this.#router.meta((m) => m.updateQueue, { name, update })
  }

  /** Deletes `name` and its messages. Throws QueueNotFoundError when it does not exist. */
  async deleteQueue(name: string): Promise<void> {
    this.#router.invalidate(name)
    await this.#router.meta((m) => m.deleteQueue, { name })
  }

  /** Describes `name`: its settings and where its partitions live. */
  async describeQueue(name: string): Promise<QueueRoute> {
    return this.#router.meta((m) => m.describeQueue, { name })
  }

  /** Lists the queues whose names start with `prefix`, following pages up to `limit` queues. */
  async listQueues(prefix = '', limit = 10_000): Promise<QueueRoute[]> {
    const queues: QueueRoute[] = []
    let pageToken = ''
    do {
      const page = await this.#router.meta((m) => m.listQueues, {
        prefix,
        limit: Math.min(1000, limit - queues.length),
        pageToken,
      })
      queues.push(...page.queues)
      pageToken = page.nextPageToken
    } while (pageToken && queues.length < limit)
    return queues
  }

  async clusterStatus(): Promise<ClusterStatusResponse> {
    return this.#router.meta((m) => m.clusterStatus, {})
  }

  /** Asks the meta leader to grow or shrink the data groups to `groups`; returns the plan. */
  async scaleDataGroups(groups: number): Promise<ScalePlan | undefined> {
    return (await this.#router.meta((m) => m.scaleDataGroups, { groups })).plan
  }

  /** Moves the leadership of a group (0 = meta) to `toNodeId`. */
  async transferLeader(groupId: number, toNodeId: string): Promise<void> {
    await this.#router.meta((m) => m.transferLeader, { groupId, toNodeId })
  }
}
