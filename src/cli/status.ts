/**
 * `svcbot status`: what the daemon is doing, read from its database alone, for
 * an operator over SSH. The database is opened read-only, so it is safe while
 * the daemon runs (WAL lets a reader see the last committed state). It shows
 * only what the ledger holds: strategy instances, unfinished orders, the UTC
 * day's fills, PnL per strategy, what reconciliation left behind, and it says
 * plainly what the database does not record. No secret is stored there, and
 * nothing from the config is printed beyond instance ids and symbols.
 */
import { existsSync, statfsSync, statSync } from "node:fs"
import { resolve } from "node:path"
import { Command, Options } from "@effect/cli"
import type BetterSqlite3 from "better-sqlite3"
import { Console, Effect, Either, Option } from "effect"
import { type Config } from "../config/Config.js"
import { loadConfig } from "../config/Load.js"
import { Decimal } from "../domain/Decimal.js"
import { TERMINAL_STATES, type OrderState } from "../domain/OrderState.js"
import { atPlaces, type Precision, placesSeen, precisionOf } from "../domain/Display.js"
import { bookBalances, bookFillOf, dayPnl, portfolio } from "../engine/Portfolio.js"
import { DatabaseRefused, openReadOnlyDatabase, sqlList } from "../store/Database.js"
import { storedPrecision } from "../store/PairRules.js"
import { DatabaseFromNewerVersion, DEFAULT_MIGRATIONS_DIR, readMigrations } from "../store/Migrations.js"
import { type AttributedFillRow, readAttributedFills, strategyFills } from "../store/FillLedger.js"
import { entriesStopped, recentActions } from "../console/Actions.js"
import { CliError, usageError } from "./errors.js"
import { described } from "./Help.js"

const DEFAULT_DB = "data/svcbot.db"
const DAY_MS = 86_400_000
/** The text view lists at most this many of the day's fills (newest first); `--json` has them all. */
const FILLS_SHOWN = 20
/** Operator actions listed, newest first. */
const ACTIONS_SHOWN = 20
const REQUIRED_TABLES = ["orders", "order_events", "fills", "sync_state", "strategy_state"] as const

export interface StrategyStatus {
  readonly id: string
  readonly plugin: string | null
  readonly version: string | null
  readonly symbol: string | null
  /** false: only in the database (no longer configured); null: no config was read. */
  readonly configured: boolean | null
  readonly enabled: boolean | null
  readonly paused: string | null
  /** When the instance last stored its state; null before its first handled event. */
  readonly lastUpdate: string | null
}

export interface OpenOrderStatus {
  readonly strategy: string | null
  readonly tag: string | null
  readonly origin: string
  readonly symbol: string
  readonly side: string
  readonly type: string
  readonly baseQty: string | null
  readonly quoteOrderQty: string | null
  readonly limitPrice: string | null
  readonly stopPrice: string | null
  readonly filledBaseQty: string
  readonly state: string
  readonly clientOrderId: string | null
  readonly createdAt: string
}

export interface FillStatus {
  readonly time: string
  readonly fillId: string
  readonly strategy: string | null
  readonly tag: string | null
  readonly clientOrderId: string | null
  readonly symbol: string
  readonly side: string
  readonly liquidity: string
  readonly price: string
  readonly baseQty: string
  readonly quoteQty: string
  readonly fee: string
  readonly feeAsset: string
}

export interface PnlStatus {
  readonly strategy: string
  readonly fills: number
  readonly fillsToday: number
  readonly positions: ReadonlyArray<{ readonly symbol: string; readonly baseQty: string; readonly avgCost: string; readonly lastPrice: string | null }>
  readonly realizedPnl: string
  readonly unrealizedPnl: string
  readonly fees: string
  readonly netPnl: string
  /** The UTC day's PnL as the daily loss limit measures it: realized minus fees since midnight, plus unrealized. */
  readonly dayPnl: string
  /** With --config: the instance's own balances, its allocation moved by its own fills (null without an allocation). */
  readonly balances: Readonly<Record<string, string>> | null
}

