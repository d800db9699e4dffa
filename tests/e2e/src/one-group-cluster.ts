import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { MqClient } from '@mq/router-client'
import { LocalCluster } from './cluster'

/** A cluster of one data group on its founders n1-n3, with n4 and n5 joined, and a client. */
export interface OneGroupCluster {
  readonly cluster: LocalCluster
  readonly client: MqClient
  /** Closes the client, stops the cluster and removes the config file's folder. */
  close(): Promise<void>
}

/**
 * Starts 3 founders with one data group (`dataGroups: 1` in a config file), so that a change of
 * its replicas goes to n4 first (the live node outside the group with the fewest replicas, first
 * by id), then n5; joins n4 and n5. `serverArgs` go to every node after the config file.
 */
export async function startOneGroupCluster(
  serverArgs: readonly string[],
  options: { readonly netns?: boolean } = {},
): Promise<OneGroupCluster> {
  const configDir = mkdtempSync(join(tmpdir(), 'mq-one-group-'))
  const config = join(configDir, 'config.json')
  writeFileSync(config, JSON.stringify({ dataGroups: 1 }))
  let cluster: LocalCluster | undefined
  let client: MqClient | undefined
  const close = async () => {
    await client?.close()
    await cluster?.stop()
    rmSync(configDir, { recursive: true, force: true })
  }
  try {
    cluster = await LocalCluster.start({
      nodes: 3,
      ...(options.netns ? { netns: true } : {}),
      serverArgs: ['--config', config, ...serverArgs],
    })
    await cluster.join() // n4
    await cluster.join() // n5
    client = await MqClient.connect({ servers: cluster.servers, deadlineMs: 20_000, attemptMs: 1_500 })
    return { cluster, client, close }
  } catch (error) {
    await close()
    throw error
  }
}
