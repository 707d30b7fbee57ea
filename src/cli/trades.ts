/**
 * `svcbot trades` and `svcbot profit`: the daemon's ledger as round trips (entry, exit,
 * PnL, fees, duration) and as profit per instance and per pair (realised, unrealised,
 * fees, win rate, best and worst trade). They read the database only; the mark for
 * what is still held is the last fill's price, as in `svcbot status`.
 */
import { Command, Options } from "@effect/cli"
import type BetterSqlite3 from "better-sqlite3"
import { Console, Effect, Option } from "effect"
import { Decimal, ZERO } from "../domain/Decimal.js"
import { atPlaces, placesSeen, type Precision, ratio } from "../domain/Display.js"
import { bookFillOf, portfolio } from "../engine/Portfolio.js"
import { type RoundTrip, roundTrips } from "../engine/RoundTrips.js"
import { parseTime } from "./Times.js"
import { described } from "./Help.js"
import { type AttributedFillRow, readAttributedFills } from "../store/FillLedger.js"
import { storedStepSizes } from "../store/PairRules.js"
import { daemonDatabase, displayPrecision, openReadOnly, pairsFromFees } from "./status.js"

/** What the ledger says of one instance: its round trips and its profit per pair. */
interface Ledger {
  readonly fills: ReadonlyArray<AttributedFillRow>
  readonly precision: Precision
  readonly stepSizes: ReadonlyMap<string, Decimal>
}

const readLedger = (db: BetterSqlite3.Database): Ledger => ({ fills: readAttributedFills(db), precision: displayPrecision(db), stepSizes: storedStepSizes(db) })

const iso = (ms: number): string => new Date(ms).toISOString()

const duration = (ms: number): string => {
  const minutes = Math.floor(ms / 60_000)
  const [d, h, m] = [Math.floor(minutes / 1440), Math.floor((minutes % 1440) / 60), minutes % 60]
  return d > 0 ? `${d} d ${h} h` : h > 0 ? `${h} h ${m} min` : m > 0 ? `${m} min` : `${Math.floor(ms / 1000)} s`
}

export interface TradeRow {
  readonly instance: string
  readonly symbol: string
  readonly side: RoundTrip["side"]
  readonly openedAt: string
  readonly closedAt: string | null
  readonly entryQty: string
  readonly entryPrice: string
  readonly exitQty: string
  readonly exitPrice: string | null
  readonly realizedPnl: string
  readonly fees: string
  readonly netPnl: string
  readonly durationMs: number | null
  readonly fills: number
}

/** Each instance's fills, grouped, in instance order; fills of orders no instance placed are left out. */
const byInstance = (fills: ReadonlyArray<AttributedFillRow>, only: string | undefined): Map<string, Array<AttributedFillRow>> => {
  const grouped = new Map<string, Array<AttributedFillRow>>()
  for (const fill of fills) {
    if (fill.strategy_id === null || (only !== undefined && fill.strategy_id !== only)) continue
    let own = grouped.get(fill.strategy_id)
    if (own === undefined) grouped.set(fill.strategy_id, (own = []))
    own.push(fill)
  }
  return new Map([...grouped].sort(([a], [b]) => a.localeCompare(b)))
}

/** Money at the quote asset's precision and prices at the pair's tick, as the exchange lists them (else as the fills carry them). */
const places = (ledger: Ledger, own: ReadonlyArray<AttributedFillRow>, symbol: string) => {
  const pair = pairsFromFees(own).get(symbol)
  const ofSymbol = own.filter((f) => f.symbol === symbol)
  return {
    money: ledger.precision.asset(pair?.quote ?? "") ?? placesSeen(ofSymbol.flatMap((f) => [f.quote_qty, f.fee])),
    price: ledger.precision.price(symbol) ?? placesSeen(ofSymbol.map((f) => f.price))
  }
}