/** How much room the database takes and has: its file and write-ahead log, and what its file system has free. */
export interface DatabaseSize {
  readonly fileBytes: number
  readonly walBytes: number
  /** Free to an unprivileged writer on the database's file system; null where it cannot be read. */
  readonly freeBytes: number | null
}

/** The size of the database at `path` and the room left beside it (a file that is gone counts 0). */
export const databaseSize = (path: string): DatabaseSize => {
  const bytesOf = (file: string) => statSync(file, { throwIfNoEntry: false })?.size ?? 0
  let freeBytes: number | null = null
  try {
    const fs = statfsSync(path)
    freeBytes = fs.bavail * fs.bsize
  } catch {
    // A file system that cannot say (or a path that is gone): the size alone is still worth showing.
  }
  return { fileBytes: bytesOf(path), walBytes: bytesOf(`${path}-wal`), freeBytes }
}

const megabytes = (bytes: number): string => `${(bytes / 1e6).toFixed(1)} MB`

export interface StatusReport {
  readonly database: string
  readonly databaseSize: DatabaseSize
  readonly at: string
  readonly day: string
  readonly strategies: ReadonlyArray<StrategyStatus>
  readonly openOrders: ReadonlyArray<OpenOrderStatus>
  readonly fillsToday: ReadonlyArray<FillStatus>
  readonly pnl: ReadonlyArray<PnlStatus>
  /** Where the unrealized PnL's prices come from. */
  readonly lastPrices: ReadonlyArray<{ readonly symbol: string; readonly price: string; readonly source: "last fill"; readonly at: string }>
  readonly dailyLossLimit: string | null
  readonly reconciliation: {
    readonly lastFillSync: string | null
    readonly newestFillTime: string | null
    readonly backfillDone: boolean
    /** Placements whose outcome is not known yet (sent, answer lost). */
    readonly inDoubt: number
    /** Orders the venue no longer knows, not yet acknowledged (`svcbot ack-lost`). */
    readonly lostUnacknowledged: ReadonlyArray<string>
    readonly lastOutcome: { readonly at: string; readonly clientOrderId: string | null; readonly outcome: string; readonly detail: string | null } | null
    readonly outcomes: { readonly adopted: number; readonly notPlaced: number; readonly external: number }
    readonly note: string
  }
  /** Instances whose new entries an operator stopped (exits and cancels still go out), and since when. */
  readonly entriesStopped: ReadonlyArray<{ readonly instance: string; readonly since: string }>
  /** What operators did through the console's controls, newest first (the last 20). */
  readonly operatorActions: ReadonlyArray<{ readonly at: string; readonly action: string; readonly instance: string | null; readonly outcome: string; readonly detail: string | null }>
  readonly budget: {
    readonly recorded: false
    /** Placements sent since the UTC midnight, from the journal: a lower bound of the 1-day order budget's use. */
    readonly placementsToday: number
    readonly note: string
  }
}

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString())

interface OrderRecord {
  strategy_id: string | null
  tag: string | null
  origin: string
  client_order_id: string | null
  state: OrderState
  symbol: string
  side: string
  type: string
  base_qty: string | null
  quote_order_qty: string | null
  limit_price: string | null
  stop_price: string | null
  filled_base_qty: string
  created_at: number
}



/**
 * The base and quote asset of each symbol, as far as the fills tell: the
 * database stores no exchange-info, but a fee is charged in the pair's base or
 * quote asset, and a symbol is its base followed by its quote.
 */
export const pairsFromFees = (fills: ReadonlyArray<AttributedFillRow>): ReadonlyMap<string, { readonly base: string; readonly quote: string }> => {
  const pairs = new Map<string, { readonly base: string; readonly quote: string }>()
  for (const fill of fills) {
    if (pairs.has(fill.symbol) || fill.fee_asset.length >= fill.symbol.length) continue
    if (fill.symbol.startsWith(fill.fee_asset)) pairs.set(fill.symbol, { base: fill.fee_asset, quote: fill.symbol.slice(fill.fee_asset.length) })
    else if (fill.symbol.endsWith(fill.fee_asset)) pairs.set(fill.symbol, { base: fill.symbol.slice(0, -fill.fee_asset.length), quote: fill.fee_asset })
  }
  return pairs
}

