/**
 * Parity of a recorded paper run: the same strategy with the same params is run
 * through the backtester's matching over exactly what the run recorded — the
 * candles its strategy was given (history as warm-up), the venue's price steps, the
 * state it resumed — and its fills are compared one to one with the paper fills,
 * intent by intent (tag and occurrence), on side, price, quantity, liquidity and fee.
 *
 * The comparison covers the run up to the close of the last candle its strategy was given.
 * A resumed instance's replay starts from its book and its live orders as they stood when the
 * run started; the fills of those orders are compared too, under `<tag>#carried`. Its strategy
 * first hears what the paper instance was handed first: the final updates and fills of its
 * orders that came about while it did not run.
 *
 * Each replayed order reaches the venue when the paper order did, and each replayed cancel
 * takes effect when the venue cancelled the paper order, if that was within
 * `latencyToleranceMs` of the strategy's decision; one that took longer (or never got
 * there) is replayed as arriving at the end of that tolerance, so latency or faults
 * that changed a fill show as a mismatch. The replay's strategy hears each fill and order
 * update when the paper strategy was given it (the daemon hears them by polling, a moment
 * after the venue made them), so it decides on what the paper strategy knew then. Tracking error compares the two PnL curves
 * of the instance's own book, in percent of what its allocation was worth at the start.
 */
import { Either } from "effect"
import { type Decimal, fromString, InvalidDecimal, ZERO } from "../domain/Decimal.js"
import { type BacktestFailed, BacktestSetupInvalid, runBacktest } from "../backtest/Backtest.js"
import { CARRIED, type HeardAt, type MissedOutcome } from "../backtest/ReplayRun.js"
import type { PlaceIntent } from "../domain/Intent.js"
import { compareFillsByIntent, fillsByIntent, type IntentFill, intentKey, type IntentFillMismatch } from "../backtest/Parity.js"
import { deserializeState, type StrategyDefinition } from "../strategy/Strategy.js"
import type { PairSpec } from "../venue/Orders.js"
import type { VenueCandle } from "../venue/PricePath.js"
import { allocationValue, type BookPair, pnlCurve, trackingErrorPct } from "./Book.js"
import type { CarriedOrder, MissedOutcomeRow, PaperIntentRow, PaperRunEvidence, PaperSetup } from "./PaperStore.js"

export interface RunParity {
  readonly runId: number
  readonly status: PaperRunEvidence["status"]
  /** Paper fills of the run's intents and of the orders it carried (a market order in flight at the start is not compared). */
  readonly paperFills: number
  readonly replayFills: number
  readonly fillMismatches: number
  /** The first few mismatches, for the record and the operator. */
  readonly worst: ReadonlyArray<IntentFillMismatch>
  /** Undefined when the instance had no allocation to measure against. */
  readonly trackingErrorPct: Decimal | undefined
}

/** Mismatches kept in a promotion record per run. */
const WORST_KEPT = 5

const carriedIntent = (order: CarriedOrder, symbol: string, index: number): PlaceIntent => {
  const field = `setup.carried[${index}]`
  const base = { tag: order.tag, symbol, side: order.side, baseQty: fromString(order.baseQty, `${field}.baseQty`), limitPrice: fromString(order.limitPrice, `${field}.limitPrice`) }
  return order.type === "stop-limit" && order.stopPrice !== null ? { ...base, type: "stop-limit", stopPrice: fromString(order.stopPrice, `${field}.stopPrice`) } : { ...base, type: "limit" }
}

const missedOutcome = (row: MissedOutcomeRow, index: number): MissedOutcome => {
  const field = `setup.missed[${index}]`
  if (row._tag === "Fill") {
    return {
      _tag: "Fill",
      event: {
        tag: row.tag,
        fillId: row.fillId,
        side: row.side,
        price: fromString(row.price, `${field}.price`),
        baseQty: fromString(row.baseQty, `${field}.baseQty`),
        quoteQty: fromString(row.quoteQty, `${field}.quoteQty`),
        fee: fromString(row.fee, `${field}.fee`),
        feeAsset: row.feeAsset,
        liquidity: row.liquidity,
        time: row.time
      }
    }
  }
  return {
    _tag: "OrderUpdate",
    event: {
      tag: row.tag,
      ...(row.clientOrderId === null ? {} : { clientOrderId: row.clientOrderId }),
      kind: row.kind,
      ...(row.code === null ? {} : { code: row.code }),
      filledBaseQty: fromString(row.filledBaseQty, `${field}.filledBaseQty`)
    }
  }
}

