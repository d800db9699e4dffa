// The client CPU of Producer.send, without a network: a router stub answers every batch at
// once, so what is measured is the producer's own work per message (buffering, lanes,
// batching, delivery timeouts, promises). `pnpm --filter @mq/router-client bench` after a
// build; compare two trees by running each (`node bench/send-cpu.mjs [count]`).
import { Producer } from '../dist/index.js'

const count = Number(process.argv[2] ?? 200_000)
if (!Number.isInteger(count) || count < 1) {
  console.error(`send-cpu: count must be a positive integer, got ${process.argv[2]}`)
  process.exit(1)
}
const route = { partitions: [{ partition: 0 }], routeEpoch: 1, config: {} }
let nextId = 1
const router = {
  options: { deadlineMs: 15_000, attemptMs: 5_000, backoff: { initialMs: 25, maxMs: 1_000, multiplier: 2 } },
  route: async () => route,
  cachedRoute: () => route,
  partition: async (_queue, _partition, operation) => {
    let messages = 0
    const produce = (request, _metadata, _options, callback) => {
      messages = request.messages.length
      callback(null, {})
      return {}
    }
    await operation({ queue: { produce } }, { queue: 'q', partition: 0, routeEpoch: 1 }).catch(() => {})
    return { ids: Array.from({ length: messages }, () => nextId++), pipelining: true, duplicate: false }
  },
}
const producer = new Producer(router, 'q', { idempotent: true })
const body = 'x'.repeat(128)
for (let round = 1; round <= 3; round++) {
  const cpu = process.cpuUsage()
  const started = performance.now()
  const inFlight = []
  for (let i = 0; i < count; i++) {
    inFlight.push(producer.send({ body }))
    if (inFlight.length >= 1_024) await inFlight.shift()
  }
  await Promise.all(inFlight)
  const used = process.cpuUsage(cpu)
  const perSend = (used.user + used.system) / count
  const wall = ((performance.now() - started) * 1_000) / count
  console.log(
    `round ${round}: ${perSend.toFixed(2)} µs of CPU per send, ${wall.toFixed(2)} µs of wall time (${count} sends, 1,024 in flight)`,
  )
}
await producer.close()
