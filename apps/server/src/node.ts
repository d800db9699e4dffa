import { mkdirSync } from 'node:fs'
import { Server, ServerCredentials } from '@grpc/grpc-js'
import { HealthService } from '@mq/protocol'
import type { ServerConfig } from './config'
import { HealthRegistry } from './health'

/** Bound on one gRPC message, both ways (a produce batch, a Raft batch). */
const MESSAGE_BYTES_MAX = 64 * 1024 * 1024

/**
 * One `mq-server` process: one data dir, one gRPC port for clients and peers, and (as the
 * cluster lands) one multi-Raft host with at most one meta replica and any number of data
 * group replicas.
 */
export class MqNode {
  readonly config: ServerConfig
  readonly health = new HealthRegistry()
  readonly #server = new Server({
    'grpc.max_receive_message_length': MESSAGE_BYTES_MAX,
    'grpc.max_send_message_length': MESSAGE_BYTES_MAX,
  })
  #port = 0

  constructor(config: ServerConfig) {
    this.config = config
  }

  /** The port the gRPC server is bound to (useful with port 0). */
  get port(): number {
    return this.#port
  }

  /** Creates the data dir if needed and binds the gRPC server. Rejects naming what failed. */
  async start(): Promise<void> {
    try {
      mkdirSync(this.config.dataDir, { recursive: true })
    } catch (error) {
      throw new Error(`cannot create data dir ${this.config.dataDir}: ${(error as Error).message}`, {
        cause: error,
      })
    }
    this.#server.addService(HealthService, this.health.handlers())
    this.#port = await new Promise<number>((resolve, reject) =>
      this.#server.bindAsync(this.config.listen, ServerCredentials.createInsecure(), (error, port) =>
        error
          ? reject(new Error(`cannot listen on ${this.config.listen}: ${error.message}`, { cause: error }))
          : resolve(port),
      ),
    )
    this.health.set('', true)
  }

  /** Stops taking calls, lets running ones finish (up to `graceMs`), then closes. */
  async stop(graceMs = 5_000): Promise<void> {
    this.health.set('', false)
    this.health.close()
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.#server.forceShutdown()
        resolve()
      }, graceMs)
      this.#server.tryShutdown(() => {
        clearTimeout(timer)
        resolve()
      })
    })
  }
}
