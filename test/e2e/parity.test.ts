/**
 * Backtest = paper, at the level of the whole daemon: one synthetic tape is played
 * by the backtester in-process and by the real `svcbot run` trading on paper
 * against a svc-venue whose replay tape the test steps one candle at a time.
 * Fills (price, quantity, side, liquidity) and PnL must be identical.
 *
 * The daemon decides a candle is closed when `openTime + interval <= now`; the
 * replayed candles lie in the past, so each is closed the moment it is stepped,
 * and none exists before. The next candle is stepped only once the daemon has
 * handed the last one to the strategy, its orders have reached a terminal kind
 * and their fills have reached the strategy — the order of events a backtest
 * guarantees (fills and order updates before the next candle). All of that is
 * read from the daemon's own SQLite file and the venue's admin routes.
 */
import { Either } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { runBacktest } from "../../src/backtest/Backtest.js"
import { compareFills, describeMismatches } from "../../src/backtest/Parity.js"
import { Decimal, fromString, ZERO } from "../../src/domain/Decimal.js"
import { positionChange } from "../../src/strategy/orders.js"
import { decodeParams } from "../../src/strategy/Strategy.js"
import { decodeAccounts, devAccounts, toPairSpec } from "../../src/venue/Accounts.js"
import type { VenueCandle } from "../../src/venue/PricePath.js"
import { syntheticCandles } from "../../src/venue/Tape.js"
import smaCrossover from "../../strategies/sma-crossover.js"
import { events, killAll, paperConfig, pollUntil, query, svcbot, waitForEvent } from "../support/daemon.js"
import { comparable, devBacktest, devBalance, venueFillRows, venuePnl } from "../support/parity.js"
import { startVenue } from "../support/venue.js"

afterAll(killAll)

const MINUTE = 60_000
const pair = toPairSpec(decodeAccounts(devAccounts).pairs[0]!)

interface StoredState {
  readonly position: string
  readonly entryTag: string | null
  readonly entryCancelSent: boolean
  readonly exitTag: string | null
}

/** The strategy's state is saved before its intents are journaled: each order it waits for must be journaled, a cancel it sent too. */
const intentsJournaled = (dbPath: string, state: StoredState): boolean => {
  const order = (tag: string) =>
    query<{ cancel_requested: number; terminal_at: number | null }>(
      dbPath,
      `SELECT cancel_requested, terminal_at FROM orders WHERE strategy_id = 'parity-sma' AND tag = '${tag}' ORDER BY order_id DESC LIMIT 1`
    )[0]
  if (state.exitTag !== null && order(state.exitTag) === undefined) return false
  if (state.entryTag === null) return true
  const entry = order(state.entryTag)
  return entry !== undefined && (!state.entryCancelSent || entry.cancel_requested === 1 || entry.terminal_at !== null)
}

/** Orders of the strategy that the venue has not settled yet, or whose cancel is still unanswered. */
const UNSETTLED_ORDERS = `SELECT count(*) AS n FROM orders WHERE strategy_id = 'parity-sma'
  AND (state NOT IN ('resting', 'fill', 'rejected', 'cancelled', 'refused', 'not_placed') OR (state = 'resting' AND cancel_requested = 1))`

/**
 * Plays `tape` through the backtester and, one candle at a time, through the real
 * daemon trading sma-crossover with `rawParams` on paper; checks fills and PnL.
 */
