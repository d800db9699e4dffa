/**
 * The reference model: an obviously correct, in-memory, O(n)-everywhere queue with the same
 * contract as QueuePartition. No indexes, no storage, no incremental bookkeeping: every
 * question is answered by scanning all messages. The scheduler is the stride rule written
 * out naively (scan every weight for the least pass).
 */
import type {
  Command,
  CommandResult,
  DeadMessage,
  Lease,
  LeaseStatus,
  QueueStats,
  StoredMessage,
  WeightStats,
} from '../src/index'
import {
  InvalidArgumentError,
  LimitExceededError,
  OutOfOrderSequenceError,
  PRODUCER_BATCHES_KEPT,
  parseWeight,
  QUEUE_CONFIG_DEFAULT,
  type QueueConfig,
  QueueError,
  SequenceGapError,
  STATS_AGES_MAX,
} from '../src/index'

type State = 'ready' | 'delayed' | 'leased' | 'dead' | 'waiting'

interface ModelMessage {
  readonly id: number
  readonly weight: number
  readonly body: Uint8Array
  readonly headers: Readonly<Record<string, string>>
  readonly key: string | undefined
  readonly enqueuedAtMs: number
  /** When the TTL counts from if not from the enqueue: the redrive that restarted it. */
  ttlFromMs: number | undefined
  state: State
  deliveries: number
  attempts: number
  /** ready: [band, order]; leased: deadline; delayed: due; dead: dead order; waiting: order, due (0: none). */
  band: number
  order: number
  deadlineMs: number
  dueMs: number
  deadOrder: number
  /** Leased: the lease or extend command that set its deadline last (the partition's lease group). */
  leaseCommand?: number
}

const utf8Len = (s: string) => new TextEncoder().encode(s).length

export class ModelQueue {
  config: QueueConfig
  private readonly messages = new Map<number, ModelMessage>()
  private nextId = 1
  private readonly counters = {
    enqueued: 0,
    delivered: 0,
    acked: 0,
    nacked: 0,
    expired: 0,
    deadLettered: 0,
    discarded: 0,
  }
  private readyOrder = 0
  private deadOrder = 0
  private lastNowMs = 0
  private passNum = new Map<number, number>()
  private vNum = 0
  private vDen = 1
  private backlogged = new Set<number>()
  private window: number[] = []
  private readonly dedup = new Map<string, { id: number; expiresAtMs: number }>()
  private readonly producers = new Map<
    string,
    { batches: { seq: number; ids: number[] }[]; expiresAtMs: number }
  >()

  constructor(config: Partial<QueueConfig> = {}) {
    this.config = { ...QUEUE_CONFIG_DEFAULT, ...config }
  }

  /** Every lease id ever handed out, for command generators. */
  readonly issuedLeaseIds: string[] = []
  /** Lease attempts: the leases each one's last lease made (message id, delivery) and their deadline. */
  private readonly attempts = new Map<
    string,
    { deadlineMs: number; leaseCommand: number; members: [number, number][]; answers: number }
  >()
  /** Lease and extend commands so far. */
  private leaseCommands = 0

  /** Messages the TTL may still delete in this apply (heads by a tick, lines with ttlWaiting). */
  private ttlBudget = 0
  private ttlWaiting = false

  apply(cmd: Command, nowMs: number): CommandResult {
    const now = Math.max(nowMs, this.lastNowMs)
    this.lastNowMs = now
    this.ttlBudget = this.config.expiryBatchMax
    this.ttlWaiting = cmd.type === 'tick' && cmd.ttlWaiting === true
    this.expire(now)
    try {
      const result = this.execute(cmd, now)
      this.passTurns(now)
      this.syncBacklog()
      return result
    } catch (e) {
      if (e instanceof QueueError) return { type: 'rejected', error: e }
      throw e
    }
  }

  // Ordered keys: a key's messages in {ready, delayed, leased} hold its turn (one at a time),
  // those 'waiting' are in line behind, by order; a holder that leaves for good hands it on.
  private readonly departed: ModelMessage[] = []

  private ordered(m: ModelMessage): boolean {
    return this.config.orderedKeys === 1 && m.key !== undefined
  }