/** Reads the status from an open database. `config` adds the configured instances that have stored no state yet. */
/** The exchange's precision as the daemon stored it; a database from before pair rules were stored has none (its fills then tell). */
export const displayPrecision = (db: BetterSqlite3.Database): Precision =>
  db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'pair_rules'").get() === undefined ? precisionOf([]) : storedPrecision(db)

const orderStatusOf = (row: OrderRecord): OpenOrderStatus => ({
  strategy: row.strategy_id,
  tag: row.tag,
  origin: row.origin,
  symbol: row.symbol,
  side: row.side,
  type: row.type,
  baseQty: row.base_qty,
  quoteOrderQty: row.quote_order_qty,
  limitPrice: row.limit_price,
  stopPrice: row.stop_price,
  filledBaseQty: row.filled_base_qty,
  state: row.state,
  clientOrderId: row.client_order_id,
  createdAt: iso(row.created_at)!
})

const fillStatusOf = (fill: AttributedFillRow): FillStatus => ({
  time: iso(fill.time)!,
  fillId: fill.fill_id,
  strategy: fill.strategy_id,
  tag: fill.tag,
  clientOrderId: fill.client_order_id,
  symbol: fill.symbol,
  side: fill.side,
  liquidity: fill.liquidity,
  price: fill.price,
  baseQty: fill.base_qty,
  quoteQty: fill.quote_qty,
  fee: fill.fee,
  feeAsset: fill.fee_asset
})

/**
 * Orders of the journal: the unfinished ones (`open`), oldest first, or the newest `limit` of
 * every state, newest first; of one strategy instance when `instance` is given.
 */
export const readOrders = (
  db: BetterSqlite3.Database,
  only: { readonly open: boolean; readonly instance?: string | undefined; readonly limit?: number | undefined }
): Array<OpenOrderStatus> => {
  const where = [...(only.open ? [`state NOT IN ${sqlList(TERMINAL_STATES)}`] : []), ...(only.instance === undefined ? [] : ["strategy_id = @instance"])]
  const sql = `SELECT * FROM orders ${where.length === 0 ? "" : `WHERE ${where.join(" AND ")}`} ORDER BY ${only.open ? "created_at, order_id" : "order_id DESC"}${only.limit === undefined ? "" : " LIMIT @limit"}`
  return (db.prepare(sql).all({ ...(only.instance === undefined ? {} : { instance: only.instance }), ...(only.limit === undefined ? {} : { limit: only.limit }) }) as Array<OrderRecord>).map(orderStatusOf)
}

/** The newest `limit` fills, newest first, of one strategy instance when `instance` is given. */
export const readRecentFills = (db: BetterSqlite3.Database, only: { readonly instance?: string | undefined; readonly limit: number }): Array<FillStatus> =>
  (only.instance === undefined ? readAttributedFills(db) : strategyFills(db).all(only.instance)).slice(-only.limit).reverse().map(fillStatusOf)

