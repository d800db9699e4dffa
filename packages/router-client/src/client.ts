import { AsyncLocalStorage } from 'node:async_hooks'
import type { ChannelCredentials, Interceptor } from '@grpc/grpc-js'
import { Admin } from './admin'
import type { BackoffPolicy } from './backoff'
import { ClientClosedError } from './client-closed-error'
import { ConnectionPool } from './connections'
import { Consumer, type ConsumerOptions, PREFETCH_MAX } from './consumer'
import { channelCredentials, type TlsOptions, tokenInterceptor } from './credentials'
import type { Delivery } from './delivery'
import { checkInteger, definedOnly, TIMER_MS_MAX } from './option-checks'
import { Producer, type ProducerOptions } from './producer'
import { type AttemptReport, DEFAULT_ROUTER_OPTIONS, Router } from './router'

export interface ClientOptions {
  /** Seed addresses (`host:port`): any nodes of the cluster. */
  readonly servers: readonly string[]
  /** Each operation, with its retries, ends by this deadline (default 15 s). */
  readonly deadlineMs?: number
  /** One attempt's deadline (default 5 s). */
  readonly attemptMs?: number
  /**
   * A partition leader silent this long (plus a long poll's wait) is asked about through the
   * other replicas, which name the new leader or serve the request (default 700 ms; 0: never).
   */
  readonly leaderSilenceMs?: number
  /**
   * Give an operation up once every attempt was refused a connection for this long (a
   * ConnectionRefusedError: nothing listens at the addresses; the `mq` CLI uses 2 s). Default
   * 0: retry to the deadline, as for any unavailability (a node restarting refuses too).
   */
  readonly refusedGiveUpMs?: number
  readonly backoff?: BackoffPolicy
  /** Hears about every attempt of every operation (see RouterOptions.onAttempt). */
  readonly onAttempt?: (report: AttemptReport) => void
  /** Channel credentials (default: plaintext, or TLS from `tls`). */
  readonly credentials?: ChannelCredentials
  /** TLS: the CA to trust, and a client certificate for mutual TLS. */
  readonly tls?: TlsOptions
  /** A token the cluster knows (its `--auth-file`); sent with every call. */
  readonly token?: string
  /**
   * More grpc-js interceptors for every call, after the token's (e.g. an mq-server's own client
   * adds the cluster's peer secret).
   */
  readonly interceptors?: readonly Interceptor[]
}

export interface ConsumeOptions extends Partial<ConsumerOptions> {
  /** Handlers running at once (default 16). */
  readonly concurrency?: number
  /**
   * How long the subscription's close() waits for running handlers (default 30 s): after it,
   * the consumer closes anyway, and the leases of handlers still running are no longer
   * extended.
   */
  readonly closeTimeoutMs?: number
}

/** Most handlers of one `consume` loop at once: its prefetch (PREFETCH_MAX) bounds them. */
const CONCURRENCY_MAX = PREFETCH_MAX

/** Which `consume` handler is running (its task's token), for a close() called from one. */
const handlerScope = new AsyncLocalStorage<object>()

/** Resolves when `promise` settles or after `ms` (Infinity: no limit), whichever comes first. */
async function within(promise: Promise<unknown>, ms: number): Promise<void> {
  if (ms === Number.POSITIVE_INFINITY) {
    await promise
    return
  }
  let timer: ReturnType<typeof setTimeout> | undefined
  try {
    await Promise.race([promise, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))])
  } finally {
    clearTimeout(timer)
  }
}

/** A running `consume` loop. */
export interface Subscription {
  /**
   * Stops taking messages, gives unstarted ones back, waits for the running handlers (their
   * leases still extended) and their acks, then closes the consumer.
   */
  close(): Promise<void>
  /**
   * Settles when the loop ends: after close(), or with the error that ended it (which also
   * goes to `onError`; an unawaited `done` does not crash the process).
   */
  readonly done: Promise<void>
}