  /** Whether any message of `m`'s key other than m is in line (holds the turn or waits). */
  private keyBusy(m: ModelMessage): boolean {
    for (const o of this.messages.values()) {
      if (o !== m && o.key === m.key && o.state !== 'dead') return true
    }
    return false
  }

  /** An arriving message (enqueued, redriven): waits if its ordered key is busy. */
  private arrive(m: ModelMessage, dueMs: number, now: number): void {
    if (this.ordered(m) && this.keyBusy(m)) {
      m.state = 'waiting'
      m.order = this.readyOrder++
      m.dueMs = dueMs
    } else if (dueMs > now) {
      m.state = 'delayed'
      m.dueMs = dueMs
    } else this.toReady(m, 1)
  }

  private depart(m: ModelMessage): void {
    if (this.ordered(m)) this.departed.push(m)
  }

  /**
   * Each departed key's turn goes to its first in line; in a tick with ttlWaiting one that is
   * due and outlived is deleted instead, while the budget lasts, and the key goes on in the
   * next round (the keys take turns: one step down each line per round).
   */
  private passTurns(now: number): void {
    let keys = this.departed.splice(0).map((m) => m.key)
    while (keys.length > 0) {
      const onward: (string | undefined)[] = []
      for (const key of keys) {
        const next = [...this.messages.values()]
          .filter((m) => m.state === 'waiting' && m.key === key)
          .sort((a, b) => a.order - b.order)[0]
        if (!next) continue
        if (this.ttlWaiting && this.ttlBudget > 0 && next.dueMs <= now && this.outlived(next, now)) {
          this.messages.delete(next.id)
          this.counters.discarded++
          this.ttlBudget--
          onward.push(key)
        } else if (next.dueMs > now) next.state = 'delayed'
        else this.toReady(next, 1)
      }
      keys = onward
    }
  }

  /** Weight w's ready messages in delivery order. */
  private leaseOf(m: ModelMessage): Lease {
    return { leaseId: `${m.id}.${m.deliveries}`, ...storedOf(m), deadlineMs: m.deadlineMs }
  }

  private readyOf(w: number): ModelMessage[] {
    return [...this.messages.values()]
      .filter((m) => m.state === 'ready' && m.weight === w)
      .sort((a, b) => a.band - b.band || a.order - b.order)
  }

  private outlived(m: ModelMessage, now: number): boolean {
    return this.config.messageTtlMs > 0 && (m.ttlFromMs ?? m.enqueuedAtMs) + this.config.messageTtlMs <= now
  }

  /**
   * Ordered keys, checked on their own terms after every apply (a bug shared by the model and
   * the partition would leave messages in line behind nobody): per key at most one message
   * holds the turn, and a key with messages in line has one.
   */
  checkTurns(): void {
    if (this.config.orderedKeys !== 1) return
    const holders = new Map<string, number>()
    const waiting = new Set<string>()
    for (const m of this.messages.values()) {
      if (m.key === undefined || m.state === 'dead') continue
      if (m.state === 'waiting') waiting.add(m.key)
      else holders.set(m.key, (holders.get(m.key) ?? 0) + 1)
    }
    for (const [key, n] of holders)
      if (n > 1) throw new Error(`key ${key} has ${n} messages holding its turn`)
    for (const key of waiting)
      if (!holders.has(key)) throw new Error(`key ${key} has messages in line behind nobody`)
  }

  private readyCount(w: number): number {
    let n = 0
    for (const m of this.messages.values()) if (m.weight === w && m.state === 'ready') n++
    return n
  }

  /** Weights that just became backlogged start at max(old pass, ⌈V·w⌉/w). */
  private syncBacklog(): void {
    const now = new Set<number>()
    for (const m of this.messages.values()) if (m.state === 'ready') now.add(m.weight)
    for (const w of now) {
      if (this.backlogged.has(w)) continue
      const start = Math.floor((this.vNum * w) / this.vDen) + ((this.vNum * w) % this.vDen === 0 ? 0 : 1)
      this.passNum.set(w, Math.max(this.passNum.get(w) ?? 0, start))
    }
    this.backlogged = now
  }

