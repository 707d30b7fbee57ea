/**
 * The budget governor: admits key requests so that svcbot waits for the next
 * window instead of earning a 429.
 *
 * The budget headers of every answer are the truth. Between answers the governor
 * estimates: the used count known for the current window plus the weight of every
 * request in flight (conservative: a request the server already counted is counted
 * twice until its answer arrives). Per-endpoint weights are learned from the
 * headers: the server reports a running total after charging each request, so the
 * gap between a request's total and the next lower total seen in the same window is
 * an upper bound of its weight, and the smallest such bound is kept.
 *
 * Requests are admitted by priority (cancel > place > status > reconcile > fills >
 * market data); fills and market data stop short of the limit by a reserve kept for
 * the others. Cancels are never held back by budgets. A 429 RATE_LIMITED holds its
 * bucket for Retry-After; any other 429 (failed-authentication block) stops all key
 * traffic; API_KEY_INVALID opens a circuit that lets one probe through per interval.
 *
 * All times are on the server's clock (ServerClock), because the server counts in
 * fixed windows of its own clock.
 */
import { Deferred, Effect, Exit, FiberId } from "effect"
import { logEvent } from "../log/Logger.js"
import { defaultDialect, type Dialect } from "./Dialect.js"
import { AuthBlocked, CircuitOpen, RateLimited, type SvcError } from "./Errors.js"
import { ServerClock } from "./ServerClock.js"

/** Lower rank goes first. */
export const Priority = { cancel: 0, place: 1, status: 2, reconcile: 3, fills: 4, marketData: 5 } as const
export type Priority = keyof typeof Priority

export interface BudgetOptions {
  /** Percent of the weight limit that fills and market data leave free for cancels, placements, status and reconciliation. */
  readonly reservePct: number
  /** How long key traffic stops after API_KEY_INVALID before one probe request is let through. */
  readonly authProbeIntervalMs: number
  /** Length of the server's weight window (a minute on the real service). */
  readonly weightWindowMs: number
  /** Length of the server's short order window. */
  readonly ordersWindowMs: number
  /** After a window boundary, how long requests still count against the old window: clocks are never exactly aligned. */
  readonly windowGuardMs: number
  /** How often `budget.status` is logged. */
  readonly statusIntervalMs: number
  /** Weight assumed for an endpoint before its weight was learned, when nothing heavier has been seen. */
  readonly defaultWeight: number
  /** Header names from the Dialect. */
  readonly headers: Dialect["budgetHeaders"]
  /**
   * Endpoint weights learned by an earlier run on this key. Without them a restarted process
   * treats every endpoint as unknown and holds a heavy one back until a window has room for a
   * wrong guess, which in a crash loop can starve the startup reconcile for a whole minute.
   */
  readonly learnedWeights?: ReadonlyMap<string, number>
}

export const defaultBudgetOptions: BudgetOptions = {
  reservePct: 10,
  authProbeIntervalMs: 5 * 60_000,
  weightWindowMs: 60_000,
  ordersWindowMs: 10_000,
  windowGuardMs: 250,
  statusIntervalMs: 60_000,
  defaultWeight: 1,
  headers: defaultDialect.budgetHeaders
}

const DAY_MS = 86_400_000

/** What a request needs from the governor. */
export interface Demand {
  /** Method and Dialect path, e.g. `GET /api/wallets/spot`: the unit weights are learned for. */
  readonly endpoint: string
  readonly priority: Priority
  /** Placements also spend the order budgets. */
  readonly placement: boolean
}

export interface Ticket {
  readonly id: number
  readonly demand: Demand
  readonly weight: number
  /** Whether `weight` is a guess: the endpoint's weight was not learned yet. */
  readonly guessed: boolean
  /** Server-clock time of admission: the request is signed and sent right after. */
  readonly admittedAtMs: number
  readonly probe: boolean
}

