/**
 * Every paper run is promotion evidence, written while it happens. When an
 * instance starts on paper a `running` run is inserted with what its replay will
 * need (allocation, pair rules, fees, settle delay, the strategy's stored state);
 * every few seconds a checkpoint appends, in one transaction with the run's summary,
 * the candles the strategy was given, every price step the venue's matching saw
 * (`GET /api/_venue/steps`), the placement intents with when their orders reached
 * the venue, and the instance's fills. `kill -9` keeps everything up to the last
 * checkpoint; the next start marks such a run `interrupted`, and it still counts for
 * what it recorded. A clean stop writes a last checkpoint and marks it `completed`.
 *
 * The instance is judged on its own book (`Book.ts`): its allocation and its own
 * fills, never the account.
 */
import type BetterSqlite3 from "better-sqlite3"
import { Clock, Duration, Effect, Either, Schedule, type Scope } from "effect"
import { Decimal, ZERO } from "../domain/Decimal.js"
import { isTerminal, LIVE_STATES, type OrderState } from "../domain/OrderState.js"
import type { GivenTicker } from "../backtest/ReplayRun.js"
import { computeMetrics, type Metrics } from "../backtest/Metrics.js"
import { finalizerWork } from "../engine/Engine.js"
import { Market } from "../engine/Market.js"
import { bookBalances, bookFillOf } from "../engine/Portfolio.js"
import { logEvent } from "../log/Logger.js"
import { Database, sqlList } from "../store/Database.js"
import { FillLedger, strategyFills } from "../store/FillLedger.js"
import { OrderJournal } from "../store/OrderJournal.js"
import { isStorageFailure, type StorageHealth } from "../store/StorageHealth.js"
import type { Side } from "../svc/Dialect.js"
import { SvcClient } from "../svc/SvcClient.js"
import { missedEvents, type OutcomeEvent } from "../strategy/Inbox.js"
import type { CandleEvent, StrategyDefinition } from "../strategy/Strategy.js"
import { decodeAccounts, devAccounts } from "../venue/Accounts.js"
import { allocationValue, type BookPair, PnlWalk } from "./Book.js"
import { canonicalParams, paramsHash, sourceHashOfFile } from "../domain/Hash.js"
import {
  interruptRunningPaperRuns,
  type PaperCandleRow,
  type CarriedOrder,
  type MissedOutcomeRow,
  type PaperFillRow,
  type PaperHeardRow,
  type PaperIntentRow,
  type PaperSetup,
  type PaperStepRow,
  paperWriter,
  startPaperRun
} from "./PaperStore.js"

/** What is recorded about an instance: its code, its params as configured, what it trades and with what. */
export interface EvidenceSubject {
  readonly id: string
  readonly definition: StrategyDefinition
  readonly sourcePath: string
  readonly rawParams: unknown
  readonly symbol: string
  readonly schedule: string | undefined
  readonly candleInterval: string
  readonly allocation: Readonly<Record<string, Decimal>> | undefined
}

export interface PaperEvidenceOptions {
  /** Where the run traded, e.g. "venue:http://127.0.0.1:8787". */
  readonly dataSource: string
  /** The venue's acceptance-to-settlement delay the replay uses. */
  readonly settleDelayMs: number
  readonly intervalMs: (interval: string) => number
  /** Where runs are written: the daemon's own database, or a store shared with the live daemon. */
  readonly store: BetterSqlite3.Database
  /** The health of the store's writes: checkpoints wait while it refuses them. */
  readonly storage: StorageHealth
}

/** An update of one of the instance's orders (its kind), or a fill (kind "fill", named by its id). */
export type OrderEventGiven = { readonly clientOrderId: string; readonly kind: string } | { readonly kind: "fill"; readonly fillId: string }

export interface PaperEvidenceRecorder {
  /** Tells the recorder a candle was given to an instance (warm-up or live), when it was. */
  readonly candleGiven: (instanceId: string, candle: CandleEvent) => void
  /** Tells the recorder an instance was given a ticker (its venue time and price), now. */
  readonly tickerGiven: (instanceId: string, ticker: { readonly time: number; readonly price: Decimal }) => void
  /** Tells the recorder an instance was given an update of one of its orders, or a fill (`kind` "fill"), now. */
  readonly orderEventGiven: (instanceId: string, event: OrderEventGiven) => void
}