const playBoth = async (rawParams: Record<string, unknown>, tape: ReadonlyArray<VenueCandle>, minimum: { fills: number; maker: number }) => {
  const params = Either.getOrThrow(decodeParams(smaCrossover, "parity", rawParams))
  const setup = (candles: ReadonlyArray<VenueCandle>) => devBacktest(smaCrossover, params, candles)
  // The backtest never settles what is placed at the last close, while the daemon
  // would: the tape ends on the last candle after which the strategy placed nothing.
  // A run is causal, so the full run's last fill time tells where that is.
  const full = Either.getOrThrow(runBacktest(setup(tape)))
  let length = tape.length
  while (length > 1 && full.fills.some((f) => f.time > tape[length - 1]!.openTimeMs + MINUTE)) length -= 1
  const candles = tape.slice(0, length)
  const expected = Either.getOrThrow(runBacktest(setup(candles)))
  expect(expected.fills.length, "the tape makes the strategy trade").toBeGreaterThanOrEqual(minimum.fills)
  expect(expected.fills.filter((f) => f.liquidity === "maker").length, "resting orders fill as maker").toBeGreaterThanOrEqual(minimum.maker)

  const venue = await startVenue({ tape: { kind: "csv", candles }, tickMs: 0, settleMs: 50, limits: { ordersPer10s: 10_000, weightPerMinute: 1_000_000 } })
  try {
    const { configPath, dbPath } = paperConfig("parity", venue.url, {
      venue: { settleMs: 50 },
      engine: { cancelOnStop: true, fillSyncIntervalMs: 1000 },
      strategies: [{ id: "parity-sma", strategy: "sma-crossover", symbol: "BTCUSDT", candleInterval: "1m", pollMs: 250, params: rawParams }]
    })
    const run = svcbot(["run", "--config", configPath], { SVC_API_KEY: venue.keyId, SVC_API_SECRET: venue.secret })
    await waitForEvent(run, "config.loaded", 60_000)

    for (const [index, candle] of candles.entries()) {
      await venue.admin("POST", "/_venue/tape", { steps: 1 })
      await pollUntil(
        async () => {
          if (run.child.exitCode !== null) throw new Error(`svcbot exited (${run.child.exitCode}): ${run.stderr.join("")}`)
          const [row] = query<{ state: string; last_candle_open: number | null }>(dbPath, "SELECT state, last_candle_open FROM strategy_state WHERE strategy_id = 'parity-sma'")
          if (row?.last_candle_open !== candle.openTimeMs) return undefined
          const state = JSON.parse(row.state) as StoredState
          if (!intentsJournaled(dbPath, state) || query<{ n: number }>(dbPath, UNSETTLED_ORDERS)[0]!.n > 0) return undefined
          const fills = await venueFillRows(venue)
          const stored = query<{ n: number }>(dbPath, "SELECT count(*) AS n FROM fills")[0]!.n
          if (stored !== fills.length) return undefined
          // And every fill reached the strategy: its position is what the fills add up to.
          let position = ZERO
          for (const fill of fills) {
            position = position.add(positionChange({ side: fill.side, baseQty: fromString(fill.baseQty), fee: fromString(fill.fee), feeAsset: fill.feeAsset }, pair.base))
            if (position.lt(0)) position = ZERO
          }
          return fromString(state.position).eq(position) ? true : undefined
        },
        20_000,
        `the daemon to settle candle ${index + 1} of ${candles.length}`
      )
    }
    run.child.kill("SIGTERM")
    expect(await run.exit, run.stderr.join("")).toBe(0)

    const actual = comparable(await venueFillRows(venue))
    const mismatches = compareFills(expected.fills, actual)
    process.stdout.write(
      `daemon parity (${String(rawParams.entry)} entries) over ${candles.length} candles: ${expected.fills.length} backtest fills ` +
        `(${expected.fills.filter((f) => f.liquidity === "maker").length} maker), ${actual.length} daemon fills, ${mismatches.length} mismatches\n`
    )
    expect(describeMismatches(mismatches)).toBe("")
    expect((await venuePnl(venue, candles)).toFixed()).toBe(expected.metrics.pnl.toFixed())

    // The daemon's own evidence of the run holds every candle and fill. Its PnL is the instance's own
    // book, measured against holding what it started with: the backtest's PnL without the move of
    // the BTC the account held from the first open to the last close.
    const recorded = events(run).find((e) => e.event === "paper.recorded" && e.strategy === "parity-sma")
    process.stdout.write(`recorded paper run: ${JSON.stringify(recorded)}\n`)
    const holding = devBalance("BTC").mul(candles[candles.length - 1]!.close.minus(candles[0]!.open))
    expect(recorded).toMatchObject({ candles: candles.length, fills: expected.fills.length, pnl: expected.metrics.pnl.minus(holding).toFixed() })
  } finally {
    await venue.close()
  }
}

const synthetic = (seed: number) =>
  syntheticCandles(60, { seed, startPrice: new Decimal(60000), tickSize: pair.tickSize, stepSize: pair.stepSize, startMs: Date.UTC(2024, 0, 1) })

describe("backtest and the paper-trading daemon, driven by the same tape", () => {
  it("produce identical fills and PnL for sma-crossover with market entries and exits", async () => {
    await playBoth({ fastPeriod: 3, slowPeriod: 8, entry: "market", quoteQty: "1000", maxSlippageBps: 50 }, synthetic(5), { fills: 4, maker: 0 })
  }, 90_000)

  it("produce identical fills and PnL with resting limit entries: maker fills, and a resting entry cancelled before the exit", async () => {
    await playBoth({ fastPeriod: 3, slowPeriod: 8, entry: "limit", limitOffsetBps: 5, quoteQty: "1000", maxSlippageBps: 50 }, synthetic(6), { fills: 4, maker: 2 })
  }, 90_000)
})