export const readStatus = (db: BetterSqlite3.Database, path: string, now: number, config: Config | undefined): StatusReport => {
  const dayStart = now - (now % DAY_MS)

  const stateRows = db
    .prepare("SELECT strategy_id, strategy, version, paused_reason, updated_at FROM strategy_state ORDER BY strategy_id")
    .all() as Array<{ strategy_id: string; strategy: string; version: string; paused_reason: string | null; updated_at: number }>
  const stored = new Map(stateRows.map((row) => [row.strategy_id, row]))
  const configured = new Map((config?.strategies ?? []).map((instance) => [instance.id, instance]))
  const strategies: Array<StrategyStatus> = [...new Set([...configured.keys(), ...stored.keys()])].map((id) => {
    const row = stored.get(id)
    const instance = configured.get(id)
    return {
      id,
      plugin: row?.strategy ?? instance?.strategy ?? null,
      version: row?.version ?? null,
      symbol: instance?.symbol ?? null,
      configured: config === undefined ? null : instance !== undefined,
      enabled: instance?.enabled ?? null,
      paused: row?.paused_reason ?? null,
      lastUpdate: iso(row?.updated_at ?? null)
    }
  })

  const openOrders = readOrders(db, { open: true })

  const fills = readAttributedFills(db)
  const fillsToday = fills
    .filter((fill) => fill.time >= dayStart)
    .reverse()
    .map(fillStatusOf)

  // The database stores no market prices: the last fill of a symbol is the newest price it knows.
  const lastFill = new Map<string, AttributedFillRow>()
  for (const fill of fills) lastFill.set(fill.symbol, fill)
  const lastPrices = new Map([...lastFill].map(([symbol, fill]) => [symbol, new Decimal(fill.price)]))
  const pairs = pairsFromFees(fills)

  const byStrategy = new Map<string, Array<AttributedFillRow>>()
  for (const fill of fills) {
    if (fill.strategy_id === null) continue
    byStrategy.set(fill.strategy_id, [...(byStrategy.get(fill.strategy_id) ?? []), fill])
  }
  // A configured instance is listed even before its first fill: its PnL is then exactly 0.
  for (const id of configured.keys()) if (!byStrategy.has(id)) byStrategy.set(id, [])
  const precision = displayPrecision(db)
  const ownBook = (allocation: Readonly<Record<string, Decimal>> | undefined, own: ReadonlyArray<AttributedFillRow>): Record<string, string> | null => {
    if (allocation === undefined) return null
    const book = bookBalances(allocation, own.map(bookFillOf), pairs)
    return Object.fromEntries([...book].map(([asset, amount]) => [asset, amount.toFixed()]))
  }
  const pnl = [...byStrategy].sort(([a], [b]) => a.localeCompare(b)).map(([strategy, own]): PnlStatus => {
    const all = portfolio(own.map(bookFillOf), pairs, lastPrices)
    // A PnL and an average cost come out of divisions: shown at the exchange's precision (its pair
    // rules as the daemon stored them, else what its own fills carry). Holdings are sums of the
    // exchange's own amounts and are shown exactly.
    const money = Math.max(0, ...own.map((f) => precision.asset(pairs.get(f.symbol)?.quote ?? "") ?? placesSeen([f.quote_qty, f.fee])))
    const priceOf = (symbol: string) => precision.price(symbol) ?? placesSeen(own.filter((f) => f.symbol === symbol).map((f) => f.price))
    const realized = atPlaces(all.realizedPnl, money)
    const unrealized = atPlaces(all.unrealizedPnl, money)
    const fees = atPlaces(all.feesQuote, money)
    return {
      strategy,
      fills: own.length,
      fillsToday: own.filter((f) => f.time >= dayStart).length,
      positions: all.positions.map((p) => ({
        symbol: p.symbol,
        baseQty: p.baseQty.toFixed(),
        avgCost: atPlaces(p.avgCost, priceOf(p.symbol)),
        lastPrice: p.lastPrice?.toFixed() ?? null
      })),
      realizedPnl: realized,
      unrealizedPnl: unrealized,
      fees,
      // The parts as shown add up to the net shown.
      netPnl: new Decimal(realized).plus(unrealized).minus(fees).toFixed(),
      dayPnl: atPlaces(dayPnl(own.map(bookFillOf), pairs, lastPrices, now), money),
      balances: ownBook(configured.get(strategy)?.allocation, own)
    }
  })

  const sync = db.prepare("SELECT high_water_time, backfill_done, updated_at FROM sync_state WHERE stream = 'fills'").get() as
    | { high_water_time: number | null; backfill_done: number; updated_at: number }
    | undefined
  const count = (sql: string): number => (db.prepare(sql).get() as { n: number }).n
  // Reconciliation records its passes only in the log; its outcomes are order events.
  const outcomeSql = `FROM order_events e JOIN orders o ON o.order_id = e.order_id
    WHERE ((e.from_state = 'unknown' AND e.to_state IN ('accepted', 'not_placed')) OR (e.from_state IS NULL AND o.origin = 'external'))`
  const last = db.prepare(`SELECT e.at, e.to_state, e.detail, o.client_order_id, o.origin ${outcomeSql} ORDER BY e.event_id DESC LIMIT 1`).get() as
    | { at: number; to_state: string; detail: string | null; client_order_id: string | null; origin: string }
    | undefined
  const outcomeOf = (toState: string, origin: string): string => (origin === "external" ? "external" : toState === "not_placed" ? "not placed" : "adopted")

  return {
    database: path,
    databaseSize: databaseSize(path),
    at: iso(now)!,
    day: iso(dayStart)!.slice(0, 10),
    strategies,
    openOrders,
    fillsToday,
    pnl,
    lastPrices: [...lastFill].map(([symbol, fill]) => ({ symbol, price: fill.price, source: "last fill", at: iso(fill.time)! })),
    dailyLossLimit: config?.engine.risk.dailyLossLimit?.toFixed() ?? null,
    reconciliation: {
      lastFillSync: iso(sync?.updated_at ?? null),
      newestFillTime: iso(sync?.high_water_time ?? null),
      backfillDone: sync?.backfill_done === 1,
      inDoubt: count(`SELECT count(*) AS n FROM orders WHERE state IN ('submitting', 'unknown')`),
      lostUnacknowledged: (db.prepare("SELECT client_order_id FROM orders WHERE state = 'lost' AND acknowledged_at IS NULL ORDER BY order_id").all() as Array<{ client_order_id: string }>).map(
        (row) => row.client_order_id
      ),
      lastOutcome:
        last === undefined ? null : { at: iso(last.at)!, clientOrderId: last.client_order_id, outcome: outcomeOf(last.to_state, last.origin), detail: last.detail },
      outcomes: {
        adopted: count(`SELECT count(*) AS n ${outcomeSql} AND e.to_state = 'accepted' AND o.origin = 'journal'`),
        notPlaced: count(`SELECT count(*) AS n ${outcomeSql} AND e.to_state = 'not_placed'`),
        external: count(`SELECT count(*) AS n ${outcomeSql} AND o.origin = 'external'`)
      },
      note: "reconciliation passes are not recorded in the database; `reconcile.completed` log lines show each pass"
    },
    entriesStopped: [...entriesStopped(db)].sort(([a], [b]) => a.localeCompare(b)).map(([instance, since]) => ({ instance, since: iso(since)! })),
    operatorActions: recentActions(db, ACTIONS_SHOWN).map((a) => ({ ...a, at: iso(a.at)! })),
    budget: {
      recorded: false,
      placementsToday: count(`SELECT count(*) AS n FROM orders WHERE origin = 'journal' AND sent_at >= ${dayStart}`),
      note: "weight and order budgets are not recorded in the database; `heartbeat` and `budget.status` log lines show their use"
    }
  }
}

