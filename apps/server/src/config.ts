import { readFileSync } from 'node:fs'
import { dirname, isAbsolute, resolve } from 'node:path'
import { META_LIMITS } from '@mq/meta-service'
import { FORMAT_LEVEL, REPLICAS_PER_GROUP_MAX } from '@mq/protocol'
import { HTTP_LIMITS } from './http/http-server'
import { isLoopback, parseAllowedHosts } from './http/loopback-host'
import { ipv4Of } from './ipv4-spelling'
import {
  hostAndPort,
  isWildcardHost,
  type Member,
  NODE_ID_PATTERN,
  NODE_ID_RULE,
  parseAddress,
  parseMembers,
} from './members'
import { isMetadataValue } from './metadata-value'

/** Everything one `mq-server` process needs to know, validated. */
export interface ServerConfig {
  /** Stable id of this node, unique in the cluster. */
  readonly nodeId: string
  /** `host:port` the gRPC server binds (clients and peers). */
  readonly listen: string
  /** `host:port` other nodes and clients reach this node at (default: `listen`). */
  readonly advertise: string
  /** Where the node keeps its LevelDB; absolute. */
  readonly dataDir: string
  /**
   * The meta group's founding members, when this node bootstraps a new cluster. Neither this
   * nor `join` given: the data dir's first start's are used (MqNode.start refuses a data dir
   * that keeps neither).
   */
  readonly initialMeta: readonly Member[]
  /** An existing node's address, when this node joins a running cluster (see `initialMeta`). */
  readonly join: string
  /** One Raft tick, in ms; elections and heartbeats are counted in ticks. */
  readonly tickMs: number
  readonly electionTicks: number
  readonly heartbeatTicks: number
  /** Data-group replicas per group (the replication factor). */
  readonly replicationFactor: number
  /** Data groups to create at bootstrap; 0 = as many as there are nodes. */
  readonly dataGroups: number
  /**
   * Shared secret peers must present, at least TOKEN_CHARS_MIN characters; '' = none (loopback
   * development only). From `--peer-token`, the config file, or else the environment variable
   * MQ_PEER_TOKEN (preferred: a command line is visible to every user of the machine in `ps`).
   */
  readonly peerToken: string
  /**
   * A data group snapshots its state machine and compacts its log every this many entries,
   * keeping the last tenth so that a briefly lagging follower catches up from the log.
   */
  readonly snapshotEntries: number
  /**
   * MiB of applied Raft log entries the node's data groups may hold in memory together (the log
   * since each group's last compaction): past it the group holding the most compacts, whatever
   * its own thresholds (raft-core HostOptions.logBytesMax).
   */
  readonly logMemoryMb: number
  /** `host:port` of the HTTP server for /metrics, /healthz and /readyz; '' = none. */
  readonly httpListen: string
  /**
   * Host names (or addresses) the HTTP port answers for besides localhost and loopback
   * addresses, lower-case (IPv6 without brackets); `['*']`: any Host. Empty: a loopback
   * `httpListen` answers loopback names only, any other answers any Host (http/loopback-host.ts).
   */
  readonly httpAllowedHosts: readonly string[]
  /** Serve the HTTP port over TLS with the node's certificate (`--tls-cert`, `--tls-key`). */
  readonly httpTls: boolean
  /**
   * HTTP connections open at once from one remote address (HTTP_LIMITS.connectionsPerAddressMax
   * by default): a reverse proxy or a scraper pool behind one address needs more.
   */
  readonly httpConnectionsPerAddressMax: number
  /** Serve the web console and its JSON API on the HTTP port (`--no-console` turns it off). */
  readonly console: boolean
  /**
   * Let the console show message bodies (a peek) while clients are not authenticated, to
   * anyone who reaches the HTTP port (`mq-server dev` sets it); with `authFile` a peek needs a
   * token that may consume the queue either way.
   */
  readonly consolePeek: boolean
  /**
   * Serve `/metrics` without a token on a node with `authFile` (a scraper on a network only
   * monitoring reaches); without it such a node asks a token, and shows a token that is not
   * admin only its own queues' series.
   */
  readonly metricsOpen: boolean
  /** The least severe log level written. */
  readonly logLevel: LogLevel
  /** `json` (one object per line, for machines) or `pretty` (for people, in dev). */
  readonly logFormat: LogFormat
  /** The token file (see src/auth/token-file.ts); '' = clients are not authenticated. */
  readonly authFile: string
  /** PEM files of this node's certificate, its key and the CA that signs the cluster's certificates; '' = plaintext. */
  readonly tlsCert: string
  readonly tlsKey: string
  readonly tlsCa: string
  /** Mutual TLS: callers (clients and peers) must present a certificate signed by `tlsCa`. */
  readonly tlsClientAuth: boolean
  /**
   * Peer calls that speak for a node (Raft streams, heartbeats) must come with a client
   * certificate naming that node (its subject CN):
   * a member holding the peer secret cannot pass for another node. Needs `tlsClientAuth`.
   */
  readonly tlsPeerIds: boolean
  /** A node not heard from for this long has its data-group replicas replaced on other nodes. */
  readonly replaceDeadAfterMs: number
  /**
   * A replica being added (a learner) whose progress stops for this long on a live node has its
   * change given to another node, which then receives no new replica for as long again.
   */
  readonly replicaStallMs: number
  /**
   * The format level this node reports (at most its version's FORMAT_LEVEL): the cluster runs
   * at the lowest reported, so a lower one pins the cluster's replicated formats (a rollback
   * to the previous version stays possible until every node reports the new level).
   */
  readonly formatLevel: number
  /** gRPC connections (clients and peers) open at once; one more is closed as it is accepted. */
  readonly connectionsMax: number
  /** gRPC connections open at once from one remote address (at most `connectionsMax` count). */
  readonly connectionsPerAddressMax: number
  /** MiB of answers one connection may leave unread before it is closed (a slow reader). */
  readonly connectionUnsentMaxMb: number
  /** MiB of unread answers of every connection together; past it the largest holders are closed. */
  readonly unsentMaxMb: number
}

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const
export type LogLevel = (typeof LOG_LEVELS)[number]
export const LOG_FORMATS = ['json', 'pretty'] as const
export type LogFormat = (typeof LOG_FORMATS)[number]

