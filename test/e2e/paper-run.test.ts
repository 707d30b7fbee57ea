/**
 * A paper run of the daemon is promotion evidence written as it happens: each
 * instance gets a `running` run at start under the identity `promote` computes,
 * extended by checkpoints with the venue's price steps, the candles given to the
 * strategy, its placement intents and its fills; `kill -9` keeps what was
 * checkpointed and the next start marks it `interrupted`; a clean stop marks the
 * new run `completed`. Every instance is judged on its own book: one that never
 * fills has PnL exactly 0 while the price moves, and an order beyond an instance's
 * allocation is refused saying so.
 */
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import { identityOf } from "../../src/promotion/Promotion.js"
import { STRATEGIES_DIR } from "../../src/strategy/Loader.js"
import { events, killAll, paperConfig, pollUntil, query, svcbot, waitForEvent } from "../support/daemon.js"
import { startVenue } from "../support/venue.js"

afterAll(killAll)

const GRID = { lowerPrice: "59000", upperPrice: "61000", levels: 11, orderQty: "0.002", retryAfterMs: 2000 }
// Crossings of a 50- and 60-candle average cannot happen within a test run: this instance never trades.
const IDLE = { fastPeriod: 50, slowPeriod: 60, entry: "market", quoteQty: "100", maxSlippageBps: 50 }

const instances = [
  { id: "grid", strategy: "grid", symbol: "BTCUSDT", pollMs: 250, params: GRID, allocation: { USDT: "5000", BTC: "0.05" } },
  { id: "idle", strategy: "sma-crossover", symbol: "BTCUSDT", pollMs: 250, params: IDLE, allocation: { USDT: "1000" } },
  // 0.002 BTC at ~60,000 needs ~120 USDT: more than this allocation holds.
  { id: "starved", strategy: "grid", symbol: "BTCUSDT", pollMs: 250, params: GRID, allocation: { USDT: "50" } },
  // Driven by tickers alone: its run records the tickers it was given and the candles its replay walks.
  { id: "mm", strategy: "market-maker", symbol: "ETHUSDT", pollMs: 250, params: { halfSpreadBps: 15, orderQty: "0.05", maxInventory: "0.5", skewBps: 20, requoteBps: 5 }, allocation: { USDT: "2000", ETH: "1" } }
]

interface RunRow {
  run_id: number
  kind: string
  status: string
  instance_id: string
  strategy: string
  source_hash: string
  params_hash: string
  candles: number
  metrics: string
  setup: string
}

interface VenueFill {
  readonly clientOrderId: string
  readonly side: "buy" | "sell"
  readonly baseQty: string
  readonly quoteQty: string
  readonly fee: string
  readonly feeAsset: string
}

const count = (dbPath: string, table: string, runId: number): number => query<{ n: number }>(dbPath, `SELECT count(*) AS n FROM ${table} WHERE run_id = ?`, runId)[0]!.n