const amountsOf = (amounts: Readonly<Record<string, string>>, field: string): Record<string, Decimal> =>
  Object.fromEntries(Object.entries(amounts).map(([asset, amount]) => [asset, fromString(amount, `${field}.${asset}`)]))

/**
 * The amounts of a run's setup, read back from its stored JSON within the bounds any text is
 * read with; throws InvalidDecimal naming the field.
 */
const setupAmounts = (setup: PaperSetup) => ({
  tickSize: fromString(setup.pair.tickSize, "setup.pair.tickSize"),
  stepSize: fromString(setup.pair.stepSize, "setup.pair.stepSize"),
  minBaseQty: fromString(setup.pair.minBaseQty, "setup.pair.minBaseQty"),
  minNotional: fromString(setup.pair.minNotional, "setup.pair.minNotional"),
  depthNotional: fromString(setup.pair.depthNotional, "setup.pair.depthNotional"),
  fees: { maker: fromString(setup.fees.maker, "setup.fees.maker"), taker: fromString(setup.fees.taker, "setup.fees.taker") },
  startBalances: amountsOf(setup.startBalances, "setup.startBalances"),
  allocation: setup.allocation === null ? null : amountsOf(setup.allocation, "setup.allocation"),
  startPrice: fromString(setup.startPrice, "setup.startPrice"),
  carried: (setup.carried ?? []).map((order, index) => carriedIntent(order, setup.pair.symbol, index)),
  missed: (setup.missed ?? []).map(missedOutcome)
})

const toCandle = (c: PaperRunEvidence["candles"][number]): VenueCandle => ({ openTimeMs: c.openTime, open: c.open, high: c.high, low: c.low, close: c.close, volume: c.volume })