export const CONFIG_DEFAULTS = {
  tickMs: 50,
  electionTicks: 10,
  heartbeatTicks: 2,
  replicationFactor: 3,
  dataGroups: 0,
  peerToken: '',
  snapshotEntries: 50_000,
  logMemoryMb: 128,
  httpListen: '',
  httpAllowedHosts: [],
  httpTls: false,
  httpConnectionsPerAddressMax: HTTP_LIMITS.connectionsPerAddressMax,
  console: true,
  consolePeek: false,
  metricsOpen: false,
  logLevel: 'info',
  logFormat: 'json',
  authFile: '',
  tlsCert: '',
  tlsKey: '',
  tlsCa: '',
  tlsClientAuth: false,
  tlsPeerIds: false,
  replaceDeadAfterMs: 300_000,
  replicaStallMs: 600_000,
  formatLevel: FORMAT_LEVEL,
  connectionsMax: 4_096,
  connectionsPerAddressMax: 1_024,
  connectionUnsentMaxMb: 256,
  unsentMaxMb: 1_024,
} as const

/** The settings as given on the command line or in a config file, before validation. */
export type RawConfig = Partial<Record<keyof ServerConfig | 'config', unknown>>

const KNOWN_KEYS: ReadonlySet<string> = new Set([
  'config',
  'nodeId',
  'listen',
  'advertise',
  'dataDir',
  'initialMeta',
  'join',
  'tickMs',
  'electionTicks',
  'heartbeatTicks',
  'replicationFactor',
  'dataGroups',
  'peerToken',
  'snapshotEntries',
  'logMemoryMb',
  'httpListen',
  'httpAllowedHosts',
  'httpTls',
  'httpConnectionsPerAddressMax',
  'console',
  'consolePeek',
  'metricsOpen',
  'logLevel',
  'logFormat',
  'authFile',
  'tlsCert',
  'tlsKey',
  'tlsCa',
  'tlsClientAuth',
  'tlsPeerIds',
  'replaceDeadAfterMs',
  'replicaStallMs',
  'formatLevel',
  'connectionsMax',
  'connectionsPerAddressMax',
  'connectionUnsentMaxMb',
  'unsentMaxMb',
])