  private pick(): number | undefined {
    const ws = [...this.backlogged]
    if (ws.length === 0) return undefined
    let best = ws[0] as number
    for (const w of ws) {
      if (this.config.scheduling === 'strict') {
        if (w > best) best = w
        continue
      }
      const l = (this.passNum.get(w) ?? 0) * best
      const r = (this.passNum.get(best) ?? 0) * w
      if (l < r || (l === r && w > best)) best = w
    }
    const m = this.passNum.get(best) ?? 0
    if (m * this.vDen > this.vNum * best) {
      this.vNum = m
      this.vDen = best
    }
    this.passNum.set(best, m + 1)
    return best
  }

  private toReady(m: ModelMessage, band: number): void {
    m.state = 'ready'
    m.band = band
    m.order = this.readyOrder++
  }

  private toDead(m: ModelMessage): void {
    this.counters.deadLettered++
    m.state = 'dead'
    m.deadOrder = this.deadOrder++
    this.depart(m)
  }

  /** A failed delivery: dead after maxDeliveries attempts, else backed off, else ready at the head. */
  private retry(m: ModelMessage, failedAtMs: number): void {
    const { maxDeliveries, retryBackoffMinMs: min, retryBackoffMaxMs: max } = this.config
    // Written out here, not imported: the model checks the partition's arithmetic.
    let backoff = min
    for (let i = 1; i < m.attempts && backoff < max; i++) backoff *= 2
    if (m.attempts >= maxDeliveries) this.toDead(m)
    else if (min > 0) this.toDelayed(m, failedAtMs + Math.min(backoff, Math.max(min, max)))
    else this.toReady(m, 0)
  }

  private toDelayed(m: ModelMessage, dueMs: number): void {
    m.state = 'delayed'
    m.dueMs = dueMs
  }

  private expire(now: number): void {
    const leases = [...this.messages.values()]
      .filter((m) => m.state === 'leased' && m.deadlineMs <= now)
      .sort((a, b) => a.deadlineMs - b.deadlineMs || a.id - b.id)
    for (const m of leases) {
      this.counters.expired++
      this.retry(m, m.deadlineMs)
    }
    const due = [...this.messages.values()]
      .filter((m) => m.state === 'delayed' && m.dueMs <= now)
      .sort((a, b) => a.dueMs - b.dueMs || a.id - b.id)
    for (const m of due) this.toReady(m, 1)
    this.passTurns(now)
    this.syncBacklog()
  }