const table = (headers: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string | number | null>>): string => {
  if (rows.length === 0) return "  (none)"
  const cells = [headers, ...rows.map((row) => row.map((cell) => (cell === null ? "-" : String(cell))))]
  const widths = headers.map((_, i) => Math.max(...cells.map((row) => (row[i] ?? "").length)))
  return cells.map((row) => `  ${row.map((cell, i) => (cell ?? "").padEnd(widths[i]!)).join("  ")}`.trimEnd()).join("\n")
}

/** The plain-text view: one titled table per section. */
export const renderStatus = (report: StatusReport): string => {
  const orderQty = (o: OpenOrderStatus) => o.baseQty ?? (o.quoteOrderQty === null ? null : `${o.quoteOrderQty} (quote)`)
  const orderPrice = (o: OpenOrderStatus) => (o.stopPrice === null ? o.limitPrice : `${o.limitPrice ?? "-"} stop ${o.stopPrice}`)
  const hidden = report.fillsToday.length - FILLS_SHOWN
  const recon = report.reconciliation
  const stoppedSince = new Map(report.entriesStopped.map((s) => [s.instance, s.since]))
  const prices = report.lastPrices.map((p) => `${p.symbol} ${p.price} (${p.at})`).join(", ")
  return [
    `svcbot status  ${report.at}  database ${report.database}`,
    `Database size ${megabytes(report.databaseSize.fileBytes + report.databaseSize.walBytes)} (file ${megabytes(report.databaseSize.fileBytes)}, write-ahead log ${megabytes(report.databaseSize.walBytes)})` +
      (report.databaseSize.freeBytes === null ? "" : `, ${megabytes(report.databaseSize.freeBytes)} free on its file system`),
    "",
    "Strategy instances",
    table(
      ["instance", "plugin", "version", "symbol", "state", "last update"],
      report.strategies.map((s) => [
        s.id,
        s.plugin,
        s.version,
        s.symbol,
        s.paused !== null ? `paused: ${s.paused}` : stoppedSince.has(s.id) ? `entries stopped since ${stoppedSince.get(s.id)}` : s.configured === false ? "not configured" : s.enabled === false ? "disabled" : s.lastUpdate === null ? "no state stored yet" : "not paused",
        s.lastUpdate
      ])
    ),
    "",
    `Open orders (${report.openOrders.length})`,
    table(
      ["strategy", "tag", "symbol", "side", "type", "qty", "price", "filled", "state", "clientOrderId"],
      report.openOrders.map((o) => [o.strategy ?? `(${o.origin})`, o.tag, o.symbol, o.side, o.type, orderQty(o), orderPrice(o), o.filledBaseQty, o.state, o.clientOrderId])
    ),
    "",
    `Fills on ${report.day} (UTC): ${report.fillsToday.length}${hidden > 0 ? `, newest ${FILLS_SHOWN} shown (--json lists all)` : ""}`,
    table(
      ["time", "strategy", "tag", "symbol", "side", "price", "qty", "quote", "fee", "clientOrderId"],
      report.fillsToday.slice(0, FILLS_SHOWN).map((f) => [f.time, f.strategy ?? "(external)", f.tag, f.symbol, f.side, f.price, f.baseQty, f.quoteQty, `${f.fee} ${f.feeAsset}`, f.clientOrderId])
    ),
    "",
    "PnL per strategy (all its fills; quote asset)",
    table(
      ["strategy", "fills", "today", "position", "realized", "unrealized", "fees", "net", `day PnL${report.dailyLossLimit === null ? "" : ` (limit -${report.dailyLossLimit})`}`, "own balances"],
      report.pnl.map((p) => [
        p.strategy,
        p.fills,
        p.fillsToday,
        p.positions.map((pos) => `${pos.symbol} ${pos.baseQty} @ ${pos.avgCost}`).join(", "),
        p.realizedPnl,
        p.unrealizedPnl,
        p.fees,
        p.netPnl,
        p.dayPnl,
        p.balances === null ? "-" : Object.entries(p.balances).map(([asset, amount]) => `${amount} ${asset}`).join(", ")
      ])
    ),
    `  Unrealized PnL is valued at each symbol's last fill price (the database stores no market prices)${prices === "" ? "." : `: ${prices}.`}`,
    "",
    "Reconciliation",
    `  last fill sync     ${recon.lastFillSync ?? "never"} (newest fill ${recon.newestFillTime ?? "-"}${recon.backfillDone ? "" : ", history backfill not finished"})`,
    `  in doubt now       ${recon.inDoubt} placement(s) sent whose outcome is not known yet`,
    `  lost              ${recon.lostUnacknowledged.length === 0 ? "none" : `${recon.lostUnacknowledged.join(", ")}: the venue no longer knows them; check, then \`svcbot ack-lost\``}`,
    `  outcomes so far    adopted ${recon.outcomes.adopted}, not placed ${recon.outcomes.notPlaced}, external ${recon.outcomes.external}`,
    `  last outcome       ${recon.lastOutcome === null ? "none" : `${recon.lastOutcome.at} ${recon.lastOutcome.outcome} ${recon.lastOutcome.clientOrderId ?? ""}`.trimEnd()}`,
    `  note               ${recon.note}`,
    "",
    `Operator actions (newest ${ACTIONS_SHOWN})`,
    table(
      ["time", "action", "instance", "outcome", "detail"],
      report.operatorActions.map((a) => [a.at, a.action, a.instance, a.outcome, a.detail])
    ),
    "",
    "Budgets",
    `  placements sent today  ${report.budget.placementsToday}`,
    `  ${report.budget.note}`
  ].join("\n")
}

/** Opens the daemon's database read-only after checking it is one this svcbot can read. */
export const openReadOnly = (path: string): Either.Either<BetterSqlite3.Database, CliError> => {
  if (!existsSync(path)) {
    return Either.left(
      usageError(
        `no database at ${path}: start the daemon first (\`svcbot run\` creates it), or pass --db with the daemon's database file (its database.path or SVC_DATABASE_PATH)`
      )
    )
  }
  let db: BetterSqlite3.Database | undefined
  try {
    // Waits out the daemon's write lock instead of failing.
    db = openReadOnlyDatabase(path)
    const tables = new Set((db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as Array<{ name: string }>).map((t) => t.name))
    const missing = REQUIRED_TABLES.filter((name) => !tables.has(name))
    if (missing.length > 0) {
      db.close()
      return Either.left(usageError(`${path} is not an svcbot database, or one the daemon has not migrated yet (no table ${missing.join(", ")}): check --db, or start the daemon once`))
    }
    const knownVersion = readMigrations(DEFAULT_MIGRATIONS_DIR).reduce((max, m) => Math.max(max, m.version), 0)
    const databaseVersion = (db.prepare("SELECT max(version) AS v FROM schema_migrations").get() as { v: number | null }).v ?? 0
    if (databaseVersion > knownVersion) {
      db.close()
      return Either.left(new CliError({ message: new DatabaseFromNewerVersion({ path, databaseVersion, knownVersion }).message, exitCode: 1 }))
    }
    return Either.right(db)
  } catch (cause) {
    db?.close()
    if (cause instanceof DatabaseRefused) return Either.left(new CliError({ message: cause.message, exitCode: 1 }))
    return Either.left(new CliError({ message: `cannot read the database ${path}: ${cause instanceof Error ? cause.message : String(cause)}`, exitCode: 1 }))
  }
}