export const replayPaperRun = <P, S>(
  strategy: StrategyDefinition<P, S>,
  params: P,
  run: PaperRunEvidence,
  latencyToleranceMs: number
): Either.Either<RunParity, BacktestFailed> => {
  const setup = run.setup
  const live = run.candles.filter((c) => !c.warmup)
  if (live.length === 0) {
    return Either.left(new BacktestSetupInvalid({ message: `paper run ${run.runId} recorded no live candle` }))
  }
  let amounts: ReturnType<typeof setupAmounts>
  try {
    amounts = setupAmounts(setup)
  } catch (error) {
    if (!(error instanceof InvalidDecimal)) throw error
    return Either.left(new BacktestSetupInvalid({ message: `paper run ${run.runId}: ${error.message}` }))
  }
  let initialState: S | undefined
  if (setup.startState !== null) {
    const restored = deserializeState(strategy, setup.startState)
    if (Either.isLeft(restored)) return Either.left(new BacktestSetupInvalid({ message: `paper run ${run.runId}: ${restored.left.message}` }))
    initialState = restored.right
  }
  const pair: PairSpec = {
    symbol: setup.pair.symbol,
    base: setup.pair.base,
    quote: setup.pair.quote,
    tickSize: amounts.tickSize,
    stepSize: amounts.stepSize,
    minBaseQty: amounts.minBaseQty,
    minNotional: amounts.minNotional,
    depthNotional: amounts.depthNotional,
    status: "trading"
  }
  const placements = new Map<string, PaperIntentRow>()
  const cancels = new Map<string, PaperIntentRow>()
  for (const intent of run.intents) (intent.kind === "cancel" ? cancels : placements).set(intentKey(intent.tag, intent.occurrence), intent)
  const arrival = (paper: PaperIntentRow | undefined): number | undefined => {
    if (paper === undefined) return undefined
    const reached = paper.reachedVenueAt
    return reached !== null && reached - paper.decidedAt <= latencyToleranceMs ? reached : paper.decidedAt + latencyToleranceMs
  }
  // When the paper strategy heard each update (by order and kind, in order) and each fill (by order, in order).
  const heardById = new Map<string, HeardAt>()
  const updatesHeard = new Map<string, Array<HeardAt>>()
  const fillsHeard = new Map<string, Array<HeardAt>>()
  const listIn = (lists: Map<string, Array<HeardAt>>, key: string): Array<HeardAt> => {
    let list = lists.get(key)
    if (list === undefined) lists.set(key, (list = []))
    return list
  }
  for (const h of run.heard) {
    const heard = { atMs: h.timeMs, seq: h.seq }
    if (h.fillId !== null) heardById.set(h.fillId, heard)
    else if (h.clientOrderId !== null) listIn(updatesHeard, `${h.clientOrderId} ${h.kind}`).push(heard)
  }
  for (const fill of run.fills) {
    const at = heardById.get(fill.fillId)
    if (fill.clientOrderId !== null && at !== undefined) listIn(fillsHeard, fill.clientOrderId).push(at)
  }
  const carried = setup.carried ?? []
  const carriedTag = new Map(carried.map((order) => [order.clientOrderId, order.tag]))
  const orderOf = (tag: string, occurrence: number): string | undefined =>
    occurrence === CARRIED ? carried.find((order) => order.tag === tag)?.clientOrderId : (placements.get(intentKey(tag, occurrence))?.clientOrderId ?? undefined)
  const replayed = runBacktest({
    strategy,
    params,
    pair,
    fees: amounts.fees,
    settleDelayMs: setup.settleDelayMs,
    balances: amounts.startBalances,
    candles: live.map(toCandle),
    warmup: run.candles.filter((c) => c.warmup).map(toCandle),
    intervalMs: setup.intervalMs,
    tape: run.steps,
    tickers: run.tickers,
    timing: {
      placedAt: (tag, occurrence) => arrival(placements.get(intentKey(tag, occurrence))),
      cancelledAt: (tag, occurrence) => arrival(cancels.get(intentKey(tag, occurrence))),
      fillHeardAt: (tag, occurrence, index) => {
        const order = orderOf(tag, occurrence)
        return order === undefined ? undefined : fillsHeard.get(order)?.[index]
      },
      updateHeardAt: (tag, occurrence, kind, index) => {
        const order = orderOf(tag, occurrence)
        return order === undefined ? undefined : updatesHeard.get(`${order} ${kind}`)?.[index]
      }
    },
    ...(setup.schedule === null ? {} : { schedule: setup.schedule }),
    ...(initialState === undefined ? {} : { initialState, carried: amounts.carried, missed: amounts.missed })
  })
  return Either.map(replayed, (result) => {
    const intentOf = new Map([...placements.values()].map((intent) => [intent.intentId, intentKey(intent.tag, intent.occurrence)]))
    // The replay ends at the last candle the strategy was given; what the run did after it is not compared.
    const lastCloseMs = live[live.length - 1]!.openTime + setup.intervalMs
    const paper: Array<IntentFill> = []
    for (const fill of run.fills) {
      if (fill.time > lastCloseMs) continue
      const carriedFrom = fill.intentId === null && fill.clientOrderId !== null ? carriedTag.get(fill.clientOrderId) : undefined
      const intent = fill.intentId !== null ? (intentOf.get(fill.intentId) ?? fill.intentId) : carriedFrom !== undefined ? intentKey(carriedFrom, CARRIED) : undefined
      // A fill of an order from before the run that the run did not carry (a market order in flight) moves the book only.
      if (intent === undefined) continue
      paper.push({ intent, side: fill.side, price: fill.price, baseQty: fill.baseQty, liquidity: fill.liquidity, fee: fill.fee })
    }
    const replay = fillsByIntent(result.fills, result.placements)
    const mismatches = compareFillsByIntent(replay, paper)

    const book: BookPair = { symbol: pair.symbol, base: pair.base, quote: pair.quote, minNotional: pair.minNotional }
    const paperCurve = pnlCurve(book, live, run.fills)
    let known = 0
    const replayPoints = live.map((candle) => {
      const closeMs = candle.openTime + setup.intervalMs
      while (known < result.fills.length && result.fills[known]!.time <= closeMs) known++
      return { close: candle.close, fillsKnown: known }
    })
    const replayCurve = pnlCurve(book, replayPoints, result.fills)
    const allocation = amounts.allocation
    const startValue = allocation === null ? ZERO : allocationValue(book, allocation, amounts.startPrice)
    return {
      runId: run.runId,
      status: run.status,
      paperFills: paper.length,
      replayFills: replay.length,
      fillMismatches: mismatches.length,
      worst: mismatches.slice(0, WORST_KEPT),
      trackingErrorPct: trackingErrorPct(paperCurve.pnl, replayCurve.pnl, startValue)
    }
  })
}