/** A checkpoint every few seconds: far more often than the minute of market time the evidence promises. */
const CHECKPOINT_EVERY = Duration.seconds(5)
/** The last checkpoint of a stop waits no longer for the venue than this. */
const FINAL_READ_TIMEOUT = Duration.seconds(2)
const STEPS_PAGE = 5000
const STEP_PAGES_PER_CHECKPOINT = 10

/**
 * The replay assumes svc-venue's fees and synthetic book depth (paper trades only on
 * svc-venue); exchange-info tells neither.
 */
const venueDefaults = decodeAccounts(devAccounts)
const depthNotionalOf = (symbol: string): string =>
  (venueDefaults.pairs.find((p) => p.symbol === symbol) ?? venueDefaults.pairs[0]!).depthNotional

const emptyMetrics = (pair: BookPair, startValue: Decimal, startMs: number, intervalMs: number, base: Decimal, price: Decimal): Metrics =>
  computeMetrics({
    baseAsset: pair.base,
    quoteAsset: pair.quote,
    intervalMs,
    fromMs: startMs,
    initialEquity: startValue,
    initialBase: base,
    initialPrice: price,
    equityMarks: [],
    finalEquity: startValue,
    inMarketCandles: 0,
    fills: []
  })

interface Recording {
  readonly subject: EvidenceSubject
  readonly runId: number
  readonly startedAtMs: number
  readonly pair: BookPair
  readonly intervalMs: number
  readonly startValue: Decimal
  readonly startBase: Decimal
  readonly startPrice: Decimal
  /** Ledger rowid and intent seq the run starts after. */
  readonly fillRowidFloor: number
  readonly intentSeqFloor: number
  /** Steps older than this are history, not this run. */
  readonly stepTimeFloor: number
  lastFillRowid: number
  lastIntentSeq: number
  lastStepSeq: number
  /** The venue process `lastStepSeq` counts in. */
  stepEpoch: number | undefined
  stepsRecorded: number
  /** Intents whose order has not reached the venue yet, or not been cancelled or ended yet (or not said when). */
  readonly waiting: Map<string, Omit<PaperIntentRow, "clientOrderId" | "reachedVenueAt"> & { readonly seq: number }>
  /** Candles given since the last checkpoint. */
  pendingCandles: Array<PaperCandleRow>
  pendingTickers: Array<GivenTicker>
  pendingHeard: Array<PaperHeardRow>
  heardRecorded: number
  /** Open time of the newest candle recorded for a strategy that is given none (its replay still walks candles). */
  lastCandleOpen: number
  /** Fills of the whole run, oldest first, for the summary. */
  readonly fills: Array<PaperFillRow>
  /** Live candles given since the last summary, then walked into `pnl` and `equityMarks`. */
  unsummarised: Array<PaperCandleRow>
  readonly pnl: PnlWalk
  /** Equity at each live close, in floating point as the metrics read it: 8 bytes a candle. */
  readonly equityMarks: Array<number>
  liveFromMs: number | undefined
  /** The summary, until a candle or a fill comes after it. */
  summary: Metrics | undefined
}


/**
 * The run's summary from its live candles and fills, as the instance's own book measures it.
 * Only the closes given since the last summary are valued; a checkpoint that brought no
 * candle and no fill keeps the summary it had.
 */
const summarise = (r: Recording): Metrics => {
  if (r.summary !== undefined && r.unsummarised.length === 0) return r.summary
  for (const candle of r.unsummarised) {
    r.liveFromMs ??= candle.openTime
    r.equityMarks.push(r.startValue.plus(r.pnl.close(candle, r.fills)).toNumber())
  }
  r.unsummarised = []
  r.summary = r.liveFromMs === undefined
    ? emptyMetrics(r.pair, r.startValue, r.startedAtMs, r.intervalMs, r.startBase, r.startPrice)
    : computeMetrics({
      baseAsset: r.pair.base,
      quoteAsset: r.pair.quote,
      intervalMs: r.intervalMs,
      fromMs: r.liveFromMs,
      initialEquity: r.startValue,
      initialBase: r.startBase,
      initialPrice: r.startPrice,
      equityMarks: r.equityMarks,
      finalEquity: r.startValue.plus(r.pnl.last),
      inMarketCandles: r.pnl.inMarket,
      fills: r.fills
    })
  return r.summary
}

