import { createPrivateKey, X509Certificate } from 'node:crypto'
import { createSecureContext } from 'node:tls'
import { type TlsOptions, tokenProblem } from '@mq/router-client'
import type { Command } from 'commander'
import { UsageError } from './errors'
import type { FailureContext } from './exit-codes'
import type { CliClient, CliIO } from './io'
import { parseServers } from './options'
import { Output } from './output'

/** The seed used when neither --servers nor MQ_SERVERS is given. */
export const DEFAULT_SERVERS = '127.0.0.1:7001'
/** The deadline of each operation when --timeout is not given. */
export const DEFAULT_TIMEOUT_MS = 10_000
/** One attempt's deadline, at most (the SDK retries within the overall deadline). */
const ATTEMPT_MS_MAX = 5_000
/**
 * Without --timeout, a command gives up after this long of connections refused on every
 * attempt (nothing listens at --servers): a wrong port is told at once, not after the whole
 * default deadline. With --timeout it waits that long (a script waiting for a cluster to start).
 */
export const REFUSED_GIVE_UP_MS = 2_000

/**
 * Throws a UsageError naming the flag whose file is wrong: a CA or client certificate that holds
 * no PEM certificate, a key that holds no PEM private key, or a key of another certificate (as
 * the TLS layer takes them: grpc-js's createSsl). Until 2026-12-07 such a client certificate or
 * key was refused at connect naming neither flag ("error:0480006C:PEM routines::no start
 * line"), exit 4, and such a CA was left out without a word: every handshake failed, and mq
 * waited out its deadline saying the cluster did not answer ("self-signed certificate"), exit 3.
 */
function checkTlsFiles(tls: TlsOptions, paths: { ca?: string; cert?: string; key?: string }): void {
  const { ca, cert, key } = tls
  const caProblem = ca ? problemOf(() => new X509Certificate(ca)) : undefined
  if (caProblem) throw new UsageError(`--tls-ca ${paths.ca} holds no PEM certificate (${caProblem})`)
  if (!cert || !key) return
  const problem = problemOf(() => createSecureContext({ cert, key }))
  if (!problem) return
  const which = problemOf(() => new X509Certificate(cert))
    ? `--tls-cert ${paths.cert} holds no PEM certificate`
    : problemOf(() => createPrivateKey(key))
      ? `--tls-key ${paths.key} holds no PEM private key`
      : `--tls-key ${paths.key} is not the key of --tls-cert ${paths.cert}`
  throw new UsageError(`${which} (${problem})`)
}

/** The message of what `make` throws; undefined when it does not. */
function problemOf(make: () => unknown): string | undefined {
  try {
    make()
    return undefined
  } catch (error) {
    return (error as Error).message
  }
}

/** The program-wide flags, resolved. */
export interface GlobalOptions {
  readonly servers: readonly string[]
  readonly json: boolean
  readonly timeoutMs: number
  /** Give up once connections were refused this long (0: wait for --timeout; see REFUSED_GIVE_UP_MS). */
  readonly refusedGiveUpMs: number
  /** --token, else MQ_TOKEN; undefined = none. */
  readonly token: string | undefined
  /** --tls-ca/--tls-cert/--tls-key, else MQ_TLS_CA/MQ_TLS_CERT/MQ_TLS_KEY: file paths. */
  readonly tls: { readonly ca?: string; readonly cert?: string; readonly key?: string } | undefined
}

/** What a command's action gets: a connected client and where to write. */
export interface Session {
  readonly client: CliClient
  readonly out: Output
  readonly globals: GlobalOptions
  readonly io: CliIO
}

/**
 * Shared by the commands of one run: resolves the global flags, connects, and remembers
 * where the last command was pointed, so a failure message can name the servers.
 */
export class Runtime {
  readonly io: CliIO
  target: FailureContext | undefined

  constructor(io: CliIO) {
    this.io = io
  }

  /** Resolves --servers (else MQ_SERVERS, else the default), --json and --timeout. */
  globals(command: Command): GlobalOptions {
    const o = command.optsWithGlobals<{
      servers?: string[]
      json?: boolean
      timeout?: number
      token?: string
      tlsCa?: string
      tlsCert?: string
      tlsKey?: string
    }>()
    const servers = o.servers ?? this.#envServers()
    const env = this.io.env
    const token = o.token ?? (env.MQ_TOKEN || undefined)
    const problem = token === undefined ? undefined : tokenProblem(token)
    if (problem) throw new UsageError(`${o.token !== undefined ? '--token' : 'MQ_TOKEN'}: ${problem}`)
    const ca = o.tlsCa ?? (env.MQ_TLS_CA || undefined)
    const cert = o.tlsCert ?? (env.MQ_TLS_CERT || undefined)
    const key = o.tlsKey ?? (env.MQ_TLS_KEY || undefined)
    if ((cert === undefined) !== (key === undefined)) {
      throw new UsageError('give --tls-cert and --tls-key together (a client certificate needs its key)')
    }
    const tls =
      ca === undefined && cert === undefined
        ? undefined
        : {
            ...(ca !== undefined ? { ca } : {}),
            ...(cert !== undefined ? { cert } : {}),
            ...(key !== undefined ? { key } : {}),
          }
    return {
      servers,
      json: o.json === true,
      timeoutMs: o.timeout ?? DEFAULT_TIMEOUT_MS,
      refusedGiveUpMs: o.timeout === undefined ? REFUSED_GIVE_UP_MS : 0,
      token,
      tls,
    }
  }

  async #readTls(paths: NonNullable<GlobalOptions['tls']>): Promise<TlsOptions> {
    const read = async (path: string | undefined, what: string): Promise<Buffer | undefined> => {
      if (path === undefined) return undefined
      try {
        return Buffer.from(await this.io.readFile(path))
      } catch (error) {
        throw new UsageError(`${what} ${path}: ${(error as Error).message}`)
      }
    }
    const [ca, cert, key] = await Promise.all([
      read(paths.ca, '--tls-ca'),
      read(paths.cert, '--tls-cert'),
      read(paths.key, '--tls-key'),
    ])
    const tls = { ...(ca ? { ca } : {}), ...(cert ? { cert } : {}), ...(key ? { key } : {}) }
    checkTlsFiles(tls, paths)
    return tls
  }

  #envServers(): string[] {
    try {
      return parseServers(this.io.env.MQ_SERVERS || DEFAULT_SERVERS)
    } catch (error) {
      throw new UsageError(`MQ_SERVERS: ${(error as Error).message}`)
    }
  }

  /** The Output of `command`, without connecting (for checks that fail before any call). */
  output(command: Command): Output {
    return new Output(this.io.stdout, this.globals(command).json)
  }

  /**
   * Connects to the cluster, runs `action`, and closes the client whatever happens (flushing
   * producers and giving unprocessed leases back).
   */
  async run(command: Command, action: (session: Session) => Promise<void>): Promise<void> {
    const globals = this.globals(command)
    this.target = { servers: globals.servers, timeoutMs: globals.timeoutMs, tls: globals.tls !== undefined }
    const client = await this.io.connect({
      servers: globals.servers,
      deadlineMs: globals.timeoutMs,
      attemptMs: Math.min(globals.timeoutMs, ATTEMPT_MS_MAX),
      refusedGiveUpMs: globals.refusedGiveUpMs,
      ...(globals.token !== undefined ? { token: globals.token } : {}),
      ...(globals.tls !== undefined ? { tls: await this.#readTls(globals.tls) } : {}),
    })
    try {
      await action({ client, out: new Output(this.io.stdout, globals.json), globals, io: this.io })
    } finally {
      await client.close()
    }
  }
}