/** How a request ended, for the governor's books. */
export type Outcome =
  | {
      readonly _tag: "Answered"
      readonly status: number
      readonly header: (name: string) => string | undefined
      readonly error: SvcError | undefined
    }
  /** No answer: the request may or may not have been counted by the server. */
  | { readonly _tag: "Lost" }

/** Key-wide conditions that stop trading, as the last answers showed them (for health). */
export interface KeyHealth {
  /** API_KEY_INVALID was answered and no probe has succeeded since. */
  readonly authInvalid: boolean
  /** How much longer the failed-authentication block lasts (0 when there is none). */
  readonly authBlockedForMs: number
  /** How long requests have been going unanswered or answered with 5xx (0 while the venue answers). */
  readonly unreachableForMs: number
  /** The last such failure, while there is one. */
  readonly lastFailure: string | undefined
}

export interface BudgetSnapshot {
  readonly usedWeight1m: number
  readonly weightLimit1m: number | null
  readonly ordersUsed10s: number
  readonly ordersLimit10s: number | null
  readonly ordersUsed1d: number
  readonly ordersLimit1d: number | null
  /** Requests that had to wait for budget since start. */
  readonly waits: number
  /** 429 RATE_LIMITED answers since start. */
  readonly rateLimited: number
}

type Resource = "weight" | "orders10s" | "orders1d" | "all"

export type Decision =
  | { readonly _tag: "Admit"; readonly ticket: Ticket }
  | { readonly _tag: "Wait"; readonly untilMs: number; readonly reason: "weight" | "orders10s" | "held" | "first-answer" | "priority" }
  | { readonly _tag: "Refuse"; readonly error: AuthBlocked | CircuitOpen | RateLimited }

/**
 * Used count and limit of one fixed window kind, as last reported by the server.
 * A request whose window is uncertain (answered across a boundary, or lost) is
 * charged provisionally to the current window; a total reported by a request
 * admitted after that charge was known already includes it, so it drops out.
 */
class WindowCount {
  window = Number.NEGATIVE_INFINITY
  limit: number | undefined
  private reported = 0
  private provisional: Array<{ readonly atMs: number; readonly amount: number }> = []
  /** Running totals reported in the current window, ascending: the base of weight learning. */
  private totals: Array<number> = []

  constructor(readonly windowMs: number) {}

  windowOf(serverMs: number): number {
    return Math.floor(serverMs / this.windowMs)
  }

  /** The window a request sent now counts against: inside the guard the old one, unless an answer already came from the new one. */
  bindingWindow(now: number, guardMs: number): number {
    return Math.max(this.windowOf(now - guardMs), Math.min(this.window, this.windowOf(now)))
  }

  usedIn(window: number): number {
    if (window < this.window) return Number.POSITIVE_INFINITY
    if (window > this.window) return 0
    let used = this.reported
    for (const charge of this.provisional) used += charge.amount
    return used
  }

  private enter(window: number): boolean {
    if (window < this.window) return false
    if (window > this.window) {
      this.window = window
      this.reported = 0
      this.provisional = []
      this.totals = []
    }
    return true
  }

  /**
   * Records the total reported by an answer counted in `window` for a request
   * admitted at `admittedAtMs`; returns the gap to the next lower total of the
   * window (an upper bound of the weight just charged), or undefined when it says
   * nothing about that weight.
   */
  report(window: number, total: number, admittedAtMs: number): number | undefined {
    if (!this.enter(window)) return undefined
    this.reported = Math.max(this.reported, total)
    if (this.provisional.length > 0) this.provisional = this.provisional.filter((charge) => charge.atMs > admittedAtMs)
    let low = 0
    let high = this.totals.length
    while (low < high) {
      const mid = (low + high) >>> 1
      if (this.totals[mid]! < total) low = mid + 1
      else high = mid
    }
    if (this.totals[low] === total) return undefined
    const below = low === 0 ? 0 : this.totals[low - 1]!
    this.totals.splice(low, 0, total)
    return total - below
  }

  /** Forgets the window's counts: after a clock correction its times are on another base. */
  rebase(): void {
    this.window = Number.NEGATIVE_INFINITY
    this.reported = 0
    this.provisional = []
    this.totals = []
  }

