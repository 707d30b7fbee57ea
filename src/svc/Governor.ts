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
 * the others, until the engine's stop releases it (no other work follows then).
 * Cancels are never held back by budgets. A 429 RATE_LIMITED holds its bucket for
 * Retry-After; any other 429 (failed-authentication block) stops all key traffic;
 * API_KEY_INVALID opens a circuit that lets one probe through per interval.
 *
 * All times are on the server's clock (ServerClock), because the server counts in
 * fixed windows of its own clock. Everything here is synchronous and clock-free: the
 * `Budget` service (Budget.ts) gives it the time and makes requests wait.
 */
import { firstNotBelow } from "../domain/Bisect.js"
import { defaultDialect, type Dialect } from "./Dialect.js"
import { AuthBlocked, CircuitOpen, RateLimited, type SvcError } from "./Errors.js"

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

export type Wait = { readonly _tag: "Wait"; readonly untilMs: number; readonly reason: "weight" | "orders10s" | "held" | "first-answer" | "priority" }
export type Refuse = { readonly _tag: "Refuse"; readonly error: AuthBlocked | CircuitOpen | RateLimited }

/** Whether a request may go now, and at what weight; the governor books an admitted one as a Ticket. */
export type Admission = { readonly _tag: "Admit"; readonly weight: number } | Wait | Refuse

export type Decision = { readonly _tag: "Admit"; readonly ticket: Ticket } | Wait | Refuse

/**
 * An upper bound of a request's weight, from the totals of its window. A loose one is the first
 * total of a window that began before the process saw it: it may hold what was spent before the
 * process started, all of a window's spending, so it is never taken as the guess for other endpoints.
 */
export interface WeightBound {
  readonly weight: number
  readonly loose: boolean
}

/**
 * Used count and limit of one fixed window kind, as last reported by the server.
 * A request whose window is uncertain (answered across a boundary, or lost) is
 * charged provisionally to the current window; a total reported by a request
 * admitted after that charge was known already includes it, so it drops out.
 */