/** A configuration that cannot be used; the message names the setting and what to do. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError'
  readonly code = 'INVALID_CONFIG'
  readonly retriable = false
}

/**
 * A secret shorter than this is refused (guessable): a client token of the token file, the
 * peer secret. Here rather than in auth/token-file.ts, which imports this module.
 */
export const TOKEN_CHARS_MIN = 16

/** The environment variable the peer secret is read from when no flag or config file gives it. */
export const PEER_TOKEN_ENV = 'MQ_PEER_TOKEN'

/**
 * Builds the validated config from command-line values over a JSON config file's values
 * (`flags.config` names the file; keys as in ServerConfig) over the environment's
 * (MQ_PEER_TOKEN) over the defaults. Throws ConfigError naming the first bad setting.
 */
export function loadConfig(
  flags: RawConfig,
  cwd = process.cwd(),
  env: Readonly<Record<string, string | undefined>> = process.env,
): ServerConfig {
  let file: RawConfig = {}
  if (flags.config !== undefined) {
    const path = resolve(cwd, String(flags.config))
    let text: string
    try {
      // A byte order mark (editors on Windows write one) is no JSON: it was refused as
      // "Unexpected token at line 1, column 1", a character nobody sees.
      text = readFileSync(path, 'utf8').replace(/^\uFEFF/, '')
    } catch (error) {
      throw new ConfigError(`cannot read config file ${path}: ${(error as Error).message}`, { cause: error })
    }
    try {
      file = JSON.parse(text) as RawConfig
    } catch (error) {
      throw new ConfigError(`config file ${path} is not valid JSON: ${jsonSyntaxProblem(error, text)}`)
    }
    if (typeof file !== 'object' || file === null || Array.isArray(file)) {
      throw new ConfigError(`config file ${path} must hold a JSON object`)
    }
    for (const key of Object.keys(file)) {
      if (!KNOWN_KEYS.has(key) || key === 'config')
        throw new ConfigError(`config file ${path}: unknown setting "${key}"`)
    }
    // A relative path in the file is relative to the file's folder, as an operator reads it
    // (it was resolved against the working directory: `mq-server start --config /etc/mq/n1.json`
    // from another folder looked for the certificates there).
    for (const key of FILE_PATH_KEYS) {
      const v = file[key]
      if (typeof v === 'string' && v !== '' && !isAbsolute(v))
        file = { ...file, [key]: resolve(dirname(path), v) }
    }
  }
  const defined = Object.fromEntries(Object.entries(flags).filter(([, v]) => v !== undefined))
  const fromEnv = env[PEER_TOKEN_ENV] ? { peerToken: env[PEER_TOKEN_ENV] } : {}
  const raw: RawConfig = { ...CONFIG_DEFAULTS, ...fromEnv, ...file, ...defined }
  // An empty secret is "not given", as an empty address is: a config file's `"peerToken": ""`
  // (a template's blank) hid MQ_PEER_TOKEN, and the node ran without the secret its peers
  // present, or --auth-file asked for the MQ_PEER_TOKEN that was set.
  // So is an empty flag (`--peer-token "$UNSET"`): it hid the file's secret, and the node ran
  // without one, taking peer calls from anyone.
  if (raw.peerToken === '') {
    if (file.peerToken !== undefined && file.peerToken !== '') raw.peerToken = file.peerToken
    else if (fromEnv.peerToken !== undefined) raw.peerToken = fromEnv.peerToken
  }
  return validate(raw, cwd)
}