  /** Counts `amount` in `window` until an answer sent after `atMs` reports a total that includes it. */
  charge(window: number, amount: number, atMs: number): void {
    if (this.enter(window)) this.provisional.push({ atMs, amount })
  }
}

const readCount = (header: (name: string) => string | undefined, name: string): number | undefined => {
  const text = header(name)
  if (text === undefined || !/^\d+$/.test(text.trim())) return undefined
  const n = Number(text.trim())
  return Number.isSafeInteger(n) ? n : undefined
}

/** Which part of the budget a RATE_LIMITED bucket names. Bucket names are not shown by the spec. */
export const resourceOfBucket = (bucket: string): Resource => {
  const name = bucket.toLowerCase()
  if (name.includes("10s")) return "orders10s"
  if (name.includes("1d") || name.includes("day")) return "orders1d"
  if (name.includes("weight") || name.includes("1m")) return "weight"
  return "all"
}

/**
 * The governor's state and decisions, synchronous and clock-free: every method is
 * given the server-clock time. The `Budget` service below drives it with fibers.
 */
export class Governor {
  readonly weight: WindowCount
  readonly orders10s: WindowCount
  readonly orders1d = new WindowCount(DAY_MS)
  private readonly learned = new Map<string, number>()
  private heaviest = 0
  private readonly inFlight = new Map<number, Ticket>()
  private inFlightWeight = 0
  private inFlightOrders = 0
  private inFlightUnlearned = 0
  private nextId = 1
  private readonly heldUntil = new Map<Resource, number>()
  private blockedUntil = 0
  private circuitOpenUntil: number | undefined
  private probing = false
  /** Server-clock time of the first unanswered or 5xx request since the last good answer. */
  private failingSinceMs: number | undefined
  private lastFailure: string | undefined
  /** Requests waiting on the weight budget, per priority rank. */
  private readonly waitingByRank: Array<number> = [0, 0, 0, 0, 0, 0]
  waits = 0
  rateLimited = 0

  constructor(readonly options: BudgetOptions) {
    this.weight = new WindowCount(options.weightWindowMs)
    this.orders10s = new WindowCount(options.ordersWindowMs)
    for (const [endpoint, weight] of options.learnedWeights ?? []) {
      this.learned.set(endpoint, weight)
      this.heaviest = Math.max(this.heaviest, weight)
    }
  }

  /** The weight a request to `endpoint` is expected to cost. */
  weightOf(endpoint: string): number {
    return this.learned.get(endpoint) ?? Math.max(this.options.defaultWeight, this.heaviest)
  }

  learnedWeights(): ReadonlyMap<string, number> {
    return this.learned
  }

