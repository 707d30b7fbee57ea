/**
 * The backtest half of parity: one synthetic tape, played by the backtester
 * in-process and by a real svc-venue over loopback stepped through its admin tape
 * route, with the backtest's own orders sent over the signed API at the same tape
 * moments. Fills (price, quantity, side, liquidity) and PnL must be identical.
 */
import { Either } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type BacktestResult, runBacktest } from "../../src/backtest/Backtest.js"
import { compareFills, describeMismatches } from "../../src/backtest/Parity.js"
import { Decimal } from "../../src/domain/Decimal.js"
import type { Intent, PlaceIntent } from "../../src/domain/Intent.js"
import { defaultDialect } from "../../src/svc/Dialect.js"
import { decodeParams, type StrategyDefinition } from "../../src/strategy/Strategy.js"
import { decodeAccounts, devAccounts, devTradeKey, toPairSpec } from "../../src/venue/Accounts.js"
import type { VenueCandle } from "../../src/venue/PricePath.js"
import { syntheticCandles } from "../../src/venue/Tape.js"
import smaCrossover from "../../strategies/sma-crossover.js"
import { comparable, devBacktest, venueFillRows, venuePnl } from "../support/parity.js"
import { eventually, startVenue, type TestVenue } from "../support/venue.js"

const CANDLES = 400
const pair = toPairSpec(decodeAccounts(devAccounts).pairs[0]!)
const candles = syntheticCandles(CANDLES, { seed: 21, startPrice: new Decimal(60000), tickSize: pair.tickSize, stepSize: pair.stepSize, startMs: Date.UTC(2024, 0, 1) })

/** Every intent the strategy emitted, by the tape time it emitted it at, in order. */
const recordIntents = <P, S>(definition: StrategyDefinition<P, S>, log: Map<number, Array<Intent>>): StrategyDefinition<P, S> => {
  const wrap = <E>(handler: ((s: S, e: E, v: Parameters<NonNullable<typeof definition.onCandle>>[2]) => { readonly state: S; readonly intents: ReadonlyArray<Intent> }) | undefined) =>
    handler === undefined
      ? undefined
      : (state: S, event: E, view: Parameters<NonNullable<typeof definition.onCandle>>[2]) => {
          const out = handler(state, event, view)
          if (out.intents.length > 0) log.set(view.now, [...(log.get(view.now) ?? []), ...out.intents])
          return out
        }
  const wrapped = { ...definition }
  const handlers = { onCandle: wrap(definition.onCandle), onOrderUpdate: wrap(definition.onOrderUpdate), onFill: wrap(definition.onFill) }
  for (const [name, handler] of Object.entries(handlers)) if (handler !== undefined) Object.assign(wrapped, { [name]: handler })
  return wrapped
}

const placement = (intent: PlaceIntent): { readonly path: string; readonly body: Record<string, unknown> } => {
  const paths = defaultDialect.paths
  switch (intent.type) {
    case "limit":
      return { path: paths.limitOrder, body: { symbol: intent.symbol, side: intent.side, baseQty: intent.baseQty, limitPrice: intent.limitPrice } }
    case "stop-limit":
      return {
        path: paths.stopLimitOrder,
        body: { symbol: intent.symbol, side: intent.side, baseQty: intent.baseQty, limitPrice: intent.limitPrice, stopPrice: intent.stopPrice }
      }
    case "market":
      return {
        path: paths.marketOrder,
        body:
          intent.side === "buy"
            ? { symbol: intent.symbol, side: "buy", quoteOrderQty: intent.quoteOrderQty, maxSlippageBps: intent.maxSlippageBps }
            : { symbol: intent.symbol, side: "sell", baseQty: intent.baseQty, maxSlippageBps: intent.maxSlippageBps }
      }
  }
}


describe("backtest and svc-venue over loopback, driven by the same tape", () => {
  let venue: TestVenue
  beforeAll(async () => {
    venue = await startVenue({ tape: { kind: "csv", candles }, tickMs: 0, settleMs: 50, limits: { ordersPer10s: 100_000, weightPerMinute: 1_000_000 } })
  })
  afterAll(async () => {
    await venue?.close()
  })

  it("produce identical fills and PnL for sma-crossover with limit entries and market exits", async () => {
    const intents = new Map<number, Array<Intent>>()
    const params = Either.getOrThrow(decodeParams(smaCrossover, "parity", { fastPeriod: 4, slowPeriod: 12, entry: "limit", limitOffsetBps: 3, quoteQty: "3000" }))
    const backtest: BacktestResult = Either.getOrThrow(
      runBacktest(devBacktest(recordIntents(smaCrossover, intents), params, candles))
    )
    expect(backtest.fills.filter((f) => f.liquidity === "maker").length).toBeGreaterThan(0)
    expect(backtest.fills.filter((f) => f.liquidity === "taker").length).toBeGreaterThan(0)

    const clientOrderIds = new Map<string, string>()
    let awaitingSettlement = false
    let refused = 0
    // Intents of the last close would settle only after the tape ends; the backtest never settles them.
    for (const candle of candles.slice(0, -1)) {
      if (awaitingSettlement) {
        await eventually(async () => {
          const { orders } = (await venue.admin("GET", `/_venue/orders?uid=${devTradeKey.uid}`)) as { orders: ReadonlyArray<{ kind: string }> }
          return orders.some((o) => o.kind === "pending") ? undefined : true
        }, 5000, "settlement of the orders placed at the previous close")
      }
      await venue.admin("POST", "/_venue/tape", { steps: 1 })
      awaitingSettlement = false
      for (const intent of intents.get(closeOf(candle)) ?? []) {
        if (intent.type === "cancel") {
          const clientOrderId = clientOrderIds.get(intent.tag)
          if (clientOrderId !== undefined) expect((await venue.signed("POST", defaultDialect.paths.cancelOrder, { clientOrderId })).status).toBe(200)
          continue
        }
        const { path, body } = placement(intent)
        const answer = await venue.signed("POST", path, body)
        if (answer.status === 202) {
          clientOrderIds.set(intent.tag, answer.json.clientOrderId as string)
          awaitingSettlement = true
        } else {
          refused++
        }
      }
    }
    const lastMomentIntents = (intents.get(closeOf(candles[candles.length - 1]!)) ?? []).filter((i) => i.type !== "cancel").length
    expect(refused).toBe(backtest.orders.refused)
    expect(clientOrderIds.size).toBeGreaterThan(0)
    expect(backtest.orders.placed - lastMomentIntents).toBeGreaterThan(0)

    const venueFills = comparable(await venueFillRows(venue))
    const mismatches = compareFills(backtest.fills, venueFills)
    process.stdout.write(`parity: ${backtest.fills.length} backtest fills, ${venueFills.length} venue fills, ${mismatches.length} mismatches\n`)
    expect(describeMismatches(mismatches)).toBe("")
    expect((await venuePnl(venue, candles)).toFixed()).toBe(backtest.metrics.pnl.toFixed())
  })
})

function closeOf(candle: VenueCandle): number {
  return candle.openTimeMs + 60_000
}
