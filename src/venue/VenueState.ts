/**
 * What svc-venue holds between requests: the matching engine, accounts and keys, the tapes
 * and their step logs, the fault profile, the budgets and the venue's clock. Request handling
 * (Venue.ts) and the admin routes (Admin.ts) work on it; it knows nothing of requests.
 */
import { type Decimal, fromString } from "../domain/Decimal.js"
import { defaultDialect, type Dialect, RECV_WINDOW_MAX_MS } from "../svc/Dialect.js"
import { AccountBook, type AccountsFile, decodeAccounts, defaultWeights, toFees, toPairSpec, type Weights } from "./Accounts.js"
import { Faults } from "./Faults.js"
import { AuthGuard, RateLimits, ReplayCache } from "./Limits.js"
import { MatchingEngine, type Retention } from "./Matching.js"
import { StepLog } from "./StepLog.js"
import { Tape, type TapeSource } from "./Tape.js"

/** Price steps kept per pair: about 5.5 hours at one step a second, far more than a paper run lets pass between reads. */
const STEPS_KEPT = 20_000

/**
 * History svc-venue keeps by default: a day of ended orders and fills, and at most
 * 100,000 of each per account (about 0.2 GB for an account that trades all the time).
 * A bot away for longer than this finds its ended orders answered ORDER_NOT_FOUND.
 */
export const DEFAULT_RETENTION: Retention = { terminalMs: 24 * 60 * 60 * 1000, terminalCount: 100_000 }

/** The retention with the defaults filled in; throws naming a field that is not a whole number of at least 1. */
const retentionOf = (given: Partial<Retention> = {}): Retention => {
  const retention = { ...DEFAULT_RETENTION, ...given }
  if (!Number.isSafeInteger(retention.terminalMs) || retention.terminalMs < 1) {
    throw new Error(`retention: terminalMs (--retain-terminal-ms) must be a whole number of milliseconds, at least 1; got ${retention.terminalMs}`)
  }
  if (!Number.isSafeInteger(retention.terminalCount) || retention.terminalCount < 1) {
    throw new Error(`retention: terminalCount (--retain-terminal-count) must be a whole number, at least 1; got ${retention.terminalCount}`)
  }
  return retention
}

export interface VenueOptions {
  readonly accounts: AccountsFile
  /** Delay between acceptance and settlement (default 50 ms). */
  readonly settleMs?: number
  readonly tape?: TapeSource
  /** The venue's clock before any skew fault (default Date.now). */
  readonly clock?: () => number
  readonly dialect?: Dialect
  /** Random bytes for key material created through the admin route. */
  readonly randomBytes?: (size: number) => Uint8Array
  /** Ended orders and fills kept; DEFAULT_RETENTION for what is not given. */
  readonly retention?: Partial<Retention>
}

export class VenueState {
  readonly engine: MatchingEngine
  readonly accounts = new AccountBook()
  readonly faults = new Faults()
  readonly tapes = new Map<string, Tape>()
  /** Every price the matching engine saw, per symbol: what a paper run's parity replay plays back. */
  readonly steps = new Map<string, StepLog>()
  /**
   * The stamps of the last cancel and the last price step. svc-venue's record orders the two
   * by time alone, so that whoever replays it (a paper run's parity replay) needs nothing else:
   * a step comes after every cancel stamped earlier than it, and a cancel stamped the same
   * millisecond as a step came after that step.
   */
  private lastCancelMs = Number.NEGATIVE_INFINITY
  private lastStepMs = Number.NEGATIVE_INFINITY
  readonly limits: RateLimits
  readonly guard: AuthGuard
  readonly replay = new ReplayCache(RECV_WINDOW_MAX_MS)
  readonly dialect: Dialect
  readonly weights: Weights
  readonly randomBytes: (size: number) => Uint8Array
  private readonly configuredLimits: { weightPerMinute: number; ordersPer10s: number; ordersPerDay: number }
  private readonly clock: () => number
  /** Names this process's step sequence: a venue restarted empty numbers its steps from 1 again. */
  readonly startedAtMs: number

