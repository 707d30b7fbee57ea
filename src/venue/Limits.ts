/**
 * Budgets of svc-venue: request weight per fixed window (one minute on the server's
 * clock unless shortened), order placements per 10 s and per UTC day, each per key;
 * the replay cache of non-GET signatures; and the block after repeated failed
 * authentication from one IP address or for one key.
 */

export interface LimitValues {
  readonly weightPerMinute: number
  readonly ordersPer10s: number
  readonly ordersPerDay: number
}

export type Bucket = "weight-1m" | "orders-10s" | "orders-1d"

export interface BudgetReport {
  readonly usedWeight: number
  readonly weightLimit: number
  readonly ordersUsed10s: number
  readonly ordersLimit10s: number
  readonly ordersUsed1d: number
  readonly ordersLimit1d: number
}

export interface Refused {
  readonly bucket: Bucket
  readonly retryAfterSeconds: number
}

interface Counters {
  weightWindow: number
  weight: number
  orderWindow10s: number
  orders10s: number
  day: number
  ordersDay: number
}

const TEN_SECONDS_MS = 10_000
const DAY_MS = 86_400_000

const windowOf = (nowMs: number, lengthMs: number): number => Math.floor(nowMs / lengthMs)
const secondsUntil = (endMs: number, nowMs: number): number => Math.max(1, Math.ceil((endMs - nowMs) / 1000))

export class RateLimits {
  private readonly counters = new Map<string, Counters>()

  constructor(
    public limits: LimitValues,
    public weightWindowMs: number
  ) {}

  private counter(keyId: string, nowMs: number): Counters {
    let c = this.counters.get(keyId)
    if (c === undefined) {
      c = { weightWindow: 0, weight: 0, orderWindow10s: 0, orders10s: 0, day: 0, ordersDay: 0 }
      this.counters.set(keyId, c)
    }
    // Fixed windows: a counter belongs to the window it was last charged in.
    const w = windowOf(nowMs, this.weightWindowMs)
    if (c.weightWindow !== w) {
      c.weightWindow = w
      c.weight = 0
    }
    const o = windowOf(nowMs, TEN_SECONDS_MS)
    if (c.orderWindow10s !== o) {
      c.orderWindow10s = o
      c.orders10s = 0
    }
    const d = windowOf(nowMs, DAY_MS)
    if (c.day !== d) {
      c.day = d
      c.ordersDay = 0
    }
    return c
  }

  /**
   * Charges a request, or refuses it without charging. `placement` counts against the
   * order budgets; `neverRefused` (cancels) is counted but always let through.
   */
  charge(keyId: string, weight: number, placement: boolean, neverRefused: boolean, nowMs: number): Refused | undefined {
    const c = this.counter(keyId, nowMs)
    if (!neverRefused) {
      if (c.weight + weight > this.limits.weightPerMinute) {
        return { bucket: "weight-1m", retryAfterSeconds: secondsUntil((c.weightWindow + 1) * this.weightWindowMs, nowMs) }
      }
      if (placement && c.orders10s + 1 > this.limits.ordersPer10s) {
        return { bucket: "orders-10s", retryAfterSeconds: secondsUntil((c.orderWindow10s + 1) * TEN_SECONDS_MS, nowMs) }
      }
      if (placement && c.ordersDay + 1 > this.limits.ordersPerDay) {
        return { bucket: "orders-1d", retryAfterSeconds: secondsUntil((c.day + 1) * DAY_MS, nowMs) }
      }
    }
    c.weight += weight
    if (placement) {
      c.orders10s += 1
      c.ordersDay += 1
    }
    return undefined
  }

  /** Takes back the order budget of a placement that was not accepted (invalid order). */
  refundPlacement(keyId: string, nowMs: number): void {
    const c = this.counter(keyId, nowMs)
    c.orders10s = Math.max(0, c.orders10s - 1)
    c.ordersDay = Math.max(0, c.ordersDay - 1)
  }

  report(keyId: string | undefined, nowMs: number): BudgetReport {
    const c = keyId === undefined ? undefined : this.counter(keyId, nowMs)
    return {
      usedWeight: c?.weight ?? 0,
      weightLimit: this.limits.weightPerMinute,
      ordersUsed10s: c?.orders10s ?? 0,
      ordersLimit10s: this.limits.ordersPer10s,
      ordersUsed1d: c?.ordersDay ?? 0,
      ordersLimit1d: this.limits.ordersPerDay
    }
  }
}

/**
 * Signatures of non-GET requests seen within the largest receive window. A signature
 * older than that cannot pass the timestamp check any more, so it is forgotten; the
 * cache is therefore bounded by the request rate over one window.
 */
export class ReplayCache {
  private readonly seen = new Map<string, number>()
  private lastSweepMs = 0

  constructor(private readonly horizonMs: number) {}

  /** Records the signature; false when it was seen before. */
  remember(signature: string, timestampMs: number, nowMs: number): boolean {
    this.sweep(nowMs)
    if (this.seen.has(signature)) return false
    this.seen.set(signature, timestampMs)
    return true
  }

  get size(): number {
    return this.seen.size
  }

  private sweep(nowMs: number): void {
    if (nowMs - this.lastSweepMs < 1000) return
    this.lastSweepMs = nowMs
    for (const [signature, timestampMs] of this.seen) {
      if (nowMs - timestampMs > this.horizonMs) this.seen.delete(signature)
    }
  }
}

interface Strikes {
  failures: number
  firstAtMs: number
  blockedUntilMs: number
}

/** Most addresses and key ids tracked at once; older entries give way (a flood must not exhaust memory). */
const MAX_TRACKED = 100_000

/**
 * Failed authentication per IP address and per key id. After `failuresBeforeBlock`
 * failures within the block period, key requests from that address or for that key
 * are refused for `blockSeconds`; every failed try during a block extends it.
 */
export class AuthGuard {
  private readonly strikes = new Map<string, Strikes>()

  constructor(
    public failuresBeforeBlock: number,
    public blockSeconds: number
  ) {}

  /** Seconds until the block on either subject ends, or undefined when neither is blocked. */
  blockedFor(subjects: ReadonlyArray<string>, nowMs: number): number | undefined {
    let until = 0
    for (const subject of subjects) {
      const s = this.strikes.get(subject)
      if (s !== undefined && s.blockedUntilMs > nowMs) until = Math.max(until, s.blockedUntilMs)
    }
    return until === 0 ? undefined : Math.ceil((until - nowMs) / 1000)
  }

  fail(subjects: ReadonlyArray<string>, nowMs: number): void {
    const periodMs = this.blockSeconds * 1000
    for (const subject of subjects) {
      let s = this.strikes.get(subject)
      if (s === undefined || (nowMs - s.firstAtMs > periodMs && s.blockedUntilMs <= nowMs)) {
        if (s === undefined && this.strikes.size >= MAX_TRACKED) {
          const oldest = this.strikes.keys().next()
          if (oldest.done !== true) this.strikes.delete(oldest.value)
        }
        s = { failures: 0, firstAtMs: nowMs, blockedUntilMs: 0 }
        this.strikes.set(subject, s)
      }
      s.failures += 1
      if (s.blockedUntilMs > nowMs || s.failures >= this.failuresBeforeBlock) s.blockedUntilMs = nowMs + periodMs
    }
  }
}