  decide(demand: Demand, now: number): Decision {
    const endpoint = demand.endpoint
    if (this.circuitOpenUntil !== undefined) {
      if (now < this.circuitOpenUntil) return { _tag: "Refuse", error: new CircuitOpen({ endpoint, retryAfterMs: this.circuitOpenUntil - now }) }
      // Past the interval exactly one request goes out to find whether the key works again.
      if (this.probing) return { _tag: "Refuse", error: new CircuitOpen({ endpoint, retryAfterMs: 0 }) }
    }
    if (now < this.blockedUntil) {
      return { _tag: "Refuse", error: new AuthBlocked({ endpoint, code: null, retryAfter: Math.ceil((this.blockedUntil - now) / 1000) }) }
    }
    const rank = Priority[demand.priority]
    const weight = this.weightOf(endpoint)
    if (rank === Priority.cancel) return this.admit(demand, weight, now)

    const held = Math.max(this.heldUntil.get("all") ?? 0, this.heldUntil.get("weight") ?? 0, demand.placement ? this.heldUntil.get("orders10s") ?? 0 : 0)
    if (now < held) return { _tag: "Wait", untilMs: held, reason: "held" }
    if (demand.placement && now < (this.heldUntil.get("orders1d") ?? 0)) {
      return { _tag: "Refuse", error: new RateLimited({ endpoint, bucket: "orders-1d", retryAfter: Math.ceil(((this.heldUntil.get("orders1d") ?? 0) - now) / 1000) }) }
    }

    const window = this.weight.bindingWindow(now, this.options.windowGuardMs)
    const nextWindowAt = (window + 1) * this.weight.windowMs + this.options.windowGuardMs
    // Until the first answer tells the limit, requests go one at a time.
    if (this.weight.limit === undefined) {
      return this.inFlight.size === 0 ? this.admit(demand, weight, now) : { _tag: "Wait", untilMs: nextWindowAt, reason: "first-answer" }
    }
    // An endpoint whose weight is still a guess goes one request at a time until an answer teaches it.
    if (!this.learned.has(endpoint) && this.inFlightUnlearned > 0) return { _tag: "Wait", untilMs: nextWindowAt, reason: "first-answer" }
    for (let higher = 0; higher < rank; higher++) {
      if (this.waitingByRank[higher]! > 0) return { _tag: "Wait", untilMs: nextWindowAt, reason: "priority" }
    }
    const cap = rank >= Priority.fills ? Math.floor((this.weight.limit * (100 - this.options.reservePct)) / 100) : this.weight.limit
    const known = this.weight.usedIn(window)
    // A request heavier than a whole window's allowance still goes out when nothing else is counted, rather than wait forever.
    // While a request of guessed weight is in flight, half the allowance stays free for what it may really cost.
    const guessReserve = this.inFlightUnlearned > 0 ? Math.ceil(cap / 2) : 0
    const fits = known + this.inFlightWeight + guessReserve + weight <= cap || (known === 0 && this.inFlightWeight === 0)
    if (!fits) return { _tag: "Wait", untilMs: nextWindowAt, reason: "weight" }
    // A guessed weight may be too low (the endpoint may cost more than anything seen): a request to an
    // endpoint not learned yet goes out only while half the allowance is free, so a wrong guess still fits.
    if (!this.learned.has(endpoint) && known + this.inFlightWeight > 0 && known + this.inFlightWeight + weight > cap / 2) {
      return { _tag: "Wait", untilMs: nextWindowAt, reason: "weight" }
    }

    if (demand.placement) {
      const orderWindow = this.orders10s.bindingWindow(now, this.options.windowGuardMs)
      const limit10s = this.orders10s.limit
      if (limit10s !== undefined && this.orders10s.usedIn(orderWindow) + this.inFlightOrders + 1 > limit10s) {
        return { _tag: "Wait", untilMs: (orderWindow + 1) * this.orders10s.windowMs + this.options.windowGuardMs, reason: "orders10s" }
      }
      const dayWindow = this.orders1d.bindingWindow(now, this.options.windowGuardMs)
      const limit1d = this.orders1d.limit
      if (limit1d !== undefined && this.orders1d.usedIn(dayWindow) + this.inFlightOrders + 1 > limit1d) {
        const nextDay = (dayWindow + 1) * DAY_MS
        return { _tag: "Refuse", error: new RateLimited({ endpoint, bucket: "orders-1d", retryAfter: Math.ceil((nextDay - now) / 1000) }) }
      }
    }
    return this.admit(demand, weight, now)
  }

  private admit(demand: Demand, weight: number, now: number): Decision {
    const probe = this.circuitOpenUntil !== undefined
    if (probe) this.probing = true
    const ticket: Ticket = { id: this.nextId++, demand, weight, guessed: !this.learned.has(demand.endpoint), admittedAtMs: now, probe }
    this.inFlight.set(ticket.id, ticket)
    this.inFlightWeight += weight
    if (demand.placement) this.inFlightOrders += 1
    if (ticket.guessed) this.inFlightUnlearned += 1
    return { _tag: "Admit", ticket }
  }

  /**
   * The server clock's offset was corrected: window numbers computed before are on
   * another base, so the counts start over from the next answer. Limits stay.
   */
  clockCorrected(): void {
    this.weight.rebase()
    this.orders10s.rebase()
    this.orders1d.rebase()
  }