describe("svcbot run in paper mode records its evidence as it happens", () => {
  it("checkpoints each instance's run, keeps a killed run as interrupted, and judges each instance on its own book", async () => {
    const venue = await startVenue({ tape: { kind: "synthetic", seed: 11 }, tickMs: 100 })
    try {
      const { configPath, dbPath } = paperConfig("paper-run", venue.url, { heartbeatMs: 1000, engine: { cancelOnStop: true }, strategies: instances })
      const env = { SVC_API_KEY: venue.keyId, SVC_API_SECRET: venue.secret }

      const first = svcbot(["run", "--config", configPath], env)
      await waitForEvent(first, "config.loaded", 60_000)
      // Wait until a checkpoint holds fills of the grid and the market maker's tickers and candles:
      // evidence is on disk before the kill. Each instance checkpoints on its own, so the one does
      // not say the other's is there.
      await pollUntil(
        async () => {
          const held = (instance: string, table: string) =>
            query<{ n: number }>(dbPath, `SELECT count(*) AS n FROM ${table} t JOIN runs r ON r.run_id = t.run_id WHERE r.instance_id = ?`, instance)[0]!.n
          return held("grid", "paper_fills") > 0 && held("grid", "paper_steps") > 0 && held("mm", "paper_tickers") > 0 && held("mm", "paper_candles") > 0 ? true : undefined
        },
        60_000,
        "a checkpoint with the grid's fills and price steps and the market maker's tickers and candles",
        200
      )
      first.child.kill("SIGKILL")
      await first.exit

      const killed = query<RunRow>(dbPath, "SELECT * FROM runs WHERE kind = 'paper' ORDER BY run_id")
      expect(killed.map((r) => [r.instance_id, r.status])).toEqual([
        ["grid", "running"],
        ["idle", "running"],
        ["starved", "running"],
        ["mm", "running"]
      ])
      for (const instance of instances) {
        const identity = identityOf(instance.strategy, join(STRATEGIES_DIR, `${instance.strategy}.ts`), instance.params)
        expect(killed.find((r) => r.instance_id === instance.id), instance.id).toMatchObject({ strategy: instance.strategy, source_hash: identity.sourceHash, params_hash: identity.paramsHash })
      }
      const grid = killed.find((r) => r.instance_id === "grid")!
      const kept = { steps: count(dbPath, "paper_steps", grid.run_id), fills: count(dbPath, "paper_fills", grid.run_id), intents: count(dbPath, "paper_intents", grid.run_id) }
      console.log(`killed run ${grid.run_id} kept ${kept.steps} price steps, ${kept.intents} intents, ${kept.fills} fills`)
      expect(kept.steps).toBeGreaterThan(0)
      expect(kept.intents).toBeGreaterThan(0)
      const reached = query<{ n: number }>(dbPath, "SELECT count(*) AS n FROM paper_intents WHERE run_id = ? AND reached_venue_at IS NOT NULL", grid.run_id)[0]!.n
      expect(reached, "orders record when they reached the venue").toBeGreaterThan(0)
      expect(JSON.parse(grid.setup)).toMatchObject({ instanceId: "grid", allocation: { USDT: "5000", BTC: "0.05" }, startBalances: { USDT: "5000", BTC: "0.05" } })

      // The starved instance sees its own 50 USDT, not the account's, and places nothing it cannot pay for;
      // whatever it asks for beyond its allocation is refused for that, never placed.
      const refusals = query<{ refusal: string }>(dbPath, "SELECT DISTINCT refusal FROM intents WHERE strategy_id = 'starved' AND outcome = 'refused'")
      expect(refusals.map((r) => r.refusal).filter((r) => r !== "allocation-exceeded")).toEqual([])
      expect(query<{ n: number }>(dbPath, "SELECT count(*) AS n FROM orders WHERE strategy_id = 'starved' AND client_order_id IS NOT NULL")[0]!.n).toBe(0)

      const mm = killed.find((r) => r.instance_id === "mm")!
      expect(count(dbPath, "paper_tickers", mm.run_id), "the tickers the market maker was given").toBeGreaterThan(0)
      expect(count(dbPath, "paper_candles", mm.run_id), "candles for its replay, though it is given none").toBeGreaterThan(0)

      const second = svcbot(["run", "--config", configPath], env)
      const interrupted = await waitForEvent(second, "paper.interrupted", 60_000)
      expect(interrupted.runs).toBe(4)
      await waitForEvent(second, "config.loaded", 60_000)
      await waitForEvent(second, "heartbeat", 30_000, (e) => e.strategy === "grid")
      second.child.kill("SIGTERM")
      expect(await second.exit, second.stderr.join("")).toBe(0)

      const after = query<RunRow>(dbPath, "SELECT * FROM runs WHERE kind = 'paper' ORDER BY run_id")
      expect(after.map((r) => r.status)).toEqual(["interrupted", "interrupted", "interrupted", "interrupted", "completed", "completed", "completed", "completed"])
      expect(count(dbPath, "paper_steps", grid.run_id), "an interrupted run keeps what it recorded").toBe(kept.steps)
      expect(count(dbPath, "paper_fills", grid.run_id)).toBe(kept.fills)
      expect(events(second).filter((e) => e.event === "paper.recorded").map((e) => e.strategy).sort()).toEqual(["grid", "idle", "mm", "starved"])

      // The resumed grid's run starts where the killed one left it: its book moved by its fills, its resting orders carried.
      const resumed = JSON.parse(after.find((r) => r.status === "completed" && r.instance_id === "grid")!.setup) as {
        startBalances: Record<string, string>
        carried?: Array<{ tag: string; clientOrderId: string; baseQty: string }>
      }
      console.log(`resumed grid run: start balances ${JSON.stringify(resumed.startBalances)}, ${resumed.carried?.length ?? 0} orders carried`)
      expect(resumed.startBalances, "the book after the killed run's fills, not the allocation").not.toEqual({ USDT: "5000", BTC: "0.05" })
      expect(resumed.carried?.length ?? 0, "the grid's resting orders").toBeGreaterThan(0)
      const journaled = new Set(query<{ client_order_id: string }>(dbPath, "SELECT client_order_id FROM orders WHERE strategy_id = 'grid' AND client_order_id IS NOT NULL").map((o) => o.client_order_id))
      for (const order of resumed.carried ?? []) expect(journaled.has(order.clientOrderId), order.tag).toBe(true)

      // The idle instance held its allocation while the price moved: its PnL is exactly 0.
      const prices = query<{ n: number }>(dbPath, "SELECT count(DISTINCT price) AS n FROM paper_steps WHERE run_id = ?", after.find((r) => r.status === "completed" && r.instance_id === "idle")!.run_id)[0]!.n
      expect(prices, "the price moved during the run").toBeGreaterThan(1)
      for (const idle of after.filter((r) => r.instance_id === "idle")) {
        const metrics = JSON.parse(idle.metrics) as { pnl: string; fills: number; initialEquity: string }
        expect(metrics).toMatchObject({ pnl: "0", fills: 0, initialEquity: "1000" })
      }
      // Each book is its allocation plus its own fills, as the venue recorded them.
      const gridOrders = new Set(query<{ client_order_id: string }>(dbPath, "SELECT client_order_id FROM orders WHERE strategy_id = 'grid' AND client_order_id IS NOT NULL").map((o) => o.client_order_id))
      const venueFills = ((await venue.admin("GET", `/_venue/fills?uid=${venue.uid}`)) as { fills: ReadonlyArray<VenueFill> }).fills.filter((f) => gridOrders.has(f.clientOrderId))
      expect(venueFills.length).toBeGreaterThan(0)
      const expected = { USDT: new Decimal("5000"), BTC: new Decimal("0.05") }
      for (const f of venueFills) {
        const buy = f.side === "buy"
        expected.BTC = expected.BTC.plus(buy ? f.baseQty : `-${f.baseQty}`)
        expected.USDT = expected.USDT.plus(buy ? `-${f.quoteQty}` : f.quoteQty)
        expected[f.feeAsset as "USDT" | "BTC"] = expected[f.feeAsset as "USDT" | "BTC"].minus(f.fee)
      }
      const status = svcbot(["status", "--config", configPath, "--json"], env)
      expect(await status.exit, status.stderr.join("")).toBe(0)
      const report = status.lines.map((line) => JSON.parse(line) as { pnl?: Array<{ strategy: string; balances: Record<string, string> | null; netPnl: string }> }).find((line) => line.pnl !== undefined)
      const books = new Map(report!.pnl!.map((p) => [p.strategy, p]))
      console.log(`grid: ${venueFills.length} fills on the venue, own book ${JSON.stringify(books.get("grid")?.balances)}`)
      expect(books.get("grid")?.balances).toEqual({ USDT: expected.USDT.toFixed(), BTC: expected.BTC.toFixed() })
      expect(books.get("idle")).toMatchObject({ balances: { USDT: "1000" }, netPnl: "0" })
      expect(books.get("starved")).toMatchObject({ balances: { USDT: "50" }, netPnl: "0" })

      // Heartbeats show each allocated instance's own balances.
      const beat = events(second).filter((e) => e.event === "heartbeat" && e.strategy === "idle").pop()
      expect(beat?.balances).toEqual({ USDT: "1000" })
      expect(beat?.netPnl).toBe("0")
    } finally {
      await venue.close()
    }
  }, 180_000)
})