  private execute(cmd: Command, now: number): CommandResult {
    const cfg = this.config
    switch (cmd.type) {
      case 'enqueue': {
        const msgs = cmd.messages
        if (msgs.length === 0) throw new InvalidArgumentError('empty')
        if (msgs.length > cfg.enqueueBatchMax) throw new InvalidArgumentError('batch')
        if ((cmd.producerId !== undefined) !== (cmd.producerSeq !== undefined))
          throw new InvalidArgumentError('pair')
        if (cmd.producerId !== undefined) {
          name(cmd.producerId)
          int(cmd.producerSeq, 0, Number.MAX_SAFE_INTEGER)
          if (cmd.producerBase !== undefined) int(cmd.producerBase, 0, cmd.producerSeq as number)
        } else if (cmd.producerBase !== undefined) throw new InvalidArgumentError('base')
        for (const m of msgs) {
          parseWeight(m.weight)
          let size = m.body.length
          for (const [k, v] of Object.entries(m.headers ?? {})) size += utf8Len(k) + utf8Len(v)
          if (m.key !== undefined) {
            name(m.key)
            size += utf8Len(m.key)
          }
          if (m.dedupKey !== undefined) name(m.dedupKey)
          if (m.notBeforeMs !== undefined) int(m.notBeforeMs, 0, now + cfg.delayMsMax)
          if (size > cfg.messageBytesMax) throw new InvalidArgumentError('size')
        }
        let kept: { seq: number; ids: number[] }[] = []
        if (cmd.producerId !== undefined) {
          const rec = this.producers.get(cmd.producerId)
          if (rec && rec.expiresAtMs > now) kept = rec.batches
          const seq = cmd.producerSeq as number
          const hit = kept.find((b) => b.seq === seq)
          if (hit) return { type: 'enqueue', ids: hit.ids, duplicate: true }
          const last = kept.at(-1)?.seq
          if (last !== undefined && seq < last) throw new OutOfOrderSequenceError('seq')
          const base = cmd.producerBase
          if (base !== undefined && base < seq && (last === undefined || seq > last + 1))
            throw new SequenceGapError('gap')
        }
        const live = (k: string) => {
          const d = this.dedup.get(k)
          return d && d.expiresAtMs > now ? d.id : undefined
        }
        const seen = new Set<string>()
        let fresh = 0
        for (const m of msgs) {
          if (m.dedupKey !== undefined && (live(m.dedupKey) !== undefined || seen.has(m.dedupKey))) continue
          if (m.dedupKey !== undefined) seen.add(m.dedupKey)
          fresh++
        }
        if (fresh > cfg.queueMessagesMax) throw new InvalidArgumentError('batch over the whole room')
        if (this.messages.size + fresh > cfg.queueMessagesMax) throw new LimitExceededError('length')
        const ids: number[] = []
        const inBatch = new Map<string, number>()
        for (const m of msgs) {
          if (m.dedupKey !== undefined) {
            const known = live(m.dedupKey) ?? inBatch.get(m.dedupKey)
            if (known !== undefined) {
              ids.push(known)
              continue
            }
          }
          const id = this.nextId++
          this.counters.enqueued++
          ids.push(id)
          const msg: ModelMessage = {
            id,
            weight: parseWeight(m.weight),
            body: m.body,
            headers: { ...(m.headers ?? {}) },
            key: m.key,
            enqueuedAtMs: now,
            ttlFromMs: undefined,
            state: 'ready',
            deliveries: 0,
            attempts: 0,
            band: 1,
            order: 0,
            deadlineMs: 0,
            dueMs: 0,
            deadOrder: 0,
          }
          this.messages.set(id, msg)
          this.arrive(msg, m.notBeforeMs !== undefined && m.notBeforeMs > now ? m.notBeforeMs : 0, now)
          if (m.dedupKey !== undefined) {
            inBatch.set(m.dedupKey, id)
            if (cfg.dedupWindowMs > 0)
              this.dedup.set(m.dedupKey, { id, expiresAtMs: now + cfg.dedupWindowMs })
          }
        }
        if (cmd.producerId !== undefined && cfg.producerWindowMs > 0) {
          this.producers.set(cmd.producerId, {
            batches: [...kept, { seq: cmd.producerSeq as number, ids }].slice(-PRODUCER_BATCHES_KEPT),
            expiresAtMs: now + cfg.producerWindowMs,
          })
        }
        this.syncBacklog()
        return { type: 'enqueue', ids, duplicate: false }
      }
      case 'lease': {
        name(cmd.consumerId)
        if (cmd.attempt !== undefined) name(cmd.attempt)
        int(cmd.max, 1, Number.MAX_SAFE_INTEGER)
        if (cmd.max > cfg.leaseBatchMax) throw new InvalidArgumentError('lease max')
        int(cmd.visibilityMs, 1, cfg.visibilityMsMax)
        if (cmd.bytesMax !== undefined) int(cmd.bytesMax, 1, Number.MAX_SAFE_INTEGER)
        if (cmd.repeatOnly && cmd.attempt === undefined) throw new InvalidArgumentError('repeat-only')
        const repeat = cmd.repeat === true || cmd.repeatOnly === true
        const made = cmd.attempt === undefined || !repeat ? undefined : this.attempts.get(cmd.attempt)
        if (made !== undefined && made.deadlineMs > now) {
          // A repeated attempt: the leases it made that are still held as they were, or a lease anew.
          const held: Lease[] = []
          for (const [id, delivery] of made.members) {
            const m = this.messages.get(id)
            if (
              m?.state !== 'leased' ||
              m.deliveries !== delivery ||
              m.leaseCommand !== made.leaseCommand ||
              m.deadlineMs <= now
            )
              continue
            held.push(this.leaseOf(m))
          }
          if (held.length > 0) {
            made.answers++
            return { type: 'lease', leases: held }
          }
        }
        // Only repeating: nothing new.
        if (cmd.repeatOnly) return { type: 'lease', leases: [] }
        const leases: Lease[] = []
        const leaseCommand = ++this.leaseCommands
        let bytes = 0
        for (let i = 0; i < cmd.max; i++) {
          const before = { passNum: new Map(this.passNum), vNum: this.vNum, vDen: this.vDen }
          const w = this.pick()
          if (w === undefined) break
          const head = this.readyOf(w)[0] as ModelMessage
          // Past the byte budget (the first one always goes): this pick is taken back (charged
          // nothing) and the lease ends.
          let size = head.body.length + utf8Len(head.key ?? '')
          for (const [k, v] of Object.entries(head.headers)) size += utf8Len(k) + utf8Len(v)
          if (
            cmd.bytesMax !== undefined &&
            leases.length > 0 &&
            !this.outlived(head, now) &&
            bytes + size > cmd.bytesMax
          ) {
            this.passNum = before.passNum
            this.vNum = before.vNum
            this.vDen = before.vDen
            break
          }
          if (this.outlived(head, now)) {
            // Deleted, not delivered; the pick counts in the passes, not in the window.
            this.messages.delete(head.id)
            this.counters.discarded++
            this.depart(head)
            if (this.readyCount(w) === 0) this.backlogged.delete(w)
            continue
          }
          bytes += size
          head.state = 'leased'
          head.deliveries++
          head.attempts++
          this.counters.delivered++
          head.deadlineMs = now + cmd.visibilityMs
          head.leaseCommand = leaseCommand
          if (this.readyCount(w) === 0) this.backlogged.delete(w)
          this.window.push(w)
          if (this.window.length > cfg.shareWindowLeases) this.window.shift()
          this.issuedLeaseIds.push(`${head.id}.${head.deliveries}`)
          leases.push(this.leaseOf(head))
        }
        if (cmd.attempt !== undefined && leases.length > 0) {
          this.attempts.set(cmd.attempt, {
            deadlineMs: now + cmd.visibilityMs,
            leaseCommand,
            members: leases.map((l) => [l.messageId, l.deliveryCount]),
            answers: 0,
          })
        }
        return { type: 'lease', leases }
      }
      case 'ack':
      case 'nack':
      case 'extend': {
        if (cmd.leaseIds.length > cfg.leaseBatchMax) throw new InvalidArgumentError('ids')
        const ms = cmd.type === 'nack' ? (cmd.delayMs ?? 0) : cmd.type === 'extend' ? cmd.visibilityMs : 0
        if (cmd.type === 'nack') int(ms, 0, cfg.delayMsMax)
        if (cmd.type === 'extend') int(ms, 1, cfg.visibilityMsMax)
        if (cmd.type === 'nack' && cmd.attempt !== undefined) {
          name(cmd.attempt)
          // A give-back under an attempt that answered its leases more than once changes nothing,
          // nor, with `lapses`, one once the attempt's deadline passed (a lease still held was
          // extended).
          const made = this.attempts.get(cmd.attempt)
          const live = made !== undefined && made.deadlineMs > now
          if (live ? made.answers > 0 : cmd.lapses === true)
            return { type: 'nack', statuses: cmd.leaseIds.map(() => 'expired') }
        }
        const statuses: LeaseStatus[] = []
        const extendCommand = cmd.type === 'extend' ? ++this.leaseCommands : 0
        for (const leaseId of cmd.leaseIds) {
          const match = /^([1-9][0-9]*)\.([1-9][0-9]*)$/.exec(leaseId)
          const m = match ? this.messages.get(Number(match[1])) : undefined
          const d = match ? Number(match[2]) : 0
          if (!m || d > m.deliveries || !Number.isSafeInteger(d) || !Number.isSafeInteger(m.id)) {
            statuses.push('unknown')
            continue
          }
          if (d < m.deliveries || m.state !== 'leased' || m.deadlineMs <= now) {
            statuses.push('expired')
            continue
          }
          statuses.push('ok')
          if (cmd.type === 'ack') this.counters.acked++
          if (cmd.type === 'nack') this.counters.nacked++
          if (cmd.type === 'extend') {
            // A new deadline: the lease leaves its group for the extend's own.
            if (m.deadlineMs !== now + ms) m.leaseCommand = extendCommand
            m.deadlineMs = now + ms
          } else if (cmd.type === 'ack') {
            this.messages.delete(m.id)
            this.depart(m)
          } else if (cmd.type === 'nack' && cmd.release === true) {
            // A give-back: the delivery does not count (nor dead-letters), and takes no backoff.
            m.attempts--
            if (ms > 0) this.toDelayed(m, now + ms)
            else this.toReady(m, 0)
          } else if (m.attempts >= cfg.maxDeliveries) this.toDead(m)
          else if (ms > 0) this.toDelayed(m, now + ms)
          else this.retry(m, now)
        }
        this.syncBacklog()
        if (cmd.type === 'extend') {
          return {
            type: 'extend',
            statuses,
            deadlinesMs: statuses.map((s) => (s === 'ok' ? now + ms : undefined)),
          }
        }
        return { type: cmd.type, statuses }
      }
      case 'tick': {
        // Each weight's head run of messages past the TTL, expiryBatchMax in all.
        if (cfg.messageTtlMs === 0) return { type: 'tick' }
        for (let w = 1; w <= 1000 && this.ttlBudget > 0; w++) {
          const ready = this.readyOf(w)
          let n = 0
          while (n < Math.min(ready.length, this.ttlBudget) && this.outlived(ready[n] as ModelMessage, now))
            n++
          for (const m of ready.slice(0, n)) {
            this.messages.delete(m.id)
            this.depart(m)
          }
          this.counters.discarded += n
          this.ttlBudget -= n
          if (n > 0 && this.readyCount(w) === 0) this.backlogged.delete(w)
        }
        return { type: 'tick' }
      }
      case 'redriveDead':
      case 'purgeDead': {
        int(cmd.max, cmd.type === 'redriveDead' ? 0 : 1, cfg.leaseBatchMax)
        const through = cmd.through
        const after = cmd.type === 'purgeDead' ? cmd.after : undefined
        const deadEnd = this.deadOrder - 1
        if (through !== undefined) int(through, 0, Number.MAX_SAFE_INTEGER)
        if (after !== undefined) int(after, 0, Number.MAX_SAFE_INTEGER - 1)
        const dead = this.deadList()
          .filter(
            (m) =>
              (through === undefined || m.deadOrder <= through) &&
              (after === undefined || m.deadOrder > after),
          )
          .slice(0, cmd.max)
        for (const m of dead) {
          if (cmd.type === 'purgeDead') this.messages.delete(m.id)
          else {
            m.attempts = 0
            if (cmd.type === 'redriveDead' && cmd.restartTtl === true) m.ttlFromMs = now
            this.arrive(m, 0, now)
          }
        }
        this.syncBacklog()
        const ids = dead.map((m) => m.id)
        return cmd.type === 'redriveDead' ? { type: cmd.type, ids, deadEnd } : { type: cmd.type, ids }
      }
      case 'purgeReady': {
        int(cmd.max, 1, cfg.leaseBatchMax)
        // Waiting ones first, by key (its UTF-8 length, then bytes) and order in line.
        const waiting = [...this.messages.values()]
          .filter((m) => m.state === 'waiting')
          .sort((a, b) => compareKeyNames(a.key as string, b.key as string) || a.order - b.order)
          .slice(0, cmd.max)
        for (const m of waiting) this.messages.delete(m.id)
        const ready = [...this.messages.values()]
          .filter((m) => m.state === 'ready')
          .sort((a, b) => a.weight - b.weight || a.band - b.band || a.order - b.order)
          .slice(0, cmd.max - waiting.length)
        for (const m of ready) {
          this.messages.delete(m.id)
          this.depart(m)
        }
        for (const w of new Set(ready.map((m) => m.weight)))
          if (this.readyCount(w) === 0) this.backlogged.delete(w)
        return { type: 'purgeReady', ids: [...waiting, ...ready].map((m) => m.id) }
      }
      case 'configure': {
        const next = { ...this.config }
        for (const [k, v] of Object.entries(cmd.config)) {
          if (v === undefined) continue
          if (k === 'scheduling') {
            if (v !== 'fair' && v !== 'strict') throw new InvalidArgumentError('mode')
          } else if (typeof v !== 'number' || !Number.isInteger(v) || v < (k === 'maxDeliveries' ? 1 : 0)) {
            throw new InvalidArgumentError(k)
          }
          ;(next as Record<string, unknown>)[k] = v
        }
        if (next.orderedKeys !== this.config.orderedKeys) throw new InvalidArgumentError('orderedKeys')
        const windowChanged = next.shareWindowLeases !== this.config.shareWindowLeases
        if (next.scheduling !== this.config.scheduling) {
          // entering a mode re-activates every backlogged weight: lagging passes rise to V
          this.backlogged = new Set()
          this.config = next
          this.syncBacklog()
        }
        if (windowChanged) this.window = []
        this.config = next
        return { type: 'configure' }
      }
    }
  }