  /** A waiter on the weight budget makes lower priorities wait behind it. */
  enqueue(priority: Priority): void {
    this.waitingByRank[Priority[priority]]! += 1
  }

  dequeue(priority: Priority): void {
    this.waitingByRank[Priority[priority]]! -= 1
  }

  settle(ticket: Ticket, outcome: Outcome, now: number): void {
    if (!this.inFlight.delete(ticket.id)) return
    this.inFlightWeight -= ticket.weight
    if (ticket.demand.placement) this.inFlightOrders -= 1
    if (ticket.guessed) this.inFlightUnlearned -= 1
    if (ticket.probe) this.probing = false

    if (outcome._tag === "Lost" || outcome.status >= 500) {
      this.failingSinceMs ??= now
      this.lastFailure = outcome._tag === "Lost" ? `${ticket.demand.endpoint}: no answer` : `${ticket.demand.endpoint}: HTTP ${outcome.status}`
    } else {
      this.failingSinceMs = undefined
      this.lastFailure = undefined
    }
    if (outcome._tag === "Lost") {
      // It may have been counted, in either window if it crossed a boundary: count it now.
      this.weight.charge(this.weight.windowOf(now), ticket.weight, now)
      if (ticket.demand.placement) {
        this.orders10s.charge(this.orders10s.windowOf(now), 1, now)
        this.orders1d.charge(this.orders1d.windowOf(now), 1, now)
      }
      return
    }
    this.readHeaders(ticket, outcome, now)
    const error = outcome.error
    if (error?._tag === "ApiKeyInvalid") {
      this.circuitOpenUntil = now + this.options.authProbeIntervalMs
      return
    }
    // Only the probe speaks for the key: an answer to a request sent before the circuit opened does not.
    if (ticket.probe && error?._tag !== "AuthBlocked") this.circuitOpenUntil = undefined
    if (error?._tag === "RateLimited") {
      this.rateLimited += 1
      const resource = resourceOfBucket(error.bucket)
      this.heldUntil.set(resource, Math.max(this.heldUntil.get(resource) ?? 0, now + error.retryAfter * 1000))
    } else if (error?._tag === "AuthBlocked") {
      this.blockedUntil = Math.max(this.blockedUntil, now + error.retryAfter * 1000)
    }
  }

  private readHeaders(ticket: Ticket, outcome: Extract<Outcome, { _tag: "Answered" }>, now: number): void {
    const names = this.options.headers
    const placed = ticket.demand.placement ? 1 : 0
    this.readCounts(this.weight, outcome, names.usedWeight1m, names.weightLimit1m, ticket, ticket.weight, now)
    this.readCounts(this.orders10s, outcome, names.ordersUsed10s, names.ordersLimit10s, ticket, placed, now)
    this.readCounts(this.orders1d, outcome, names.ordersUsed1d, names.ordersLimit1d, ticket, placed, now)
  }

  /** Books one window kind's used count and limit from an answer's headers; `amount` is what the request spends of it. */
  private readCounts(
    count: WindowCount,
    outcome: Extract<Outcome, { _tag: "Answered" }>,
    usedName: string,
    limitName: string,
    ticket: Ticket,
    amount: number,
    now: number
  ): void {
    // A refused request is not charged; other answers are (the server counts after authentication).
    const charged = outcome.status < 400
    const limit = readCount(outcome.header, limitName)
    if (limit !== undefined) count.limit = limit
    const used = readCount(outcome.header, usedName)
    if (used === undefined) return
    const window = count.windowOf(now)
    if (count.windowOf(ticket.admittedAtMs) !== window) {
      // Sent in one window and answered in the next: the total may belong to either.
      if (charged && amount > 0) count.charge(window, amount, now)
      return
    }
    const bound = count.report(window, used, ticket.admittedAtMs)
    if (count === this.weight && bound !== undefined && charged) {
      const endpoint = ticket.demand.endpoint
      const previous = this.learned.get(endpoint)
      const learned = previous === undefined ? bound : Math.min(previous, bound)
      if (learned !== previous) {
        this.learned.set(endpoint, learned)
        this.heaviest = Math.max(...this.learned.values())
      }
    }
  }