const options = {
  config: Options.file("config").pipe(
    Options.optional,
    Options.withDescription("the daemon's JSON config: its database.path, its strategy instances and daily loss limit")
  ),
  db: Options.text("db").pipe(
    Options.withPseudoName("FILE"),
    Options.optional,
    Options.withDescription(`the daemon's SQLite file (default: the config's database.path, else $SVC_DATABASE_PATH, else ${DEFAULT_DB})`)
  ),
  json: Options.boolean("json").pipe(Options.withDescription("print one JSON object"))
}

/** The daemon's database a command reads or writes: `--db`, else the `--config`'s path, else $SVC_DATABASE_PATH, else the default. */
export const daemonDatabase = (configFlag: Option.Option<string>, dbFlag: Option.Option<string>) =>
  Effect.gen(function* () {
    // Only a config named on the command line: the daemon's may not be the default one (compose runs config/compose.json).
    const config = Option.isSome(configFlag)
      ? yield* loadConfig(configFlag.value, process.env).pipe(Effect.mapError((error) => usageError(error.message)))
      : undefined
    const path = resolve(Option.getOrElse(dbFlag, () => config?.database.path ?? (process.env.SVC_DATABASE_PATH || DEFAULT_DB)))
    return { config, path }
  })

export const statusCommand = Command.make("status", options, (flags) =>
  Effect.gen(function* () {
    const { config, path } = yield* daemonDatabase(flags.config, flags.db)
    const report = yield* Effect.acquireUseRelease(
      openReadOnly(path),
      (db) => Effect.sync(() => readStatus(db, path, Date.now(), config)),
      (db) => Effect.sync(() => db.close())
    )
    yield* Console.log(flags.json ? JSON.stringify(report) : renderStatus(report))
  })
).pipe(
  Command.withDescription(
    described("Show what the daemon is doing, from its database", {
      details: ["Strategy instances, open orders, today's fills, PnL and reconciliation. Reads the database only (read-only, safe while the daemon runs)."],
      examples: ["svcbot status", "svcbot status --config config/default.json", "svcbot status --db data/svcbot.db --json"]
    })
  )
)
