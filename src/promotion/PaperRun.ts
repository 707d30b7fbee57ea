/**
 * Recording a paper run as promotion evidence. The daemon hands over what its
 * paper trading saw and did; the candles it saw are replayed through the
 * backtester from the same balances, and the gap between the two equity curves
 * is the run's tracking error (the `paper.maxTrackingErrorPct` gate).
 */
import type BetterSqlite3 from "better-sqlite3"
import { Either } from "effect"
import { type Decimal, toFloat, ZERO } from "../domain/Decimal.js"
import { type BacktestFailed, runBacktest } from "../backtest/Backtest.js"
import { computeMetrics, type Metrics, type RunFill, trackingErrorPct } from "../backtest/Metrics.js"
import { compareFills } from "../backtest/Parity.js"
import type { StrategyDefinition } from "../strategy/Strategy.js"
import type { Candle, Fees, PairSpec } from "../venue/Matching.js"
import { canonicalParams, paramsHash, sourceHashOfFile } from "./Hash.js"
import { recordRun } from "./Records.js"

export interface PaperRunInput<P, S> {
  readonly strategy: StrategyDefinition<P, S>
  /** Decoded params, and the params as configured (they are hashed). */
  readonly params: P
  readonly rawParams: unknown
  readonly sourcePath: string
  readonly pair: PairSpec
  readonly fees: Fees
  readonly settleDelayMs: number
  /** Free balances when the paper run started. */
  readonly startBalances: Readonly<Record<string, Decimal>>
  /** The closed candles the paper run traded through, oldest first. */
  readonly candles: ReadonlyArray<Candle>
  readonly intervalMs: number
  /** Paper equity at each of those candles' close, valued like the backtest (quote + base × close). */
  readonly equity: ReadonlyArray<Decimal>
  readonly fills: ReadonlyArray<RunFill>
  /** Candles that closed holding a position worth at least the pair's minimum notional. */
  readonly inMarketCandles: number
  /** Where the paper run traded, e.g. "venue:http://127.0.0.1:8787". */
  readonly dataSource: string
  readonly schedule?: string
}

export interface PaperRunRecorded {
  readonly runId: number
  readonly metrics: Metrics
  readonly trackingErrorPct: Decimal
  /** Fills that differ from the backtest of the same candles (price, quantity, side, liquidity). */
  readonly fillMismatches: number
}

export const recordPaperRun = <P, S>(
  db: BetterSqlite3.Database,
  input: PaperRunInput<P, S>,
  nowMs: number
): Either.Either<PaperRunRecorded, BacktestFailed> =>
  Either.map(
    runBacktest({
      strategy: input.strategy,
      params: input.params,
      pair: input.pair,
      fees: input.fees,
      settleDelayMs: input.settleDelayMs,
      balances: input.startBalances,
      candles: input.candles,
      intervalMs: input.intervalMs,
      ...(input.schedule === undefined ? {} : { schedule: input.schedule })
    }),
    (backtest) => {
      const first = input.candles[0]!
      const metrics = computeMetrics({
        baseAsset: input.pair.base,
        quoteAsset: input.pair.quote,
        intervalMs: input.intervalMs,
        fromMs: first.openTimeMs,
        initialEquity: backtest.metrics.initialEquity,
        initialBase: input.startBalances[input.pair.base] ?? ZERO,
        initialPrice: first.open,
        equityMarks: input.equity.map((equity) => toFloat(equity)),
        finalEquity: input.equity[input.equity.length - 1] ?? backtest.metrics.initialEquity,
        inMarketCandles: input.inMarketCandles,
        fills: input.fills
      })
      const tracking = trackingErrorPct([metrics.initialEquity, ...input.equity], [backtest.metrics.initialEquity, ...backtest.equity])
      const runId = recordRun(db, {
        kind: "paper",
        strategy: input.strategy.name,
        sourceHash: sourceHashOfFile(input.sourcePath),
        paramsHash: paramsHash(input.rawParams),
        params: canonicalParams(input.rawParams),
        symbol: input.pair.symbol,
        dataSource: input.dataSource,
        metrics,
        trackingErrorPct: tracking,
        recordedAtMs: nowMs
      })
      return { runId, metrics, trackingErrorPct: tracking, fillMismatches: compareFills(backtest.fills, input.fills).length }
    }
  )