export class WindowCount {
  window = Number.NEGATIVE_INFINITY
  limit: number | undefined
  private reported = 0
  private provisional: Array<{ readonly atMs: number; readonly amount: number }> = []
  /** Running totals reported in the current window, ascending: the base of weight learning. */
  private totals: Array<number> = []
  /**
   * Whether this count was kept when the current window began. The first window a process sees
   * (or the first after a clock correction) began without it: its first total includes what was
   * spent before the process started, and is no bound on the weight of the request it answered.
   */
  private sawStart = false

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
      this.sawStart = this.window !== Number.NEGATIVE_INFINITY
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
   * nothing about that weight. The window's lowest total is a loose bound when
   * this count did not see the window begin.
   */
  report(window: number, total: number, admittedAtMs: number): WeightBound | undefined {
    if (!this.enter(window)) return undefined
    this.reported = Math.max(this.reported, total)
    if (this.provisional.length > 0) this.provisional = this.provisional.filter((charge) => charge.atMs > admittedAtMs)
    const totals = this.totals
    const low = firstNotBelow(totals.length, (i) => totals[i]! < total)
    if (totals[low] === total) return undefined
    totals.splice(low, 0, total)
    // The lowest total of a window this count did not see begin may hold what was spent before the process started.
    if (low === 0) return { weight: total, loose: !this.sawStart }
    return { weight: total - totals[low - 1]!, loose: false }
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

/** What admission reads of a window kind's books. */
export interface WindowView {
  readonly windowMs: number
  readonly limit: number | undefined
  bindingWindow(now: number, guardMs: number): number
  usedIn(window: number): number
}

/** What admission reads of the governor's books; only the governor's methods change them. */
export interface AdmissionState {
  readonly options: BudgetOptions
  readonly weight: WindowView
  readonly orders10s: WindowView
  readonly orders1d: WindowView
  readonly learned: ReadonlyMap<string, number>
  /** The heaviest weight learned (from a tight bound): an endpoint not learned yet is assumed to cost as much. */
  readonly heaviest: number
  readonly inFlight: ReadonlyMap<number, Ticket>
  readonly inFlightWeight: number
  readonly inFlightOrders: number
  /** Requests in flight whose weight is a guess. */
  readonly inFlightUnlearned: number
  /** Until when a RATE_LIMITED bucket holds its part of the budget. */
  readonly heldUntil: ReadonlyMap<Resource, number>
  /** End of the failed-authentication block. */
  readonly blockedUntil: number
  /** Set while API_KEY_INVALID stops key traffic: when the next probe may go. */
  readonly circuitOpenUntil: number | undefined
  /** The probe is in flight. */
  readonly probing: boolean
  /** Requests waiting on the weight budget, per priority rank. */
  readonly waitingByRank: ReadonlyArray<number>
  /** Whether fills and market data still leave the reserve free: until the engine stops, when nothing follows its last reads. */
  readonly reserveKept: boolean
}

/** The weight a request to `endpoint` is expected to cost. */
export const expectedWeight = (state: AdmissionState, endpoint: string): number =>
  state.learned.get(endpoint) ?? Math.max(state.options.defaultWeight, state.heaviest)

/** Whether `demand` may go at server-clock time `now`, given the books; it changes nothing. */
export const decideAdmission = (state: AdmissionState, demand: Demand, now: number): Admission => {
  const endpoint = demand.endpoint
  if (state.circuitOpenUntil !== undefined) {
    if (now < state.circuitOpenUntil) return { _tag: "Refuse", error: new CircuitOpen({ endpoint, retryAfterMs: state.circuitOpenUntil - now }) }
    // Past the interval exactly one request goes out to find whether the key works again.
    if (state.probing) return { _tag: "Refuse", error: new CircuitOpen({ endpoint, retryAfterMs: 0 }) }
  }
  if (now < state.blockedUntil) {
    return { _tag: "Refuse", error: new AuthBlocked({ endpoint, code: null, retryAfter: Math.ceil((state.blockedUntil - now) / 1000) }) }
  }
  const rank = Priority[demand.priority]
  const weight = expectedWeight(state, endpoint)
  const admit: Admission = { _tag: "Admit", weight }
  if (rank === Priority.cancel) return admit

  const held = Math.max(state.heldUntil.get("all") ?? 0, state.heldUntil.get("weight") ?? 0, demand.placement ? state.heldUntil.get("orders10s") ?? 0 : 0)
  if (now < held) return { _tag: "Wait", untilMs: held, reason: "held" }
  if (demand.placement && now < (state.heldUntil.get("orders1d") ?? 0)) {
    return { _tag: "Refuse", error: new RateLimited({ endpoint, bucket: "orders-1d", retryAfter: Math.ceil(((state.heldUntil.get("orders1d") ?? 0) - now) / 1000) }) }
  }

  const window = state.weight.bindingWindow(now, state.options.windowGuardMs)
  const nextWindowAt = (window + 1) * state.weight.windowMs + state.options.windowGuardMs
  // Until the first answer tells the limit, requests go one at a time.
  if (state.weight.limit === undefined) {
    return state.inFlight.size === 0 ? admit : { _tag: "Wait", untilMs: nextWindowAt, reason: "first-answer" }
  }
  // An endpoint whose weight is still a guess goes one request at a time until an answer teaches it.
  if (!state.learned.has(endpoint) && state.inFlightUnlearned > 0) return { _tag: "Wait", untilMs: nextWindowAt, reason: "first-answer" }
  for (let higher = 0; higher < rank; higher++) {
    if (state.waitingByRank[higher]! > 0) return { _tag: "Wait", untilMs: nextWindowAt, reason: "priority" }
  }
  const cap = rank >= Priority.fills && state.reserveKept ? Math.floor((state.weight.limit * (100 - state.options.reservePct)) / 100) : state.weight.limit
  const known = state.weight.usedIn(window)
  // A request heavier than a whole window's allowance still goes out when nothing else is counted, rather than wait forever.
  // While a request of guessed weight is in flight, half the allowance stays free for what it may really cost.
  const guessReserve = state.inFlightUnlearned > 0 ? Math.ceil(cap / 2) : 0
  const fits = known + state.inFlightWeight + guessReserve + weight <= cap || (known === 0 && state.inFlightWeight === 0)
  if (!fits) return { _tag: "Wait", untilMs: nextWindowAt, reason: "weight" }
  // A guessed weight may be too low (the endpoint may cost more than anything seen): a request to an
  // endpoint not learned yet goes out only while half the allowance is free, so a wrong guess still fits.
  if (!state.learned.has(endpoint) && known + state.inFlightWeight > 0 && known + state.inFlightWeight + weight > cap / 2) {
    return { _tag: "Wait", untilMs: nextWindowAt, reason: "weight" }
  }

  if (demand.placement) {
    const orderWindow = state.orders10s.bindingWindow(now, state.options.windowGuardMs)
    const limit10s = state.orders10s.limit
    if (limit10s !== undefined && state.orders10s.usedIn(orderWindow) + state.inFlightOrders + 1 > limit10s) {
      return { _tag: "Wait", untilMs: (orderWindow + 1) * state.orders10s.windowMs + state.options.windowGuardMs, reason: "orders10s" }
    }
    const dayWindow = state.orders1d.bindingWindow(now, state.options.windowGuardMs)
    const limit1d = state.orders1d.limit
    if (limit1d !== undefined && state.orders1d.usedIn(dayWindow) + state.inFlightOrders + 1 > limit1d) {
      const nextDay = (dayWindow + 1) * DAY_MS
      return { _tag: "Refuse", error: new RateLimited({ endpoint, bucket: "orders-1d", retryAfter: Math.ceil((nextDay - now) / 1000) }) }
    }
  }
  return admit
}

/**
 * The governor's state and decisions, synchronous and clock-free: every method is
 * given the server-clock time. The `Budget` service below drives it with fibers.
 */
export class Governor implements AdmissionState {
  readonly weight: WindowCount
  readonly orders10s: WindowCount
  readonly orders1d = new WindowCount(DAY_MS)
  readonly learned = new Map<string, number>()
  /** Endpoints whose learned weight is a loose bound (`WeightBound`): kept for them, not lent to others as a guess, not handed to the next run. */
  private readonly loose = new Set<string>()
  heaviest = 0
  readonly inFlight = new Map<number, Ticket>()
  inFlightWeight = 0
  inFlightOrders = 0
  inFlightUnlearned = 0
  private nextId = 1
  readonly heldUntil = new Map<Resource, number>()
  blockedUntil = 0
  circuitOpenUntil: number | undefined
  probing = false
  /** Server-clock time of the first unanswered or 5xx request since the last good answer. */
  private failingSinceMs: number | undefined
  private lastFailure: string | undefined
  readonly waitingByRank: Array<number> = [0, 0, 0, 0, 0, 0]
  reserveKept = true
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
    return expectedWeight(this, endpoint)
  }

  /** The weights learned so far but the loose bounds: what the next run on this key may start from. */
  learnedWeights(): ReadonlyMap<string, number> {
    if (this.loose.size === 0) return this.learned
    return new Map([...this.learned].filter(([endpoint]) => !this.loose.has(endpoint)))
  }

  /** The heaviest weight learned from a tight bound. */
  private tightMax(): number {
    let heaviest = 0
    for (const [endpoint, weight] of this.learned) if (!this.loose.has(endpoint)) heaviest = Math.max(heaviest, weight)
    return heaviest
  }

  /** The admission of `demand` at `now`, booked as a ticket in flight when it may go. */
  decide(demand: Demand, now: number): Decision {
    const admission = decideAdmission(this, demand, now)
    return admission._tag === "Admit" ? this.admit(demand, admission.weight, now) : admission
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

  /**
   * The engine stops: its placements are withdrawn and its loops ended, so the reserve is kept for
   * no one, and the stop's own reads (its last fill sync) may use the whole limit, as the venue allows.
   */
  releaseReserve(): void {
    this.reserveKept = false
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
      const wasLoose = this.loose.has(endpoint)
      // Every bound holds, so the smallest is kept; it is loose only while no tight bound was ever above or at it.
      if (previous === undefined || bound.weight < previous) this.learned.set(endpoint, bound.weight)
      if (!bound.loose) this.loose.delete(endpoint)
      else if (previous === undefined) this.loose.add(endpoint)
      // Most answers teach nothing new: the heaviest is looked for again only when something changed.
      if (this.learned.get(endpoint) !== previous || this.loose.has(endpoint) !== wasLoose) this.heaviest = this.tightMax()
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