/**
 * What is wrong with JSON that did not parse, without quoting it: V8's messages quote the text
 * around the fault (`Unexpected token 'T', ..."token":TOPSECRET-"... is not valid JSON`), and
 * an auth or config file's text may hold a secret, which would go to stderr and the log. Gives
 * the kind of fault and its line and column: from the message when it names a position, else
 * found by parsing prefixes of the text (firstFaultAt).
 */
export function jsonSyntaxProblem(error: unknown, text: string): string {
  const message = error instanceof Error ? error.message : String(error)
  // `… in JSON at position 6`, and `Unexpected non-whitespace character after JSON at position 7`.
  const at = /^(.*?)(?: in JSON)? at position (\d+)/.exec(message)
  const kind = at?.[1] ?? ((message.split(/[,'"]/)[0] ?? '').trim() || 'a syntax error')
  const position = at ? Number(at[2]) : firstFaultAt(text)
  if (position === undefined) return `${kind} (where is not shown: the text may hold a secret)`
  const before = text.slice(0, position)
  const line = before.split('\n').length
  const column = before.length - before.lastIndexOf('\n')
  return `${kind} at line ${line}, column ${column}`
}

/**
 * The offset of the first character JSON cannot continue with, or undefined when `text` only
 * ends too early. A prefix of the text fails before its end exactly when it holds that
 * character, and every longer prefix does too: a binary search over prefix lengths finds the
 * shortest (a file of n bytes takes log2(n) parses).
 */
function firstFaultAt(text: string): number | undefined {
  const faults = (length: number): boolean => {
    try {
      JSON.parse(text.slice(0, length))
      return false
    } catch (error) {
      // Running out of text reads `Unexpected end of JSON input`, or names the end as position.
      const message = (error as Error).message
      const at = / in JSON at position (\d+)/.exec(message)
      return at ? Number(at[1]) < length : !/^Unexpected end of JSON input/.test(message)
    }
  }
  if (!faults(text.length)) return undefined
  let low = 0 // the prefix of this length does not fault
  let high = text.length // the prefix of this length faults
  while (high - low > 1) {
    const mid = Math.floor((low + high) / 2)
    if (faults(mid)) high = mid
    else low = mid
  }
  return high - 1
}

function validate(raw: RawConfig, cwd: string): ServerConfig {
  const nodeId = str(raw, 'nodeId')
  if (!NODE_ID_PATTERN.test(nodeId)) {
    // The rule in full: `_n1` was refused as not "letters, digits, '_' or '-'", which it is.
    throw new ConfigError(`${setting('nodeId')} must be ${NODE_ID_RULE}, got ${JSON.stringify(nodeId)}`)
  }
  const listen = address(raw, 'listen')
  // An empty string in a config file is "not given", as for httpListen.
  const advertise = raw.advertise === undefined || raw.advertise === '' ? listen : address(raw, 'advertise')
  if (isWildcardHost(hostAndPort(advertise).host)) {
    // It is what the node registers for every peer and client to dial.
    throw new ConfigError(
      `the address other nodes and clients dial, ${advertise} (${raw.advertise ? '--advertise' : '--listen, as no --advertise is given'}), is a wildcard: give --advertise HOST:PORT with an address of this node they can reach (--listen may stay ${listen})`,
    )
  }
  const dataDirRaw = str(raw, 'dataDir')
  const dataDir = isAbsolute(dataDirRaw) ? dataDirRaw : resolve(cwd, dataDirRaw)
  let initialMeta: Member[] = []
  // Empty is "not given", as for --join: a config file's `"initialMeta": ""` beside --join was
  // refused as an empty --initial-meta.
  if (raw.initialMeta !== undefined && raw.initialMeta !== '') {
    try {
      initialMeta = parseMembers(String(raw.initialMeta))
    } catch (error) {
      throw new ConfigError((error as Error).message, { cause: error })
    }
  }
  const join = raw.join === undefined || raw.join === '' ? '' : address(raw, 'join')
  const httpListen = raw.httpListen === undefined || raw.httpListen === '' ? '' : address(raw, 'httpListen')
  if (httpListen !== '') {
    const grpc = hostAndPort(listen)
    const http = hostAndPort(httpListen)
    if (
      grpc.port === http.port &&
      (sameHost(grpc.host, http.host) || isWildcardHost(grpc.host) || isWildcardHost(http.host))
    ) {
      // The HTTP server binds first: the node then failed on its own gRPC port, as if another
      // process held it.
      throw new ConfigError(
        `--http-listen ${httpListen} and --listen ${listen} take the same port: give them different ports`,
      )
    }
  }
  for (const [flag, dialed] of [
    ['--join', join],
    ...initialMeta.map((m) => ['--initial-meta', m.address]),
  ] as const) {
    if (dialed !== '' && isWildcardHost(hostAndPort(dialed).host))
      throw new ConfigError(`${flag} names ${dialed}, a wildcard: give an address of the node to dial`)
  }
  // The node would ask itself for the meta leader for ever, and keep that as its cluster entry.
  // Its --advertise only when it names the port it listens on: one naming another node's
  // address (a mistake the node reports once it serves: Peer.Probe) is that node's.
  const ownAdvertise = join === advertise && hostAndPort(advertise).port === hostAndPort(listen).port
  // However spelt (localhost, 127.1), as for --http-listen; a loopback address reaches a
  // wildcard --listen.
  const ownListen = (() => {
    if (join === '') return false
    const to = hostAndPort(join)
    const at = hostAndPort(listen)
    if (to.port !== at.port) return false
    // isLoopback takes an IPv6 address without its brackets.
    return (
      sameHost(to.host, at.host) || (isWildcardHost(at.host) && isLoopback(to.host.replace(/^\[|\]$/g, '')))
    )
  })()
  if (join !== '' && (ownListen || ownAdvertise))
    throw new ConfigError(
      `--join names this node's own address (${join}): give the address of a node of the running cluster`,
    )
  // Neither is a restart from the data dir, which only the node can tell (MqNode.start).
  if (initialMeta.length > 0 && join !== '')
    throw new ConfigError('give either --initial-meta or --join, not both')
  if (initialMeta.length > META_LIMITS.replicasPerGroupMax) {
    // The meta group would never record its members (it has 1 to 7 voters): a lost voter would
    // never be replaced, nor a node removed.
    throw new ConfigError(
      `--initial-meta names ${initialMeta.length} nodes; the meta group has at most ${META_LIMITS.replicasPerGroupMax} voters (start with 3 or 5, and let more join)`,
    )
  }
  if (initialMeta.length > 0) {
    const self = initialMeta.find((m) => m.nodeId === nodeId)
    if (!self) throw new ConfigError(`--initial-meta does not name this node (${nodeId})`)
    if (self.address !== advertise) {
      throw new ConfigError(
        `--initial-meta gives ${nodeId} the address ${self.address}, but it advertises ${advertise}`,
      )
    }
  }
  const electionTicks = int(raw, 'electionTicks', 3, 1000)
  const heartbeatTicks = int(raw, 'heartbeatTicks', 1, 1000)
  if (heartbeatTicks >= electionTicks) {
    throw new ConfigError(`heartbeatTicks (${heartbeatTicks}) must be below electionTicks (${electionTicks})`)
  }
  const peerToken = secret(raw, 'peerToken')
  const authFile = path(raw, 'authFile', cwd)
  if (authFile !== '' && peerToken === '') {
    throw new ConfigError(
      `--auth-file needs --peer-token (or ${PEER_TOKEN_ENV}): without a cluster secret any process could send Raft messages and heartbeats`,
    )
  }
  const tlsCert = path(raw, 'tlsCert', cwd)
  const tlsKey = path(raw, 'tlsKey', cwd)
  const tlsCa = path(raw, 'tlsCa', cwd)
  const tlsClientAuth = bool(raw, 'tlsClientAuth')
  if ((tlsCert === '') !== (tlsKey === '')) throw new ConfigError('give --tls-cert and --tls-key together')
  if (tlsCert !== '' && tlsCa === '') {
    throw new ConfigError('--tls-cert needs --tls-ca: peers verify each other against the cluster CA')
  }
  if (tlsCert === '' && (tlsCa !== '' || tlsClientAuth)) {
    throw new ConfigError('--tls-ca and --tls-client-auth need --tls-cert and --tls-key')
  }
  const tlsPeerIds = bool(raw, 'tlsPeerIds')
  if (tlsPeerIds && !tlsClientAuth) {
    throw new ConfigError(
      '--tls-peer-ids checks the node ids in peer certificates: it needs --tls-client-auth (else peers present none)',
    )
  }
  const httpTls = bool(raw, 'httpTls')
  if (httpTls && (tlsCert === '' || raw.httpListen === undefined || raw.httpListen === '')) {
    throw new ConfigError(
      '--http-tls serves the HTTP port (--http-listen) with the node certificate: give --http-listen and --tls-cert/--tls-key',
    )
  }
  // Flags of the HTTP port that would do nothing are refused, as --http-tls is: whoever gave them
  // expects an effect (a Host check, bodies in the console, an open /metrics) they would not get.
  const httpOn = raw.httpListen !== undefined && raw.httpListen !== ''
  const consoleOn = raw.console === undefined ? CONFIG_DEFAULTS.console : bool(raw, 'console')
  const consolePeek = bool(raw, 'consolePeek')
  const metricsOpen = bool(raw, 'metricsOpen')
  const httpAllowedHosts = allowedHosts(raw)
  if (!httpOn && httpAllowedHosts.length > 0)
    throw new ConfigError(
      '--http-allowed-hosts names the hosts the HTTP port answers: give --http-listen too',
    )
  if (consolePeek && (!httpOn || !consoleOn))
    throw new ConfigError(
      '--console-peek lets the web console show message bodies: it needs the console, on --http-listen (and not --no-console)',
    )
  const httpConnectionsPerAddressMax = int(raw, 'httpConnectionsPerAddressMax', 1, HTTP_LIMITS.connectionsMax)
  if (httpConnectionsPerAddressMax !== CONFIG_DEFAULTS.httpConnectionsPerAddressMax && !httpOn)
    throw new ConfigError(
      "--http-connections-per-address-max bounds the HTTP port's connections from one address: give --http-listen too",
    )
  if (metricsOpen && (!httpOn || authFile === ''))
    throw new ConfigError(
      '--metrics-open serves /metrics without a token on a node that asks for tokens: it needs --http-listen and --auth-file (without --auth-file /metrics asks none)',
    )
  const connectionUnsentMaxMb = int(raw, 'connectionUnsentMaxMb', 32, 65_536)
  const unsentMaxMb = int(raw, 'unsentMaxMb', 32, 1_048_576)
  if (connectionUnsentMaxMb > unsentMaxMb) {
    throw new ConfigError(
      `--connection-unsent-max-mb (${connectionUnsentMaxMb}) must not be above --unsent-max-mb (${unsentMaxMb}), the bound of every connection's together`,
    )
  }
  return {
    nodeId,
    listen,
    advertise,
    dataDir,
    initialMeta,
    join,
    tickMs: int(raw, 'tickMs', 1, 10_000),
    electionTicks,
    heartbeatTicks,
    replicationFactor: int(raw, 'replicationFactor', 1, REPLICAS_PER_GROUP_MAX),
    dataGroups: int(raw, 'dataGroups', 0, META_LIMITS.groupsMax),
    peerToken,
    snapshotEntries: int(raw, 'snapshotEntries', 10, 10_000_000),
    logMemoryMb: int(raw, 'logMemoryMb', 16, 1_048_576),
    httpListen,
    httpAllowedHosts,
    httpTls,
    httpConnectionsPerAddressMax,
    console: consoleOn,
    consolePeek,
    metricsOpen,
    logLevel: oneOf(raw, 'logLevel', LOG_LEVELS),
    logFormat: oneOf(raw, 'logFormat', LOG_FORMATS),
    authFile,
    tlsCert,
    tlsKey,
    tlsCa,
    tlsClientAuth,
    tlsPeerIds,
    replaceDeadAfterMs: int(raw, 'replaceDeadAfterMs', 10_000, 7 * 24 * 3_600_000),
    replicaStallMs: int(raw, 'replicaStallMs', 10_000, 7 * 24 * 3_600_000),
    formatLevel: int(raw, 'formatLevel', 1, FORMAT_LEVEL),
    connectionsMax: int(raw, 'connectionsMax', 16, 1_000_000),
    connectionsPerAddressMax: int(raw, 'connectionsPerAddressMax', 1, 1_000_000),
    connectionUnsentMaxMb,
    unsentMaxMb,
  }
}

/**
 * Whether two hosts of addresses `parseAddress` took are one host however spelt: `localhost`
 * and 127.0.0.1, or an IPv4 address in another spelling (127.1, 0x7f.0.0.1).
 */
function sameHost(a: string, b: string): boolean {
  const norm = (h: string) => (h === 'localhost' ? '127.0.0.1' : (ipv4Of(h) ?? h))
  return norm(a) === norm(b)
}

/**
 * A shared secret: '' (none) or a string. One shorter than TOKEN_CHARS_MIN is taken, with a
 * warning (`weakSecretWarning`), not refused: every node of a cluster shares it, so refusing
 * it would stop the first node upgraded in a rolling upgrade of a cluster that has one.
 */
function secret(raw: RawConfig, key: 'peerToken'): string {
  const v = raw[key]
  if (v === undefined || v === '') return ''
  if (typeof v !== 'string') {
    throw new ConfigError(
      // Its type, not its value: the value is the secret (the refusal goes to stderr).
      `${key} (--peer-token, or ${PEER_TOKEN_ENV}) must be a string, got ${Array.isArray(v) ? 'an array' : v === null ? 'null' : typeof v === 'object' ? 'an object' : `a ${typeof v}`}`,
    )
  }
  // Sent as a gRPC metadata value, which takes printable ASCII only: grpc-js threw on any other
  // character when the peer transport opened its first stream, ending the process.
  if (!isMetadataValue(v)) {
    throw new ConfigError(
      `${key} (--peer-token, or ${PEER_TOKEN_ENV}) holds a character other than printable ASCII (a line break, a tab, an accented letter): peers send it as a gRPC metadata value, which takes printable ASCII only`,
    )
  }
  return v
}

/** What to warn of a config's peer secret: one shorter than TOKEN_CHARS_MIN (undefined: none). */
export function weakSecretWarning(config: Pick<ServerConfig, 'peerToken'>): string | undefined {
  if (config.peerToken === '' || config.peerToken.length >= TOKEN_CHARS_MIN) return undefined
  return `the peer secret (--peer-token, or ${PEER_TOKEN_ENV}) has ${config.peerToken.length} characters, fewer than ${TOKEN_CHARS_MIN}: a guessable secret lets any process join the cluster's Raft traffic; replace it on every node (make one with \`openssl rand -hex 24\`)`
}

/** `httpAllowedHosts`: a comma-separated string (the flag) or an array of strings (a config file). */
function allowedHosts(raw: RawConfig): string[] {
  const v = raw.httpAllowedHosts
  const list =
    typeof v === 'string'
      ? v
      : Array.isArray(v) && v.every((s) => typeof s === 'string')
        ? v.join(',')
        : undefined
  if (list === undefined) {
    throw new ConfigError(
      `httpAllowedHosts must be host names separated by commas, or an array of them, got ${JSON.stringify(v)}`,
    )
  }
  try {
    return parseAllowedHosts(list)
  } catch (error) {
    throw new ConfigError(`httpAllowedHosts: ${(error as Error).message}`, { cause: error })
  }
}

function path(raw: RawConfig, key: keyof ServerConfig, cwd: string): string {
  const v = raw[key]
  if (v === undefined || v === '') return ''
  if (typeof v !== 'string') throw new ConfigError(`${key} must be a file path, got ${JSON.stringify(v)}`)
  return isAbsolute(v) ? v : resolve(cwd, v)
}

function bool(raw: RawConfig, key: keyof ServerConfig): boolean {
  const v = raw[key]
  if (v === true || v === 'true') return true
  if (v === false || v === 'false' || v === undefined) return false
  throw new ConfigError(`${setting(key)} must be true or false, got ${JSON.stringify(v)}`)
}

function oneOf<T extends string>(raw: RawConfig, key: keyof ServerConfig, allowed: readonly T[]): T {
  const v = raw[key]
  if (typeof v !== 'string' || !(allowed as readonly string[]).includes(v)) {
    throw new ConfigError(`${setting(key)} must be one of ${allowed.join(', ')}, got ${JSON.stringify(v)}`)
  }
  return v as T
}

/** The config keys that are file or folder paths. */
const FILE_PATH_KEYS: readonly (keyof ServerConfig)[] = ['dataDir', 'authFile', 'tlsCert', 'tlsKey', 'tlsCa']

/** How a setting is given: its flag and its config-file key (`--node-id` / "nodeId"). */
function setting(key: keyof ServerConfig): string {
  // Settings with no flag of their own (a config file gives them), and a flag spelt otherwise:
  // a refusal named --election-ticks, which mq-server start does not know.
  if (CONFIG_FILE_ONLY.has(key)) return `config file key "${key}" (no flag sets it)`
  return `${flagOf(key)} (config file: "${key}")`
}

/** The `mq-server start` flag of a setting (`nodeId`: --node-id; `console` is turned off by --no-console). */
export function flagOf(key: keyof ServerConfig): string {
  return key === 'console' ? '--no-console' : `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`
}

/** Settings a config file gives and no flag of `mq-server start` does (program.ts). */
export const CONFIG_FILE_ONLY: ReadonlySet<keyof ServerConfig> = new Set([
  'electionTicks',
  'heartbeatTicks',
  'replicationFactor',
  'dataGroups',
])

function str(raw: RawConfig, key: keyof ServerConfig): string {
  const v = raw[key]
  if (v === undefined || v === '') throw new ConfigError(`${setting(key)} is required`)
  if (typeof v !== 'string')
    throw new ConfigError(`${setting(key)} must be a string, got ${JSON.stringify(v)}`)
  return v
}

function address(raw: RawConfig, key: keyof ServerConfig): string {
  // str's refusal already names the setting (it was named twice: `--join (…): --join (…) must be`).
  const text = str(raw, key)
  try {
    return parseAddress(text)
  } catch (error) {
    throw new ConfigError(`${setting(key)}: ${(error as Error).message}`, { cause: error })
  }
}

function int(raw: RawConfig, key: keyof ServerConfig, min: number, max: number): number {
  // A flag's text must be plain digits ('' is not 0, nor are '0x10' and '1e3' numbers here).
  const text = raw[key]
  const v = typeof text === 'string' ? (/^-?\d+$/.test(text) ? Number(text) : Number.NaN) : text
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw new ConfigError(
      `${setting(key)} must be an integer from ${min} to ${max}, got ${JSON.stringify(raw[key])}`,
    )
  }
  return v
}
