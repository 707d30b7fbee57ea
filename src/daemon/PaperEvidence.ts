/**
 * Every paper run of the daemon is promotion evidence. While the daemon trades
 * on paper this watches, per strategy instance, the candles that close during
 * the run and the instance's fills; when the run stops it records one `paper`
 * run per instance through `recordPaperRun`, which replays the same candles
 * through the backtester and measures the tracking error and the fills that differ.
 *
 * An instance is treated as its own sub-account: the account's holdings of the
 * pair's base and quote when the run started, moved only by the instance's own
 * fills. Equity at a candle's close counts the fills the daemon had stored when
 * it saw that candle closed, so it follows what the daemon knew, not timestamps
 * (a replayed tape's candle times need not be on the clock its fills carry).
 */
import { Clock, Duration, Effect, Either, Schedule, type Scope } from "effect"
import { Decimal, ZERO } from "../domain/Decimal.js"
import * as EngineModule from "../engine/Engine.js"
import { Market } from "../engine/Market.js"
import { logEvent } from "../log/Logger.js"
import type { RunFill } from "../backtest/Metrics.js"
import { recordPaperRun } from "../promotion/PaperRun.js"
import { Database } from "../store/Database.js"
import { FillLedger, type LedgerFill } from "../store/FillLedger.js"
import { OrderJournal } from "../store/OrderJournal.js"
import { SvcClient } from "../svc/SvcClient.js"
import { INTERVAL_MS } from "../strategy/MarketData.js"
import type { ResolvedInstance } from "./Daemon.js"
import { fillEventOf } from "./FillEvents.js"
import { decodeAccounts, devAccounts, toFees } from "../venue/Accounts.js"
import type { Candle, Fees } from "../venue/Matching.js"

/** What is recorded about an instance: its code, its params as configured, and what it trades. */
export type EvidenceSubject = ResolvedInstance

export interface PaperEvidenceOptions {
  /** Where the run traded, e.g. "venue:http://127.0.0.1:8787". */
  readonly dataSource: string
  /** The venue's acceptance-to-settlement delay the backtest replays with. */
  readonly settleDelayMs: number
}

/** Candles fetched per poll; a poll runs far more often than candles close. */
const CANDLES_PER_POLL = 100

/**
 * Recording stops waiting for the venue after this long: a stop must not hang on evidence. It
 * comes after the engine's stop (which has most of the shutdown bound and syncs the fills).
 */
const FINAL_READ_TIMEOUT = Duration.seconds(2)

/**
 * The replay assumes svc-venue's fees and synthetic book (the embedded venue and
 * every test venue use them); exchange-info does not tell either.
 */
const venueDefaults = decodeAccounts(devAccounts)
const VENUE_FEES: Fees = toFees(venueDefaults.fees)
const depthNotionalOf = (symbol: string): Decimal =>
  new Decimal((venueDefaults.pairs.find((p) => p.symbol === symbol) ?? venueDefaults.pairs[0]!).depthNotional)

interface Observed {
  readonly candle: Candle
  /** Fills of each instance of the group stored when the candle was seen closed. */
  readonly fillsKnown: ReadonlyMap<string, number>
}

interface Group {
  readonly symbol: string
  readonly interval: string
  readonly intervalMs: number
  readonly pollMs: number
  readonly subjects: ReadonlyArray<EvidenceSubject>
  /** Newest closed candle seen so far (the one closed at start, then each new one). */
  lastOpen: number
  readonly observed: Array<Observed>
}

const runFill = (fill: LedgerFill, tag: string): RunFill => ({ ...fillEventOf(fill, tag), clientOrderId: fill.clientOrderId ?? "" })

/**
 * Starts watching in the current scope; the record is written when the scope
 * closes. Start it before the strategies, so that it records after they stopped.
 */