  constructor(options: VenueOptions) {
    const file = decodeAccounts(options.accounts)
    this.clock = options.clock ?? Date.now
    this.dialect = options.dialect ?? defaultDialect
    this.randomBytes = options.randomBytes ?? ((size) => crypto.getRandomValues(new Uint8Array(size)))
    const startMs = this.clock()
    this.startedAtMs = startMs
    const pairs = file.pairs.map(toPairSpec)
    // The start time names this process's ids: a venue restarted empty hands out new ones.
    this.engine = new MatchingEngine({
      pairs,
      fees: toFees(file.fees),
      settleDelayMs: options.settleMs ?? 50,
      idPrefix: `${startMs.toString(36)}_`,
      retention: retentionOf(options.retention)
    })
    const source = options.tape ?? { kind: "manual" }
    for (const entry of file.pairs) {
      const pair = toPairSpec(entry)
      const tape = new Tape(pair.symbol, pair, fromString(entry.price), source, startMs)
      this.tapes.set(pair.symbol, tape)
      this.steps.set(pair.symbol, new StepLog(STEPS_KEPT))
      this.feed(pair.symbol, tape.price, startMs)
    }
    for (const account of file.accounts) {
      const record = this.accounts.createAccount(account.uid)
      this.engine.openAccount(account.uid)
      for (const [asset, amount] of Object.entries(account.balances)) this.engine.setBalance(account.uid, asset, fromString(amount))
      for (const [asset, amount] of Object.entries(account.funding)) record.funding.set(asset, fromString(amount))
      for (const key of account.keys) {
        const added = this.accounts.addKey(account.uid, {
          id: key.id,
          secret: key.secret,
          label: key.label,
          permissions: key.permissions,
          whitelist: key.whitelist,
          createdAtMs: key.createdAt === undefined ? startMs : Date.parse(key.createdAt)
        })
        if (typeof added === "string") throw new Error(`accounts file: ${added}`)
      }
    }
    this.configuredLimits = { weightPerMinute: file.limits.weightPerMinute, ordersPer10s: file.limits.ordersPer10s, ordersPerDay: file.limits.ordersPerDay }
    this.limits = new RateLimits(this.configuredLimits, file.limits.weightWindowMs)
    this.guard = new AuthGuard(file.limits.authFailuresBeforeBlock, file.limits.authBlockSeconds)
    this.weights = { ...defaultWeights, ...file.limits.weights }
  }

  /** The venue's clock: real time plus any clock-skew fault. */
  now(): number {
    return this.clock() + this.faults.clockSkewMs
  }

  /** Applies a fault profile, including a limit squeeze. */
  applyFaults(profile: Parameters<Faults["set"]>[0]): void {
    this.faults.set(profile)
    this.limits.limits = this.faults.limits(this.configuredLimits)
  }

  /** Settles due orders; the server also calls this on a timer so settlement never waits for a request. */
  settle(): void {
    this.engine.settleDue(this.now())
  }

  /** One step of every tape, fed to the matching engine. */
  stepTapes(): void {
    const nowMs = this.now()
    this.engine.settleDue(nowMs)
    for (const [symbol, tape] of this.tapes) {
      for (const price of tape.step(nowMs)) this.feed(symbol, price, nowMs)
    }
  }

  /** One price step to the matching engine, logged as the matching saw it (stamped after the last cancel). */
  private feed(symbol: string, price: Decimal, nowMs: number): void {
    const stampMs = Math.max(nowMs, this.lastCancelMs + 1)
    this.lastStepMs = stampMs
    this.steps.get(symbol)?.push(stampMs, price)
    this.engine.onPrice(symbol, price, stampMs)
  }

  /** The stamp of a cancel taking effect now: never before the last price step. */
  cancelStamp(nowMs: number): number {
    this.lastCancelMs = Math.max(nowMs, this.lastStepMs)
    return this.lastCancelMs
  }

  /** Moves one pair's price (manual tape, admin route). */
  setPrice(symbol: string, price: Decimal): boolean {
    const tape = this.tapes.get(symbol)
    if (tape === undefined) return false
    const nowMs = this.now()
    this.engine.settleDue(nowMs)
    tape.set(price, nowMs)
    this.feed(symbol, price, nowMs)
    return true
  }
}
