import { MqClient } from '@mq/router-client'
import { afterAll, beforeAll } from 'vitest'
import { type ClusterOptions, LocalCluster } from './cluster'

/** What `suiteCluster` gives a describe block: read these inside its tests. */
export interface SuiteCluster {
  readonly cluster: LocalCluster
  readonly client: MqClient
}

/**
 * A cluster (3 nodes unless `options` say) and one client of it for the describe block that
 * calls this: started in its beforeAll, the client closed and the cluster stopped (each
 * process by its PID) in its afterAll.
 */
export function suiteCluster(options: ClusterOptions = { nodes: 3 }, deadlineMs = 30_000): SuiteCluster {
  let cluster: LocalCluster | undefined
  let client: MqClient | undefined
  beforeAll(async () => {
    cluster = await LocalCluster.start(options)
    client = await MqClient.connect({ servers: cluster.servers, deadlineMs })
  }, 120_000)
  afterAll(async () => {
    await client?.close()
    await cluster?.stop()
  })
  return {
    get cluster(): LocalCluster {
      if (!cluster) throw new Error('the suite cluster is not started (use it inside a test)')
      return cluster
    },
    get client(): MqClient {
      if (!client) throw new Error('the suite cluster is not started (use it inside a test)')
      return client
    },
  }
}