/** A missed outcome as the run's setup stores it. */
const missedRowOf = (missed: OutcomeEvent): MissedOutcomeRow => {
  if (missed._tag === "OrderUpdate") {
    const update = missed.event
    return { _tag: "OrderUpdate", tag: update.tag, clientOrderId: update.clientOrderId ?? null, kind: update.kind, code: update.code ?? null, filledBaseQty: update.filledBaseQty.toFixed() }
  }
  const fill = missed.event
  return {
    _tag: "Fill",
    tag: fill.tag,
    fillId: fill.fillId,
    side: fill.side,
    price: fill.price.toFixed(),
    baseQty: fill.baseQty.toFixed(),
    quoteQty: fill.quoteQty.toFixed(),
    fee: fill.fee.toFixed(),
    feeAsset: fill.feeAsset,
    liquidity: fill.liquidity,
    time: fill.time
  }
}

/**
 * Starts recording in the current scope; the last checkpoint is written when the scope
 * closes. Start it before the strategies, so that it closes after they stopped.
 */
export const recordPaperRuns = (
  subjects: ReadonlyArray<EvidenceSubject>,
  options: PaperEvidenceOptions
): Effect.Effect<PaperEvidenceRecorder, never, Scope.Scope | SvcClient | Market | Database | OrderJournal | FillLedger> =>
  Effect.gen(function* () {
    const client = yield* SvcClient
    const market = yield* Market
    const journal = yield* OrderJournal
    const ledger = yield* FillLedger
    const { sqlite: daemon } = yield* Database
    const store = options.store
    const writer = paperWriter(store)
    const startedAt = yield* Clock.currentTimeMillis
    const interrupted = interruptRunningPaperRuns(store, startedAt)
    if (interrupted > 0) yield* logEvent("paper.interrupted", { runs: interrupted })

    const fills = strategyFills(daemon)
    const q = {
      storedState: daemon.prepare<[string], { state: string }>("SELECT state FROM strategy_state WHERE strategy_id = ?"),
      // What a resumed instance starts with: its orders still live, and what its fills so far made of its allocation.
      liveOrders: daemon.prepare<[string], { tag: string; client_order_id: string; side: Side; type: "limit" | "stop-limit"; base_qty: string; filled_base_qty: string; limit_price: string; stop_price: string | null }>(
        `SELECT tag, client_order_id, side, type, base_qty, filled_base_qty, limit_price, stop_price FROM orders
         WHERE strategy_id = ? AND state IN ${sqlList(LIVE_STATES)} AND type <> 'market' AND tag IS NOT NULL AND client_order_id IS NOT NULL
         ORDER BY order_id`
      ),
      intentSeq: daemon.prepare<[string], { n: number }>("SELECT COALESCE(MAX(seq), 0) AS n FROM intents WHERE strategy_id = ?"),
      intentSeqOf: daemon.prepare<[string], { seq: number }>("SELECT seq FROM intents WHERE intent_id = ?"),
      intentsSince: daemon.prepare(
        "SELECT intent_id, seq, tag, type, created_at FROM intents WHERE strategy_id = ? AND seq > ? ORDER BY seq"
      ),
      // How many intents of a kind and tag the run made before this one: read, not kept, as most tags are used once.
      placementsBefore: daemon.prepare<[string, string, number, number], { n: number }>(
        "SELECT count(*) AS n FROM intents WHERE strategy_id = ? AND tag = ? AND seq > ? AND seq < ? AND type <> 'cancel'"
      ),
      cancelsBefore: daemon.prepare<[string, string, number, number], { n: number }>(
        "SELECT count(*) AS n FROM intents WHERE strategy_id = ? AND tag = ? AND seq > ? AND seq < ? AND type = 'cancel'"
      ),
      // The order a cancel was sent for: the newest of its tag placed before it.
      cancelledOrderOf: daemon.prepare<[string, string, number], { client_order_id: string | null; venue_cancelled_at: number | null; terminal_at: number | null; state: string }>(
        `SELECT o.client_order_id, o.venue_cancelled_at, o.terminal_at, o.state FROM orders o JOIN intents i ON i.intent_id = o.intent_id
         WHERE o.strategy_id = ? AND o.tag = ? AND i.seq < ? ORDER BY i.seq DESC LIMIT 1`
      ),
      orderOf: daemon.prepare<[string], { client_order_id: string | null; venue_created_at: number | null; accepted_at: number | null; terminal_at: number | null; state: string }>(
        "SELECT client_order_id, venue_created_at, accepted_at, terminal_at, state FROM orders WHERE intent_id = ?"
      )
    }

    // The account's holdings stand in only for instances without an allocation.
    const balances = subjects.every((s) => s.allocation !== undefined)
      ? Either.left("not needed")
      : yield* market.refreshBalances.pipe(Effect.orElse(() => market.balances), Effect.either)
    const pairs = yield* market.pairs.pipe(Effect.orElseSucceed(() => new Map()))
    const recordings = new Map<string, Recording>()
    for (const subject of subjects) {
      const rules = pairs.get(subject.symbol)
      const price = yield* market.lastPrice(subject.symbol)
      if (rules === undefined || price === undefined) {
        yield* logEvent("paper.not-recorded", {
          strategy: subject.id,
          reason: rules === undefined ? `${subject.symbol} is not listed by exchange-info` : `the price of ${subject.symbol} could not be read at start`
        })
        continue
      }
      const pair: BookPair = { symbol: rules.symbol, base: rules.base, quote: rules.quote, minNotional: rules.minNotional }
      const held = (asset: string): Decimal => {
        const balance = Either.isRight(balances) ? balances.right.byAsset.get(asset) : undefined
        return balance === undefined ? ZERO : balance.free.plus(balance.locked)
      }
      const allocation = subject.allocation
      const startState = q.storedState.get(subject.id)?.state ?? null
      // A resumed instance's book has moved since its allocation: the replay starts where the run did.
      const startBalances =
        allocation === undefined
          ? { [rules.base]: held(rules.base), [rules.quote]: held(rules.quote) }
          : startState === null
            ? allocation
            : Object.fromEntries(bookBalances(allocation, fills.all(subject.id).map(bookFillOf), new Map([[rules.symbol, rules]])))
      const carried: Array<CarriedOrder> =
        startState === null
          ? []
          : q.liveOrders.all(subject.id).map((o) => ({
              tag: o.tag,
              clientOrderId: o.client_order_id,
              side: o.side,
              type: o.type,
              baseQty: new Decimal(o.base_qty).minus(o.filled_base_qty).toFixed(),
              limitPrice: o.limit_price,
              stopPrice: o.stop_price
            }))
      // A resumed instance first hears what became of its orders while it did not run (the host's
      // restore), and so does its replay: read before the instance starts, as its state is.
      const missed =
        startState === null ? [] : missedEvents(yield* journal.owedAnswers(subject.id), yield* ledger.unheardFor(subject.id)).map(missedRowOf)
      const startValue = allocation === undefined ? ZERO : allocationValue(pair, allocation, price)
      const intervalMs = options.intervalMs(subject.candleInterval)
      const setup: PaperSetup = {
        instanceId: subject.id,
        allocation: allocation === undefined ? null : Object.fromEntries(Object.entries(allocation).map(([asset, amount]) => [asset, amount.toFixed()])),
        startBalances: Object.fromEntries(Object.entries(startBalances).map(([asset, amount]) => [asset, amount.toFixed()])),
        startPrice: price.toFixed(),
        pair: {
          symbol: rules.symbol,
          base: rules.base,
          quote: rules.quote,
          tickSize: rules.tickSize.toFixed(),
          stepSize: rules.stepSize.toFixed(),
          minBaseQty: rules.minBaseQty.toFixed(),
          minNotional: rules.minNotional.toFixed(),
          depthNotional: depthNotionalOf(rules.symbol)
        },
        fees: { maker: venueDefaults.fees.maker, taker: venueDefaults.fees.taker },
        settleDelayMs: options.settleDelayMs,
        intervalMs,
        schedule: subject.schedule ?? null,
        startState,
        ...(carried.length === 0 ? {} : { carried }),
        ...(missed.length === 0 ? {} : { missed })
      }
      const startBase = allocation?.[rules.base] ?? ZERO
      const fillRowidFloor = fills.lastRowid()
      const intentSeqFloor = q.intentSeq.get(subject.id)!.n
      const runId = startPaperRun(store, {
        strategy: subject.definition.name,
        sourceHash: sourceHashOfFile(subject.sourcePath),
        paramsHash: paramsHash(subject.rawParams),
        params: canonicalParams(subject.rawParams),
        symbol: subject.symbol,
        dataSource: options.dataSource,
        setup,
        startedAtMs: startedAt,
        emptyMetrics: emptyMetrics(pair, startValue, startedAt, intervalMs, startBase, price)
      })
      recordings.set(subject.id, {
        subject,
        runId,
        startedAtMs: startedAt,
        pair,
        intervalMs,
        startValue,
        startBase,
        startPrice: price,
        fillRowidFloor,
        intentSeqFloor,
        // The first live candle may have opened before the start: its steps are part of the run.
        stepTimeFloor: startedAt - 2 * intervalMs,
        lastFillRowid: fillRowidFloor,
        lastIntentSeq: intentSeqFloor,
        lastStepSeq: 0,
        stepEpoch: undefined,
        stepsRecorded: 0,
        waiting: new Map(),
        pendingCandles: [],
        pendingTickers: [],
        pendingHeard: [],
        heardRecorded: 0,
        lastCandleOpen: startedAt - 2 * intervalMs,
        fills: [],
        unsummarised: [],
        pnl: new PnlWalk(pair),
        equityMarks: [],
        liveFromMs: undefined,
        summary: undefined
      })
      yield* logEvent("paper.started", { strategy: subject.id, runId, allocation: setup.allocation, resumed: setup.startState !== null })
    }

    const tickerGiven = (instanceId: string, ticker: { readonly time: number; readonly price: Decimal }): void => {
      recordings.get(instanceId)?.pendingTickers.push({ atMs: Date.now(), timeMs: ticker.time, price: ticker.price })
    }

    const orderEventGiven = (instanceId: string, event: OrderEventGiven): void => {
      const r = recordings.get(instanceId)
      if (r === undefined) return
      const [clientOrderId, fillId] = "fillId" in event ? [null, event.fillId] : [event.clientOrderId, null]
      r.pendingHeard.push({ seq: ++r.heardRecorded, timeMs: Date.now(), clientOrderId, kind: event.kind, fillId })
    }

    const candleGiven = (instanceId: string, candle: CandleEvent): void => {
      const r = recordings.get(instanceId)
      if (r === undefined) return
      const row: PaperCandleRow = {
        openTime: candle.openTime,
        open: candle.open,
        high: candle.high,
        low: candle.low,
        close: candle.close,
        volume: candle.volume,
        warmup: candle.warmup === true,
        seenAt: Date.now(),
        // The fills read so far plus those the ledger has after them: counts the new rows only.
        fillsKnown: r.fills.length + fills.countStoredAfter(instanceId, r.lastFillRowid)
      }
      r.pendingCandles.push(row)
      if (!row.warmup) r.unsummarised.push(row)
    }

    /** New price steps of a pair since the recording's last one. */
    const readSteps = (r: Recording) =>
      Effect.gen(function* () {
        const steps: Array<PaperStepRow> = []
        for (let page = 0; page < STEP_PAGES_PER_CHECKPOINT; page++) {
          let answer = yield* client.venueSteps(r.pair.symbol, r.lastStepSeq, STEPS_PAGE)
          if (answer.epoch !== r.stepEpoch) {
            // A venue restarted since the last read numbers its steps from 1 again.
            const restarted = r.stepEpoch !== undefined
            r.stepEpoch = answer.epoch
            r.lastStepSeq = 0
            if (restarted) answer = yield* client.venueSteps(r.pair.symbol, 0, STEPS_PAGE)
          }
          if (r.lastStepSeq > 0 && answer.oldestSeq > r.lastStepSeq + 1) {
            yield* logEvent("paper.tape-gap", { strategy: r.subject.id, runId: r.runId, fromSeq: r.lastStepSeq + 1, toSeq: answer.oldestSeq - 1 })
          }
          for (const [seq, timeMs, price] of answer.steps) {
            r.lastStepSeq = seq
            // Numbered by the run, not the venue: a restarted venue numbers from 1 again.
            if (timeMs >= r.stepTimeFloor) steps.push({ seq: ++r.stepsRecorded, timeMs, price })
          }
          if (answer.steps.length < STEPS_PAGE) break
        }
        return steps
      })

    const newIntents = (r: Recording): Array<PaperIntentRow> => {
      const rows: Array<PaperIntentRow> = []
      for (const row of q.intentsSince.all(r.subject.id, r.lastIntentSeq) as Array<{ intent_id: string; seq: number; tag: string; type: string; created_at: number }>) {
        r.lastIntentSeq = row.seq
        const kind = row.type === "cancel" ? "cancel" : "place"
        const occurrence = (kind === "cancel" ? q.cancelsBefore : q.placementsBefore).get(r.subject.id, row.tag, r.intentSeqFloor, row.seq)!.n
        r.waiting.set(row.intent_id, { intentId: row.intent_id, kind, tag: row.tag, occurrence, decidedAt: row.created_at, seq: row.seq })
      }
      for (const [intentId, { seq, ...intent }] of r.waiting) {
        if (intent.kind === "cancel") {
          const order = q.cancelledOrderOf.get(r.subject.id, intent.tag, seq)
          // Known once the order ended; a cancel that found it already filled or rejected took no effect.
          if (order !== undefined && !isTerminal(order.state as OrderState)) continue
          r.waiting.delete(intentId)
          const cancelledAt = order?.state === "cancelled" ? (order.venue_cancelled_at ?? order.terminal_at) : null
          rows.push({ ...intent, clientOrderId: order?.client_order_id ?? null, reachedVenueAt: cancelledAt })
          continue
        }
        const order = q.orderOf.get(intentId)
        // The venue's own creation time is the truth; the acceptance answer is the fallback once the order is done.
        const settled = order === undefined || order.venue_created_at !== null || order.terminal_at !== null || order.state === "refused"
        if (!settled) continue
        r.waiting.delete(intentId)
        rows.push({ ...intent, clientOrderId: order?.client_order_id ?? null, reachedVenueAt: order?.venue_created_at ?? order?.accepted_at ?? null })
      }
      return rows
    }

    const newFills = (r: Recording): Array<PaperFillRow> => {
      const rows: Array<PaperFillRow> = []
      for (const f of fills.storedAfter(r.subject.id, r.lastFillRowid)) {
        r.lastFillRowid = f.ledger_rowid
        // An intent of this run, not one an earlier run of the instance made.
        const intentSeq = f.intent_id === null ? undefined : q.intentSeqOf.get(f.intent_id)?.seq
        rows.push({
          fillId: f.fill_id,
          intentId: intentSeq !== undefined && intentSeq > r.intentSeqFloor ? f.intent_id : null,
          clientOrderId: f.client_order_id,
          side: f.side,
          liquidity: f.liquidity,
          price: new Decimal(f.price),
          baseQty: new Decimal(f.base_qty),
          quoteQty: new Decimal(f.quote_qty),
          fee: new Decimal(f.fee),
          feeAsset: f.fee_asset,
          time: f.time
        })
      }
      return rows
    }

    /** A strategy given no candles still needs the run's candles: its replay walks them. */
    const readCandles = (r: Recording) =>
      Effect.gen(function* () {
        if (r.subject.definition.onCandle !== undefined) return
        const candles = yield* client.candles({ symbol: r.pair.symbol, interval: r.subject.candleInterval, limit: 100 })
        const now = yield* Clock.currentTimeMillis
        for (const c of [...candles].sort((a, b) => a.openTime - b.openTime)) {
          if (c.openTime + r.intervalMs > now || c.openTime <= r.lastCandleOpen) continue
          r.lastCandleOpen = c.openTime
          candleGiven(r.subject.id, { symbol: r.pair.symbol, interval: r.subject.candleInterval, ...c })
        }
      }).pipe(Effect.catchAll((error) => logEvent("request.failed", { what: "candles for the paper evidence", error: error.message })))

    const { storage } = options
    /**
     * A checkpoint: what the run was given and did since the last one, in one transaction. While
     * the store refuses writes nothing is taken out of the run, and a checkpoint the store refused
     * puts it all back (the venue keeps its price steps to be read again): the first checkpoint
     * after it takes writes again records everything.
     */
    const checkpoint = (r: Recording, readTimeout?: Duration.Duration) =>
      Effect.gen(function* () {
        if (storage.fault !== undefined) return
        const before = { ...r, fills: r.fills.length, waiting: [...r.waiting] }
        yield* readCandles(r)
        const read = readSteps(r)
        // Steps not read now are read at the next checkpoint: the venue keeps them.
        const steps = yield* (readTimeout === undefined ? read : Effect.timeoutFail(read, { duration: readTimeout, onTimeout: () => "the stop's time ran out" })).pipe(
          Effect.catchAll((error) =>
            Effect.as(logEvent("request.failed", { what: "venue price steps", error: typeof error === "string" ? error : error.message }), [] as Array<PaperStepRow>)
          )
        )
        const intents = newIntents(r)
        const fills = newFills(r)
        r.fills.push(...fills)
        if (fills.length > 0) r.summary = undefined
        const candles = r.pendingCandles
        r.pendingCandles = []
        const tickers = r.pendingTickers
        r.pendingTickers = []
        const heard = r.pendingHeard
        r.pendingHeard = []
        const now = yield* Clock.currentTimeMillis
        yield* Effect.try(() => storage.guard(() => writer.checkpoint({ runId: r.runId, candles, tickers, steps, intents, fills, heard, metrics: summarise(r), nowMs: now }))).pipe(
          Effect.catchAll((error) =>
            isStorageFailure(error.error)
              ? Effect.sync(() => {
                  Object.assign(r, { lastFillRowid: before.lastFillRowid, lastIntentSeq: before.lastIntentSeq, lastStepSeq: before.lastStepSeq, stepEpoch: before.stepEpoch, stepsRecorded: before.stepsRecorded, summary: undefined })
                  r.fills.length = before.fills
                  r.waiting.clear()
                  for (const [intentId, intent] of before.waiting) r.waiting.set(intentId, intent)
                  r.pendingCandles = [...candles, ...r.pendingCandles]
                  r.pendingTickers = [...tickers, ...r.pendingTickers]
                  r.pendingHeard = [...heard, ...r.pendingHeard]
                })
              : logEvent("paper.not-recorded", { strategy: r.subject.id, reason: `the checkpoint could not be written: ${String(error.error)}` })
          )
        )
      })

    // Added before the strategies start, so it runs after they stopped; interruptible, so a stop bound ends it.
    yield* Effect.addFinalizer(() =>
      finalizerWork(Effect.gen(function* () {
        for (const r of recordings.values()) {
          yield* checkpoint(r, FINAL_READ_TIMEOUT)
          const now = yield* Clock.currentTimeMillis
          // A run the store would not end stays running: the next start marks it interrupted, with what it recorded.
          const ended = storage.fault === undefined && (yield* Effect.try(() => storage.guard(() => writer.end(r.runId, now))).pipe(Effect.as(true), Effect.orElseSucceed(() => false)))
          if (!ended) {
            yield* logEvent("paper.not-recorded", { strategy: r.subject.id, runId: r.runId, reason: `the run could not be ended: ${storage.reason ?? "the store refused the write"}; the next start marks it interrupted` })
            continue
          }
          const metrics = summarise(r)
          yield* logEvent("paper.recorded", {
            strategy: r.subject.id,
            runId: r.runId,
            candles: metrics.candles,
            fromMs: metrics.fromMs,
            toMs: metrics.toMs,
            fills: r.fills.length,
            pnl: metrics.pnl.toFixed()
          })
        }
      }))
    )
    for (const r of recordings.values()) {
      yield* Effect.forkScoped(Effect.repeat(checkpoint(r), Schedule.spaced(CHECKPOINT_EVERY)))
    }
    return { candleGiven, tickerGiven, orderEventGiven }
  })