/**
 * The entry point of the SDK: one client per application, shared by its producers and
 * consumers. `await MqClient.connect({ servers })` checks that the cluster answers.
 */
export class MqClient {
  readonly admin: Admin
  readonly #pool: ConnectionPool
  readonly #router: Router
  readonly #closeables = new Set<{ close(): Promise<void> }>()
  /** The `consume` loops running: closed first, so that their handlers finish and ack. */
  readonly #subscriptions = new Set<{ close(): Promise<void> }>()
  /** close() was called: no more producers, consumers or `consume` loops. */
  #closed = false

  /** Throws a RangeError (or InvalidArgumentError: no servers) for an option out of range. */
  private constructor(options: ClientOptions) {
    const { deadlineMs, attemptMs, leaderSilenceMs, refusedGiveUpMs, backoff, onAttempt } =
      definedOnly(options)
    const routerOptions = {
      ...DEFAULT_ROUTER_OPTIONS,
      ...definedOnly({ deadlineMs, attemptMs, leaderSilenceMs, refusedGiveUpMs, backoff, onAttempt }),
      servers: options.servers,
    }
    this.#pool = new ConnectionPool(channelCredentials(options), undefined, [
      ...(options.token !== undefined ? [tokenInterceptor(options.token)] : []),
      ...(options.interceptors ?? []),
    ])
    this.#router = new Router(this.#pool, routerOptions)
    this.admin = new Admin(this.#router)
  }

  /**
   * Creates a client and waits until the meta group answers (or the deadline passes): a
   * GetRoutes of the one name no queue has: a linearizable read answered with no route. (Until
   * 2026-12-02 it sent an empty list, which asks for every queue's routes: an answer that grew
   * with the cluster, on every connect; a server answers at most 100 of them since.)
   */
  static async connect(options: ClientOptions): Promise<MqClient> {
    const client = new MqClient(options)
    try {
      await client.#router.meta((m) => m.getRoutes, { queues: [''] })
    } catch (error) {
      await client.close()
      throw error
    }
    return client
  }

  /**
   * A producer for `queue` (see ProducerOptions for batching and idempotence). Throws
   * ClientClosedError once the client is closed, RangeError for an option out of range.
   */
  producer(queue: string, options: Partial<ProducerOptions> = {}): Producer {
    this.#checkOpen()
    return this.#track(new Producer(this.#router, queue, options))
  }

  /**
   * A consumer of `queue`: iterate it with `for await`. Throws ClientClosedError once the
   * client is closed, RangeError for an option out of range.
   */
  consumer(queue: string, options: Partial<ConsumerOptions> = {}): Consumer {
    this.#checkOpen()
    return this.#track(new Consumer(this.#router, queue, options))
  }

  #checkOpen(): void {
    if (this.#closed) throw new ClientClosedError('the client is closed: make a new one (MqClient.connect)')
  }

  /** Producers and consumers made by this client and not closed yet (`close()` closes them). */
  get openHandles(): number {
    return this.#closeables.size
  }

  /** Keeps `closeable` in `set` for `close()` until it is closed itself (a client may make many). */
  #track<T extends { close(): Promise<void> }>(closeable: T, set = this.#closeables): T {
    set.add(closeable)
    const close = closeable.close.bind(closeable)
    closeable.close = async () => {
      try {
        await close()
      } finally {
        set.delete(closeable)
      }
    }
    return closeable
  }

  /**
   * Runs `handler` on each message of `queue`, up to `concurrency` at a time: the message is
   * acked when the handler returns and nacked when it throws.
   */
  async consume(
    queue: string,
    handler: (message: Delivery) => Promise<void> | void,
    options: ConsumeOptions = {},
  ): Promise<Subscription> {
    this.#checkOpen()
    // Checked before the consumer is made: a refused option leaves nothing open.
    const { concurrency = 16, closeTimeoutMs = 30_000, ...consumerOptions } = definedOnly(options)
    checkInteger('concurrency', concurrency, 1, CONCURRENCY_MAX)
    checkInteger('closeTimeoutMs', closeTimeoutMs, 0, TIMER_MS_MAX, true)
    // Checked as given, before Math.max: it made '64' a number (taken, where consumer() refuses
    // it) and 'many' NaN (refused as "got NaN", not as what was given).
    if (consumerOptions.prefetch !== undefined)
      checkInteger('consumer option prefetch', consumerOptions.prefetch, 1, PREFETCH_MAX)
    const consumer = this.consumer(queue, {
      ...consumerOptions,
      // At least one message per handler: fewer would leave handlers idle.
      prefetch: Math.max(concurrency, options.prefetch ?? 0),
    })
    // The running handlers, each under its own token (what handlerScope holds while it runs).
    const running = new Map<object, Promise<void>>()
    const onError = options.onError ?? (() => {})
    // A throwing onError must not end the loop (nor reject a handler's task); an async one's
    // rejection is dropped too (it was an unhandled rejection, which ends a Node process).
    const report = (error: unknown): void => {
      try {
        const reported: unknown = onError(error)
        if (reported instanceof Promise) reported.catch(() => {})
      } catch {}
    }
    const run = async (message: Delivery): Promise<void> => {
      try {
        await handler(message)
      } catch (error) {
        report(error)
        if (!message.settled) await message.nack().catch(report)
        return
      }
      if (!message.settled) await message.ack().catch(report)
    }
    /** Wakes the loop while it waits for a handler to end (all `concurrency` of them running). */
    let slotFreed: () => void = () => {}
    const done = (async () => {
      try {
        for await (const message of consumer) {
          const token = {}
          const task = handlerScope
            .run(token, () => run(message))
            .finally(() => {
              running.delete(token)
              slotFreed()
            })
          running.set(token, task)
          // Not a race of the running handlers: each race left a reaction on every one of them
          // until it ended, and a handler that ran long (a large job) kept one for every message
          // the others handled meanwhile (~300 bytes each: 43 MB for 100,000 in the test).
          if (running.size >= concurrency)
            await new Promise<void>((resolve) => {
              slotFreed = resolve
            })
        }
      } finally {
        // Also when the loop failed (its queue deleted, say): the handlers finish first, so
        // that whoever awaits the end does not close the client under them.
        await Promise.all(running.values())
      }
    })()
    // The error that ended the loop goes to onError; `done` still rejects with it for whoever
    // awaits it, and an unawaited `done` is not an unhandled rejection.
    done.catch(report)
    const subscription: Subscription = {
      done,
      close: async () => {
        // Stopped, not closed: the running handlers' leases go on being extended until they
        // finish and ack (at most closeTimeoutMs); then the consumer is closed (and its last
        // settlements answered). From one of its own handlers, the others are waited for.
        await consumer.stop()
        const self = handlerScope.getStore()
        const finished =
          self !== undefined && running.has(self)
            ? Promise.all([...running].filter(([token]) => token !== self).map(([, task]) => task))
            : done.catch(() => {})
        await within(finished, closeTimeoutMs)
        await consumer.close()
      },
    }
    this.#track(subscription, this.#subscriptions)
    // A loop that ended (its queue deleted or not created yet, its token refused) leaves
    // nothing for close() to do here: its handlers are done, and its consumer, closed or being
    // closed, is tracked on its own. Forgotten then: an application that starts a failed loop
    // again kept every ended one, with its consumer, until the client closed.
    void done.catch(() => {}).then(() => this.#subscriptions.delete(subscription))
    return subscription
  }

  /**
   * Closes the `consume` loops (their running handlers finish and ack), then flushes producers
   * and closes consumers, then the connections.
   */
  async close(): Promise<void> {
    this.#closed = true
    await Promise.allSettled([...this.#subscriptions].map((s) => s.close()))
    await Promise.allSettled([...this.#closeables].map((c) => c.close()))
    this.#router.close()
    this.#pool.close()
  }
}