const tradesOf = (ledger: Ledger, instance: string, own: ReadonlyArray<AttributedFillRow>): Array<TradeRow> =>
  roundTrips(own.map(bookFillOf), pairsFromFees(own), ledger.stepSizes).map((trip) => {
    const at = places(ledger, own, trip.symbol)
    const realized = atPlaces(trip.realizedPnl, at.money)
    const fees = atPlaces(trip.fees, at.money)
    return {
      instance,
      symbol: trip.symbol,
      side: trip.side,
      openedAt: iso(trip.openedAt),
      closedAt: trip.closedAt === undefined ? null : iso(trip.closedAt),
      entryQty: trip.entryQty.toFixed(),
      entryPrice: atPlaces(trip.entryPrice, at.price),
      exitQty: trip.exitQty.toFixed(),
      exitPrice: trip.exitPrice === undefined ? null : atPlaces(trip.exitPrice, at.price),
      realizedPnl: realized,
      fees,
      // The parts as shown add up to the net shown.
      netPnl: new Decimal(realized).minus(fees).toFixed(),
      durationMs: trip.closedAt === undefined ? null : trip.closedAt - trip.openedAt,
      fills: trip.fills
    }
  })

export interface ProfitRow {
  readonly instance: string
  /** A pair, or null for the instance's total. */
  readonly symbol: string | null
  readonly realizedPnl: string
  readonly unrealizedPnl: string
  readonly fees: string
  readonly netPnl: string
  /** Closed round trips. */
  readonly trades: number
  readonly winRatePct: string | null
  readonly best: string | null
  readonly worst: string | null
}

const profitOf = (ledger: Ledger, instance: string, own: ReadonlyArray<AttributedFillRow>): Array<ProfitRow> => {
  const lastPrices = new Map(ledger.fills.map((f) => [f.symbol, new Decimal(f.price)]))
  const pairs = pairsFromFees(own)
  const trades = tradesOf(ledger, instance, own).filter((t) => t.closedAt !== null)
  const row = (symbol: string | null, fills: ReadonlyArray<AttributedFillRow>): ProfitRow => {
    const book = portfolio(fills.map(bookFillOf), pairs, lastPrices)
    const money = Math.max(0, ...[...new Set(fills.map((f) => f.symbol))].map((s) => places(ledger, own, s).money))
    const closed = trades.filter((t) => symbol === null || t.symbol === symbol)
    const nets = closed.map((t) => new Decimal(t.netPnl))
    const realized = atPlaces(book.realizedPnl, money)
    const unrealized = atPlaces(book.unrealizedPnl, money)
    const fees = atPlaces(book.feesQuote, money)
    return {
      instance,
      symbol,
      realizedPnl: realized,
      unrealizedPnl: unrealized,
      fees,
      netPnl: new Decimal(realized).plus(unrealized).minus(fees).toFixed(),
      trades: closed.length,
      winRatePct: closed.length === 0 ? null : ratio(new Decimal(nets.filter((n) => n.gt(ZERO)).length).div(closed.length).mul(100)),
      best: nets.length === 0 ? null : Decimal.max(...nets).toFixed(),
      worst: nets.length === 0 ? null : Decimal.min(...nets).toFixed()
    }
  }
  const symbols = [...new Set(own.map((f) => f.symbol))].sort()
  return [row(null, own), ...(symbols.length > 1 ? symbols.map((s) => row(s, own.filter((f) => f.symbol === s))) : [])]
}

