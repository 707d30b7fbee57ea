/**
 * Runs the engine against a venue for integration, chaos and benchmark code:
 * the real SvcClient over loopback, a real SQLite file in a temp dir, log lines
 * captured so that tests can read the events.
 */
import { Effect, Layer, ManagedRuntime, Redacted } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Decimal } from "../../src/domain/Decimal.js"
import type { PlaceIntent } from "../../src/domain/Intent.js"
import { layer as engineLayer, type Engine } from "../../src/engine/Engine.js"
import { EngineBus } from "../../src/engine/EngineBus.js"
import { FillSync } from "../../src/engine/FillSync.js"
import { EngineSettings, type EngineOptions, resolveSettings } from "../../src/engine/Settings.js"
import * as Logger from "../../src/log/Logger.js"
import { Database } from "../../src/store/Database.js"
import { FillLedger } from "../../src/store/FillLedger.js"
import { OrderJournal, type OrderRow } from "../../src/store/OrderJournal.js"
import { defaultDialect } from "../../src/svc/Dialect.js"
import type { BudgetOptions } from "../../src/svc/Governor.js"
import { SvcClient } from "../../src/svc/SvcClient.js"
import { type StartVenueOptions, startVenue } from "../support/venue.js"

export interface VenueKey {
  readonly url: string
  readonly keyId: string
  readonly secret: string
}

/** Log lines written by the engine, parsed. */
export class CapturedLog {
  readonly lines: Array<Record<string, unknown>> = []
  readonly stream = {
    write: (line: string) => {
      for (const part of line.split("\n")) if (part.trim() !== "") this.lines.push(JSON.parse(part) as Record<string, unknown>)
    }
  }
  events(name: string): Array<Record<string, unknown>> {
    return this.lines.filter((l) => l.event === name)
  }
}

export const tempDbPath = (): { readonly path: string; readonly cleanup: () => void } => {
  const dir = mkdtempSync(join(tmpdir(), "svcbot-engine-"))
  return { path: join(dir, "svcbot.sqlite"), cleanup: () => rmSync(dir, { recursive: true, force: true }) }
}

/** `budget` for a venue whose weight window is not the default minute: the governor counts in the venue's windows. */
export const clientLayer = (venue: VenueKey, requestTimeoutMs = 2000, budget?: Partial<BudgetOptions>) =>
  SvcClient.layerWith({
    baseUrl: venue.url,
    apiKey: Redacted.make(venue.keyId),
    apiSecret: Redacted.make(venue.secret),
    dialect: defaultDialect,
    requestTimeoutMs,
    ...(budget === undefined ? {} : { budget })
  })

/** Fast settings for loopback tests: short settle and absence windows, quick polls. */
export const testOptions = (dbPath: string, overrides: Partial<EngineOptions> = {}): EngineOptions => ({
  dbPath,
  ...overrides,
  tracker: { fastPollMs: 50, restingPollMs: 200, fastWindowMs: 1000, tickMs: 20, ...overrides.tracker },
  reconcile: { settleDelayMs: 200, absenceWindowMs: 1500, intervalMs: 1000, ...overrides.reconcile },
  fillSync: { intervalMs: 300, ...overrides.fillSync },
  market: { priceMaxAgeMs: 200, balancesRefreshMs: 200, ...overrides.market }
})

/** FillSync alone over its store, for ledger tests and the ingestion benchmark. */
export const fillSyncLayer = (venue: VenueKey, dbPath: string, maxPagesPerPass = 1000) =>
  FillSync.Default.pipe(
    Layer.provideMerge(Layer.mergeAll(OrderJournal.Default, FillLedger.Default, EngineBus.Default)),
    Layer.provideMerge(Database.Default({ path: dbPath })),
    Layer.provide(Layer.succeed(EngineSettings, resolveSettings({ dbPath, fillSync: { pageLimit: 500, maxPagesPerPass } }))),
    Layer.provide(clientLayer(venue, 5000))
  )

export type EngineServices = Engine | OrderJournal | FillLedger | SvcClient

/** Starts the engine (its startup reconcile runs here); dispose() shuts it down gracefully. */
export const startEngine = async (venue: VenueKey, options: EngineOptions, log = new CapturedLog(), requestTimeoutMs = 2000, budget?: Partial<BudgetOptions>) => {
  const runtime = ManagedRuntime.make(
    engineLayer(options).pipe(
      Layer.provideMerge(clientLayer(venue, requestTimeoutMs, budget)),
      Layer.provide(Logger.layer({ destination: log.stream, level: "debug" }))
    )
  )
  await runtime.runPromise(Effect.void)
  return { runtime, log, run: <A, E>(effect: Effect.Effect<A, E, EngineServices>) => runtime.runPromise(effect) }
}

/** Re-evaluates `check` until it returns a value or the deadline passes (then fails with `what`). */
/**
 * A venue, a journal file and an engine trading on them, for one test; `cleanups` (run in
 * reverse after the test) closes each. The venue's price is set when `price` is given.
 */
export const engineOnVenue = async (
  cleanups: Array<() => Promise<void> | void>,
  setup: { readonly venue?: StartVenueOptions; readonly price?: string; readonly engine?: Partial<EngineOptions> } = {}
) => {
  const venue = await startVenue(setup.venue)
  cleanups.push(() => venue.close())
  if (setup.price !== undefined) await venue.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: setup.price })
  const db = tempDbPath()
  cleanups.push(db.cleanup)
  const engine = await startEngine(venue, testOptions(db.path, setup.engine))
  cleanups.push(() => engine.runtime.dispose())
  return { venue, db, engine }
}

export const eventually = <A, E, R>(check: Effect.Effect<A | undefined, E, R>, what: string, timeoutMs = 15_000) =>
  Effect.gen(function* () {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const value = yield* check
      if (value !== undefined) return value
      if (Date.now() > deadline) return yield* Effect.dieMessage(`timed out after ${timeoutMs} ms waiting for ${what}`)
      yield* Effect.sleep(20)
    }
  })

export const isFinished = (row: OrderRow | undefined): boolean =>
  row !== undefined && ["fill", "rejected", "cancelled", "not_placed", "refused"].includes(row.state)

/** Bids far below the last price: they rest and never fill. */
export const restingBids = (prefix: string, count: number): Array<PlaceIntent> =>
  Array.from({ length: count }, (_, i) => ({
    type: "limit",
    tag: `${prefix}-${i}`,
    symbol: "BTCUSDT",
    side: "buy",
    baseQty: new Decimal("0.001"),
    limitPrice: new Decimal(50_000 + i)
  }))