export const collectPaperEvidence = (
  subjects: ReadonlyArray<EvidenceSubject>,
  options: PaperEvidenceOptions
): Effect.Effect<void, never, Scope.Scope | SvcClient | Market | Database | FillLedger | OrderJournal> =>
  Effect.gen(function* () {
    const client = yield* SvcClient
    const market = yield* Market
    const ledger = yield* FillLedger
    const journal = yield* OrderJournal
    const { sqlite } = yield* Database

    const holdings = yield* market.refreshBalances.pipe(Effect.orElse(() => market.balances))
    const pairs = yield* market.pairs.pipe(Effect.orElseSucceed(() => new Map()))
    const before = new Map<string, ReadonlySet<string>>()
    for (const subject of subjects) before.set(subject.id, new Set((yield* ledger.forStrategy(subject.id)).map((f) => f.fillId)))
    /** The instance's fills of this run, oldest first (the ledger orders by time). */
    const runFills = (id: string) => Effect.map(ledger.forStrategy(id), (fills) => fills.filter((f) => !before.get(id)!.has(f.fillId)))

    const groups = new Map<string, Group>()
    for (const subject of subjects) {
      const key = `${subject.symbol} ${subject.candleInterval}`
      const group = groups.get(key)
      if (group === undefined) {
        groups.set(key, {
          symbol: subject.symbol,
          interval: subject.candleInterval,
          intervalMs: INTERVAL_MS[subject.candleInterval] ?? 60_000,
          pollMs: subject.pollMs,
          subjects: [subject],
          lastOpen: Number.NEGATIVE_INFINITY,
          observed: []
        })
      } else {
        groups.set(key, { ...group, pollMs: Math.min(group.pollMs, subject.pollMs), subjects: [...group.subjects, subject] })
      }
    }

    const closedCandles = (group: Group) =>
      Effect.gen(function* () {
        const candles = yield* client.candles({ symbol: group.symbol, interval: group.interval, limit: CANDLES_PER_POLL })
        const now = yield* Clock.currentTimeMillis
        return candles.filter((c) => c.openTime + group.intervalMs <= now && c.openTime > group.lastOpen).sort((a, b) => a.openTime - b.openTime)
      })

    const observe = (group: Group) =>
      Effect.gen(function* () {
        const fresh = yield* closedCandles(group)
        if (fresh.length === 0) return
        const fillsKnown = new Map<string, number>()
        for (const subject of group.subjects) fillsKnown.set(subject.id, (yield* runFills(subject.id)).length)
        for (const c of fresh) {
          group.observed.push({ candle: { openTimeMs: c.openTime, open: c.open, high: c.high, low: c.low, close: c.close, volume: c.volume }, fillsKnown })
        }
        group.lastOpen = fresh[fresh.length - 1]!.openTime
      })

    // What had closed before the run started is history, not evidence of this run.
    for (const group of groups.values()) {
      const closed = yield* Effect.either(closedCandles(group))
      if (Either.isRight(closed) && closed.right.length > 0) group.lastOpen = closed.right[closed.right.length - 1]!.openTime
    }
    const startedAt = yield* Clock.currentTimeMillis

    const record = (group: Group, subject: EvidenceSubject) =>
      Effect.gen(function* () {
        const rules = pairs.get(subject.symbol)
        if (group.observed.length === 0 || rules === undefined) {
          yield* logEvent("paper.not-recorded", {
            strategy: subject.id,
            reason: rules === undefined ? `${subject.symbol} is not listed by exchange-info` : `no ${group.interval} candle closed during the run`
          })
          return
        }
        const fills: Array<RunFill> = []
        for (const fill of yield* runFills(subject.id)) {
          const order = fill.clientOrderId === null ? undefined : yield* journal.byClientOrderId(fill.clientOrderId)
          fills.push(runFill(fill, order?.tag ?? ""))
        }
        const held = (asset: string): Decimal => {
          const balance = holdings.byAsset.get(asset)
          return balance === undefined ? ZERO : balance.free.plus(balance.locked)
        }
        const startBalances = { [rules.base]: held(rules.base), [rules.quote]: held(rules.quote) }
        let base = startBalances[rules.base]!
        let quote = startBalances[rules.quote]!
        let applied = 0
        let inMarketCandles = 0
        const equity: Array<Decimal> = []
        for (const { candle, fillsKnown } of group.observed) {
          const known = Math.min(fillsKnown.get(subject.id) ?? 0, fills.length)
          for (; applied < known; applied++) {
            const fill = fills[applied]!
            const sign = fill.side === "buy" ? 1 : -1
            base = base.plus(fill.baseQty.mul(sign))
            quote = quote.minus(fill.quoteQty.mul(sign))
            if (fill.feeAsset === rules.base) base = base.minus(fill.fee)
            else if (fill.feeAsset === rules.quote) quote = quote.minus(fill.fee)
          }
          equity.push(quote.plus(base.mul(candle.close)))
          if (base.mul(candle.close).gte(rules.minNotional)) inMarketCandles += 1
        }
        const input = {
          strategy: subject.definition,
          params: subject.params,
          rawParams: subject.rawParams,
          sourcePath: subject.sourcePath,
          pair: { ...rules, status: rules.status === "halted" ? ("halted" as const) : ("trading" as const), depthNotional: depthNotionalOf(subject.symbol) },
          fees: VENUE_FEES,
          settleDelayMs: options.settleDelayMs,
          startBalances,
          candles: group.observed.map((o) => o.candle),
          intervalMs: group.intervalMs,
          equity,
          fills,
          inMarketCandles,
          dataSource: options.dataSource,
          ...(subject.schedule === undefined ? {} : { schedule: subject.schedule })
        }
        const now = yield* Clock.currentTimeMillis
        // The source file or the database may fail here; the stop goes on either way.
        const written = yield* Effect.either(Effect.try(() => recordPaperRun(sqlite, input, now)))
        const recorded = Either.flatMap(written, (result) => Either.mapLeft(result, (failed) => `the backtest of the run's candles failed: ${failed.message}`))
        if (Either.isLeft(recorded)) {
          const reason = typeof recorded.left === "string" ? recorded.left : `the run could not be written: ${String(recorded.left.error)}`
          yield* logEvent("paper.not-recorded", { strategy: subject.id, reason })
          return
        }
        const { runId, metrics, trackingErrorPct, fillMismatches } = recorded.right
        yield* logEvent("paper.recorded", {
          strategy: subject.id,
          runId,
          candles: metrics.candles,
          fromMs: metrics.fromMs,
          toMs: metrics.toMs,
          startedAt,
          fills: fills.length,
          pnl: metrics.pnl.toFixed(),
          trackingErrorPct: trackingErrorPct.toFixed(),
          fillMismatches
        })
      })

    // Added before the pollers and the strategies start, so it runs after they stopped.
    yield* Effect.addFinalizer(() =>
      EngineModule.finalizerWork(
        Effect.gen(function* () {
          for (const group of groups.values()) {
            yield* observe(group).pipe(Effect.timeout(FINAL_READ_TIMEOUT), Effect.ignore)
            for (const subject of group.subjects) yield* record(group, subject)
          }
        })
      )
    )

    for (const group of groups.values()) {
      yield* Effect.forkScoped(observe(group).pipe(Effect.catchAll(() => Effect.void), Effect.repeat(Schedule.spaced(Duration.millis(group.pollMs)))))
    }
  })