  keyHealth(now: number): KeyHealth {
    return {
      authInvalid: this.circuitOpenUntil !== undefined,
      authBlockedForMs: Math.max(0, this.blockedUntil - now),
      unreachableForMs: this.failingSinceMs === undefined ? 0 : Math.max(0, now - this.failingSinceMs),
      lastFailure: this.lastFailure
    }
  }

  snapshot(now: number): BudgetSnapshot {
    return {
      usedWeight1m: this.weight.usedIn(this.weight.windowOf(now)),
      weightLimit1m: this.weight.limit ?? null,
      ordersUsed10s: this.orders10s.usedIn(this.orders10s.windowOf(now)),
      ordersLimit10s: this.orders10s.limit ?? null,
      ordersUsed1d: this.orders1d.usedIn(this.orders1d.windowOf(now)),
      ordersLimit1d: this.orders1d.limit ?? null,
      waits: this.waits,
      rateLimited: this.rateLimited
    }
  }
}

export const resolveBudgetOptions = (options: Partial<BudgetOptions> = {}): BudgetOptions => ({ ...defaultBudgetOptions, ...options })

/**
 * The governor as a service: `admit` waits (or refuses) until a request may go
 * out, `settle` books its answer and wakes the waiters. One per key.
 */
export class Budget extends Effect.Service<Budget>()("svcbot/Budget", {
  scoped: (options: Partial<BudgetOptions> = {}) =>
    Effect.gen(function* () {
      const clock = yield* ServerClock
      const governor = new Governor(resolveBudgetOptions(options))
      let offsetMs = yield* clock.offsetMs
      /** Server-clock time at a local reading, after rebasing the books if the clock was corrected since the last look. */
      const serverTimeAt = (localMs: number): number => {
        const serverMs = clock.at(localMs)
        if (serverMs - localMs !== offsetMs) {
          offsetMs = serverMs - localMs
          governor.clockCorrected()
        }
        return serverMs
      }
      // One read of Effect's Clock per decision: admission and booking run for every request.
      const serverNow: Effect.Effect<number> = Effect.clockWith((local) => Effect.succeed(serverTimeAt(local.unsafeCurrentTimeMillis())))
      // Every change of the books completes this and replaces it, waking all waiters to decide again.
      let changed = Deferred.unsafeMake<void>(FiberId.none)
      let sleeping = 0
      const notify = () => {
        // Nobody waits in the common case: skip the allocation.
        if (sleeping === 0) return
        const previous = changed
        changed = Deferred.unsafeMake<void>(FiberId.none)
        Deferred.unsafeDone(previous, Exit.void)
      }

      /**
       * Admission without waiting, the common case, decided at local wall-clock time
       * `localMs` (the caller's reading of Effect's Clock): the ticket, or undefined
       * when the request has to wait or is refused, which `admit` then says.
       */
      const tryAdmit = (demand: Demand, localMs: number): Ticket | undefined => {
        const decision = governor.decide(demand, serverTimeAt(localMs))
        return decision._tag === "Admit" ? decision.ticket : undefined
      }

      const admit = (demand: Demand): Effect.Effect<Ticket, AuthBlocked | CircuitOpen | RateLimited> =>
        Effect.clockWith((local): Effect.Effect<Ticket, AuthBlocked | CircuitOpen | RateLimited> => {
          const decision = governor.decide(demand, serverTimeAt(local.unsafeCurrentTimeMillis()))
          if (decision._tag === "Admit") return Effect.succeed(decision.ticket)
          if (decision._tag === "Refuse") return Effect.fail(decision.error)
          return admitWaiting(demand)
        })

      const admitWaiting = (demand: Demand): Effect.Effect<Ticket, AuthBlocked | CircuitOpen | RateLimited> =>
        Effect.gen(function* () {
          let waiting = false
          let wasQueued = false
          for (;;) {
            const now = yield* serverNow
            const signal = changed
            const decision = governor.decide(demand, now)
            if (decision._tag !== "Wait") {
              // Lower priorities queued behind this request may go now.
              if (wasQueued) notify()
              if (decision._tag === "Admit") return decision.ticket
              return yield* Effect.fail(decision.error)
            }
            // Registered in the same step as the decision, so that no change in between goes unnoticed.
            const queued = decision.reason === "weight" || decision.reason === "priority"
            if (queued) governor.enqueue(demand.priority)
            sleeping += 1
            const leave = Effect.sync(() => {
              sleeping -= 1
              if (queued) governor.dequeue(demand.priority)
            })
            const sleep = Effect.gen(function* () {
              if (!waiting) {
                waiting = true
                governor.waits += 1
                const snapshot = governor.snapshot(now)
                yield* logEvent("budget.wait", {
                  endpoint: demand.endpoint,
                  priority: demand.priority,
                  reason: decision.reason,
                  // The longest the wait can last; a first answer or a waiter ahead finishing ends it sooner.
                  waitMs: Math.max(0, decision.untilMs - now),
                  endsOn: decision.reason === "held" ? "retry-after" : decision.reason === "first-answer" || decision.reason === "priority" ? "answer-or-window" : "window",
                  usedWeight1m: snapshot.usedWeight1m,
                  weightLimit1m: snapshot.weightLimit1m
                })
              }
              yield* Effect.raceFirst(Deferred.await(signal), Effect.sleep(Math.max(1, decision.untilMs - now)))
            })
            yield* sleep.pipe(
              Effect.ensuring(leave),
              // Lower priorities queued behind an abandoned request may go now.
              Effect.onInterrupt(() => Effect.sync(() => queued && notify()))
            )
            wasQueued = queued
          }
        })

      /**
       * Books how a request ended at local wall-clock time `localMs` and wakes the waiters;
       * returns the line to log about it (`Effect.void` for an ordinary answer).
       */
      const settleAt = (ticket: Ticket, outcome: Outcome, localMs: number): Effect.Effect<void> => {
        governor.settle(ticket, outcome, serverTimeAt(localMs))
        notify()
        const error = outcome._tag === "Answered" ? outcome.error : undefined
        switch (error?._tag) {
          case "ApiKeyInvalid":
            return logEvent("auth.invalid", { endpoint: error.endpoint, nextProbeInMs: governor.options.authProbeIntervalMs })
          case "RateLimited":
            return logEvent("rate.limited", { endpoint: error.endpoint, bucket: error.bucket, retryAfter: error.retryAfter })
          case "AuthBlocked":
            return logEvent("auth.blocked", { endpoint: error.endpoint, code: error.code, retryAfter: error.retryAfter })
          default:
            return Effect.void
        }
      }

      const settle = (ticket: Ticket, outcome: Outcome): Effect.Effect<void> =>
        Effect.clockWith((local) => settleAt(ticket, outcome, local.unsafeCurrentTimeMillis()))

      const snapshot: Effect.Effect<BudgetSnapshot> = Effect.map(serverNow, (now) => governor.snapshot(now))
      const keyHealth: Effect.Effect<KeyHealth> = Effect.map(serverNow, (now) => governor.keyHealth(now))

      const logStatus = Effect.flatMap(snapshot, (current) => logEvent("budget.status", { ...current }))
      yield* Effect.forkScoped(Effect.forever(Effect.zipRight(Effect.sleep(governor.options.statusIntervalMs), logStatus)))

      return {
        admit,
        tryAdmit,
        settle,
        settleAt,
        snapshot,
        keyHealth,
        /** The learned per-endpoint weights, for `doctor` and the status line. */
        learnedWeights: Effect.sync(() => new Map(governor.learnedWeights()) as ReadonlyMap<string, number>),
        options: governor.options
      } as const
    })
}) {}
