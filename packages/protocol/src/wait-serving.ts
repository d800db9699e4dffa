import { type ChannelCredentials, credentials, Metadata } from '@grpc/grpc-js'
import { HealthClient, HealthCheckResponse_ServingStatus as Serving } from './generated/grpc/health/v1/health'

/**
 * Resolves once the server at `address` answers the standard health check ('' = the whole
 * server) with SERVING, polling every 100 ms; rejects naming the address after `timeoutMs`.
 * For tools and tests that start servers and must wait for them; `channel` gives TLS
 * credentials for a server that requires them.
 */
export async function waitServing(
  address: string,
  timeoutMs = 30_000,
  channel: ChannelCredentials = credentials.createInsecure(),
): Promise<void> {
  const client = new HealthClient(address, channel)
  const deadline = Date.now() + timeoutMs
  try {
    while (Date.now() < deadline) {
      const status = await new Promise<Serving | undefined>((resolve) =>
        client.check({ service: '' }, new Metadata(), { deadline: Date.now() + 1_000 }, (e, r) =>
          resolve(e ? undefined : r.status),
        ),
      )
      if (status === Serving.SERVING) return
      await new Promise((r) => setTimeout(r, 100))
    }
    throw new Error(`${address} did not become healthy within ${timeoutMs} ms`)
  } finally {
    client.close()
  }
}