  private deadList(): ModelMessage[] {
    return [...this.messages.values()]
      .filter((m) => m.state === 'dead')
      .sort((a, b) => a.deadOrder - b.deadOrder)
  }

  listDead(max: number): DeadMessage[] {
    return this.deadList()
      .slice(0, Math.min(max, this.config.leaseBatchMax))
      .map((m) => ({ ...storedOf(m), cursor: m.deadOrder }))
  }

  /** The ready messages, heaviest weight first, each weight's returned band ahead of its fresh one, FIFO. */
  listReady(max: number): StoredMessage[] {
    return [...this.messages.values()]
      .filter((m) => m.state === 'ready')
      .sort((a, b) => b.weight - a.weight || a.band - b.band || a.order - b.order)
      .slice(0, Math.min(max, this.config.leaseBatchMax))
      .map(storedOf)
  }

  stats(nowMs: number): QueueStats {
    const all = [...this.messages.values()]
    const backlogged = [...new Set(all.filter((m) => m.state === 'ready').map((m) => m.weight))]
    const total = backlogged.reduce((a, w) => a + w, 0)
    const top = Math.max(0, ...backlogged)
    const weights: WeightStats[] = []
    // Ages are read for STATS_AGES_MAX ready weights: the lightest half, then the heaviest.
    const ascending = [...backlogged].sort((a, b) => a - b)
    const light = ascending.slice(0, STATS_AGES_MAX / 2)
    const aged = new Set([...light, ...ascending.slice(light.length).slice(-(STATS_AGES_MAX - light.length))])
    for (let w = 1; w <= 1000; w++) {
      const mine = all.filter((m) => m.weight === w && m.state !== 'waiting')
      const hits = this.window.filter((x) => x === w).length
      if (mine.length === 0 && hits === 0) continue
      const ready = mine
        .filter((m) => m.state === 'ready')
        .sort((a, b) => a.band - b.band || a.order - b.order)
      weights.push({
        weight: w,
        ready: ready.length,
        delayed: mine.filter((m) => m.state === 'delayed').length,
        leased: mine.filter((m) => m.state === 'leased').length,
        dead: mine.filter((m) => m.state === 'dead').length,
        oldestAgeMs: ready[0] && aged.has(w) ? Math.max(0, nowMs - ready[0].enqueuedAtMs) : 0,
        targetShare:
          ready.length === 0 ? 0 : this.config.scheduling === 'strict' ? (w === top ? 1 : 0) : w / total,
        achievedShare: this.window.length === 0 ? 0 : hits / this.window.length,
      })
    }
    return {
      weights,
      messages: all.length,
      waiting: all.filter((m) => m.state === 'waiting').length,
      windowLeases: this.window.length,
      counters: { ...this.counters },
    }
  }
}

/** Ordered keys as the partition's key layout orders them: UTF-8 length, then bytes. */
function compareKeyNames(a: string, b: string): number {
  const x = new TextEncoder().encode(a)
  const y = new TextEncoder().encode(b)
  if (x.length !== y.length) return x.length - y.length
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return (x[i] as number) - (y[i] as number)
  return 0
}

function int(v: unknown, min: number, max: number): void {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max)
    throw new InvalidArgumentError('int')
}

function name(v: unknown): void {
  if (typeof v !== 'string' || v.length === 0 || utf8Len(v) > 256) throw new InvalidArgumentError('name')
}

/** A message as a listing shows it. */
function storedOf(m: ModelMessage): StoredMessage {
  return {
    messageId: m.id,
    weight: m.weight,
    body: m.body,
    headers: m.headers,
    key: m.key,
    deliveryCount: m.deliveries,
    enqueuedAtMs: m.enqueuedAtMs,
  }
}