/** A plain text table: columns padded to their widest cell, numbers right-aligned. */
const table = (head: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)))
  const numeric = head.map((_, i) => rows.length > 0 && rows.every((r) => /^-?[\d.]+( %)?$|^—$/.test(r[i]!)))
  const line = (cells: ReadonlyArray<string>) => cells.map((c, i) => (numeric[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join("  ").trimEnd()
  return [line(head), ...rows.map(line)].join("\n")
}

const common = {
  config: Options.file("config").pipe(Options.optional, Options.withDescription("the daemon's JSON config (for its database.path)")),
  db: Options.text("db").pipe(
    Options.withPseudoName("FILE"),
    Options.optional,
    Options.withDescription("the daemon's SQLite file (default: the config's database.path, else $SVC_DATABASE_PATH, else data/svcbot.db)")
  ),
  instance: Options.text("instance").pipe(Options.withPseudoName("ID"), Options.optional, Options.withDescription("only this strategy instance, a strategies[].id (default: every instance)")),
  json: Options.boolean("json").pipe(Options.withDescription("print one JSON object"))
}

/** `svcbot trades --json`'s document, which the console's API serves as well. */
export const tradesReport = (db: BetterSqlite3.Database, only: { readonly instance?: string | undefined; readonly since?: number | undefined }): { readonly trades: ReadonlyArray<TradeRow> } => {
  const ledger = readLedger(db)
  const rows = [...byInstance(ledger.fills, only.instance)].flatMap(([instance, own]) => tradesOf(ledger, instance, own))
  return { trades: rows.filter((t) => only.since === undefined || Date.parse(t.openedAt) >= only.since) }
}

/** `svcbot profit --json`'s document, which the console's API serves as well. */
export const profitReport = (db: BetterSqlite3.Database, only: { readonly instance?: string | undefined }): { readonly profit: ReadonlyArray<ProfitRow> } => {
  const ledger = readLedger(db)
  return { profit: [...byInstance(ledger.fills, only.instance)].flatMap(([instance, own]) => profitOf(ledger, instance, own)) }
}

const withLedger = <A>(flags: { readonly config: Option.Option<string>; readonly db: Option.Option<string> }, use: (db: BetterSqlite3.Database) => A) =>
  Effect.gen(function* () {
    const { path } = yield* daemonDatabase(flags.config, flags.db)
    return yield* Effect.acquireUseRelease(
      openReadOnly(path),
      (db) => Effect.sync(() => use(db)),
      (db) => Effect.sync(() => db.close())
    )
  })

export const tradesCommand = Command.make(
  "trades",
  { ...common, since: Options.text("since").pipe(Options.withPseudoName("TIME"), Options.optional, Options.withDescription("only trades opened at or after this time: epoch ms or a UTC date (default: all)")) },
  (flags) =>
    Effect.gen(function* () {
      const since = Option.isSome(flags.since) ? yield* parseTime(flags.since.value, "--since") : undefined
      const { trades: shown } = yield* withLedger(flags, (db) => tradesReport(db, { instance: Option.getOrUndefined(flags.instance), since }))
      if (flags.json) return yield* Console.log(JSON.stringify({ trades: shown }))
      if (shown.length === 0) return yield* Console.log("no trades")
      yield* Console.log(
        table(
          ["instance", "symbol", "side", "opened", "closed", "entry", "exit", "qty", "net PnL", "fees", "duration"],
          shown.map((t) => [t.instance, t.symbol, t.side, t.openedAt, t.closedAt ?? "open", t.entryPrice, t.exitPrice ?? "—", t.entryQty, t.netPnl, t.fees, t.durationMs === null ? "—" : duration(t.durationMs)])
        )
      )
    })
).pipe(
  Command.withDescription(
    described("List each instance's round trips from the ledger", {
      details: ["Entry and exit price, quantity, net PnL, fees and duration of each trade."],
      examples: ["svcbot trades", "svcbot trades --instance btc-sma --since 2026-11-01", "svcbot trades --config config/default.json --json"]
    })
  )
)

export const profitCommand = Command.make("profit", common, (flags) =>
  Effect.gen(function* () {
    const { profit: rows } = yield* withLedger(flags, (db) => profitReport(db, { instance: Option.getOrUndefined(flags.instance) }))
    if (flags.json) return yield* Console.log(JSON.stringify({ profit: rows }))
    if (rows.length === 0) return yield* Console.log("no fills")
    yield* Console.log(
      table(
        ["instance", "pair", "realised", "unrealised", "fees", "net", "trades", "win rate", "best", "worst"],
        rows.map((p) => [p.instance, p.symbol ?? "all", p.realizedPnl, p.unrealizedPnl, p.fees, p.netPnl, String(p.trades), p.winRatePct === null ? "—" : `${p.winRatePct} %`, p.best ?? "—", p.worst ?? "—"])
      )
    )
  })
).pipe(
  Command.withDescription(
    described("Show the profit per instance and per pair from the ledger", {
      details: ["Realised and unrealised PnL, fees, win rate, best and worst trade. What is still held is valued at the last fill's price, as in `svcbot status`."],
      examples: ["svcbot profit", "svcbot profit --instance btc-grid", "svcbot profit --db data/svcbot.db --json"]
    })
  )
)
