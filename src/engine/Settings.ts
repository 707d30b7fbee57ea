/**
 * Engine settings: a plain options object the daemon maps its config file onto,
 * and the resolved form every engine service reads.
 */
import { Context } from "effect"
import { defaultDialect } from "../svc/Dialect.js"
import type { RiskLimits } from "./Risk.js"
import type { Decimal } from "../domain/Decimal.js"

export interface EngineOptions {
  /** Path of the SQLite file (journal and fills ledger). */
  readonly dbPath: string
  /** The receive window the client signs with (the Dialect's `recvWindowMs`); it bounds how late a lost placement can still be accepted. */
  readonly recvWindowMs?: number
  readonly risk?: RiskLimits
  /** Per strategy instance, the assets and amounts it may trade with: its own book (risk refuses spending beyond it). */
  readonly allocations?: ReadonlyMap<string, Readonly<Record<string, Decimal>>>
  /** Cancel every open order of the strategies when the engine stops. */
  readonly cancelOnStop?: boolean
  /** The whole graceful stop (lost placements, cancels, final fill sync) fits in this. */
  readonly stopWithinMs?: number
  readonly execution?: Partial<ExecutionSettings>
  readonly tracker?: Partial<TrackerSettings>
  readonly reconcile?: Partial<ReconcileSettings>
  readonly fillSync?: Partial<FillSyncSettings>
  readonly market?: Partial<MarketSettings>
}

export interface ExecutionSettings {
  /**
   * Most placements in flight at once, each kept going by a sender of its own. 16 keeps a
   * loopback or nearby venue busy; more would only wait in the client's budget queue.
   */
  readonly sendConcurrency: number
  /**
   * Most placements marked `submitting` and not yet sent. They are marked a group at a time, each
   * group one commit synced to disk, and the next group once half of the depth is left for the
   * senders: a sync takes a millisecond or two and now and then ten, and the senders go on with
   * what is marked meanwhile. The depth is this many while the exchange's order budget has room
   * for as many at once, else twice `sendConcurrency` (placements then go at the budget's pace,
   * and the turns of the instances choose among marked ones only). Senders with nothing to send
   * get a first group of one placement each, so that the first placements of a burst wait for a
   * small commit. A crash can leave up to this many plus `sendConcurrency` marked and never sent,
   * which reconciliation proves not placed.
   */
  readonly markGroupSize: number
}

export interface TrackerSettings {
  /** How often the tracker looks for orders that are due a poll. */
  readonly tickMs: number
  /** Poll interval right after acceptance, while the order is likely to settle. */
  readonly fastPollMs: number
  /** How long after acceptance an order is polled fast. */
  readonly fastWindowMs: number
  /** Poll interval for orders resting on the book. */
  readonly restingPollMs: number
  /** From this many due orders on, one open-orders call replaces per-order status calls. */
  readonly batchThreshold: number
  /** Most status requests in flight at once. */
  readonly concurrency: number
  /**
   * An order the service answers ORDER_NOT_FOUND for this many polls in a row, past the settle
   * window and absent from open orders and fills, is marked lost and polled no more.
   */
  readonly lostAfterProbes: number
}

export interface ReconcileSettings {
  /** Wait this long after a lost placement before looking for it (settlement is asynchronous). */
  readonly settleDelayMs: number
  /**
   * A lost placement not found this long after its answer was lost is proven absent (`not_placed`).
   * Never shorter than the receive window plus a margin: until its timestamp leaves the window,
   * a delayed request can still reach the service and be accepted.
   */
  readonly absenceWindowMs: number
  /** Period of the background reconciliation. */
  readonly intervalMs: number
  /** How far around the send time an order's creation time may lie to match a lost placement. */
  readonly matchWindowMs: number
}

export interface FillSyncSettings {
  /** Timer between fill syncs when nothing triggers one earlier. */
  readonly intervalMs: number
  /** Fills per page requested from the service. */
  readonly pageLimit: number
  /** Bound on pages read in one pass (a backfill resumes in the next pass beyond it). */
  readonly maxPagesPerPass: number
}

export interface MarketSettings {
  /** Exchange-info (pair rules) is refreshed this often. */
  readonly pairsRefreshMs: number
  /** A last price older than this is fetched again before a risk check. */
  readonly priceMaxAgeMs: number
  /** Spot balances are refreshed at least this often. */
  readonly balancesRefreshMs: number
}

export interface ResolvedEngineSettings {
  readonly dbPath: string
  readonly risk: RiskLimits
  readonly allocations: ReadonlyMap<string, Readonly<Record<string, Decimal>>>
  readonly cancelOnStop: boolean
  readonly stopWithinMs: number
  readonly execution: ExecutionSettings
  readonly tracker: TrackerSettings
  readonly reconcile: ReconcileSettings
  readonly fillSync: FillSyncSettings
  readonly market: MarketSettings
}

export const defaultExecution: ExecutionSettings = { sendConcurrency: 16, markGroupSize: 128 }

export const defaultTracker: TrackerSettings = {
  tickMs: 50,
  fastPollMs: 250,
  fastWindowMs: 3000,
  restingPollMs: 2000,
  batchThreshold: 5,
  concurrency: 4,
  lostAfterProbes: 3
}

/** The absence window is not among them: by default it is the receive window plus its margin. */
export const defaultReconcile: Omit<ReconcileSettings, "absenceWindowMs"> = {
  settleDelayMs: 500,
  intervalMs: 30_000,
  matchWindowMs: 60_000
}

export const defaultFillSync: FillSyncSettings = { intervalMs: 5000, pageLimit: 500, maxPagesPerPass: 1000 }

export const defaultMarket: MarketSettings = { pairsRefreshMs: 60_000, priceMaxAgeMs: 2000, balancesRefreshMs: 5000 }

/** Allowance for clock error between svcbot and the service on top of the receive window. */
const ABSENCE_MARGIN_MS = 1000

export const resolveSettings = (options: EngineOptions): ResolvedEngineSettings => ({
  dbPath: options.dbPath,
  risk: options.risk ?? {},
  allocations: options.allocations ?? new Map(),
  cancelOnStop: options.cancelOnStop ?? false,
  stopWithinMs: options.stopWithinMs ?? 12_000,
  execution: { ...defaultExecution, ...options.execution },
  tracker: { ...defaultTracker, ...options.tracker },
  reconcile: {
    ...defaultReconcile,
    ...options.reconcile,
    absenceWindowMs: Math.max(options.reconcile?.absenceWindowMs ?? 0, (options.recvWindowMs ?? defaultDialect.recvWindowMs) + ABSENCE_MARGIN_MS)
  },
  fillSync: { ...defaultFillSync, ...options.fillSync },
  market: { ...defaultMarket, ...options.market }
})

export class EngineSettings extends Context.Tag("svcbot/EngineSettings")<EngineSettings, ResolvedEngineSettings>() {}
