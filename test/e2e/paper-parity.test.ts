/**
 * Fill-level parity of paper trading, end to end: two daemons paper-trade the same
 * strategy (a market buy on every candle) on two svc-venues at once, one clean and
 * one answering every request 2.5 s late (an admin fault). `svcbot promote --to live`
 * replays each recorded run over the venue's own price steps: the clean run's fills
 * all match and the promotion is granted; the late run's orders reached the venue
 * past `paper.latencyToleranceMs`, their fills differ from the replay, and the
 * promotion is refused naming `paper.maxFillMismatches`. A third daemon runs the
 * market-maker cleanly: quotes that rest, get cancelled and are replaced (the replay
 * applies each cancel when the venue did), and its clean run passes the same gate.
 *
 * The strategy trades on one-minute candles in real time, so this test waits for two
 * candles to close after the start (about two minutes); both daemons run side by side.
 */
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { identityOf } from "../../src/promotion/Promotion.js"
import { recordPromotion } from "../../src/promotion/Records.js"
import { openDatabase } from "../../src/store/Database.js"
import { killAll, paperConfig, pollUntil, query, ROOT, svcbot, waitForEvent, type Run } from "../support/daemon.js"
import { startVenue, type TestVenue } from "../support/venue.js"

afterAll(killAll)

const plugin = join(ROOT, "test/e2e/fixtures/buys-every-candle.ts")
// Gates loose enough that only parity can refuse: the run is minutes, not days.
const promotion = { paper: { minDays: 0, maxTrackingErrorPct: 100, maxFillMismatches: 0, latencyToleranceMs: 1000 } }
const buyer = { id: "buyer", strategy: plugin, symbol: "BTCUSDT", candleInterval: "1m", pollMs: 250, params: {}, allocation: { USDT: "1000" }, promotion }
// Quotes a few basis points away, so that the synthetic tape fills some and moves others away within minutes.
// It places and cancels a few orders a second: under svc-venue's default order budget (per 10 s) the client
// holds some back for seconds, and past the default `maxIntentsPerMinute` the daemon refuses placements the
// backtest would make; both are mismatches, as they should be, so both limits are raised here.
const maker = {
  id: "maker",
  strategy: "market-maker",
  symbol: "BTCUSDT",
  candleInterval: "1m",
  pollMs: 250,
  params: { halfSpreadBps: 4, orderQty: "0.001", maxInventory: "0.01", requoteBps: 2 },
  allocation: { USDT: "1000", BTC: "0.02" },
  maxIntentsPerMinute: 10_000,
  promotion
}
type Instance = typeof buyer | (typeof maker & { readonly maxIntentsPerMinute: number })
const sourceOf = (instance: Instance): string => (instance.strategy.endsWith(".ts") ? instance.strategy : join(ROOT, "strategies", `${instance.strategy}.ts`))

interface Trial {
  readonly venue: TestVenue
  readonly configPath: string
  readonly dbPath: string
  readonly run: Run
}

/** A paper promotion of the instance's exact code and params, made before the run so the run counts toward live. */
const promotedToPaper = (dbPath: string, name: string, instance: Instance): void => {
  const db = openDatabase({ path: dbPath })
  try {
    const sourcePath = sourceOf(instance)
    recordPromotion(db, { ...identityOf(name, sourcePath, instance.params), stage: "paper", sourcePath, evidence: { runIds: [], checks: [] }, promotedAtMs: Date.now() - 1 })
  } finally {
    db.close()
  }
}

const start = async (name: string, latencyMs: number, strategyName = "buys-every-candle", instance: Instance = buyer): Promise<Trial> => {
  // Budgets far above what the strategies use: an order the client holds back for the next 10 s window reaches
  // the venue seconds late, which the replay rightly counts against the run (see the market maker's note below).
  const venue = await startVenue({ tape: { kind: "synthetic", seed: 21 }, tickMs: 100, limits: { weightPerMinute: 1_000_000, ordersPer10s: 100_000, ordersPerDay: 10_000_000 } })
  const { configPath, dbPath } = paperConfig(name, venue.url, { engine: { cancelOnStop: true, fillSyncIntervalMs: 1000 }, strategies: [instance] })
  promotedToPaper(dbPath, strategyName, instance)
  if (latencyMs > 0) await venue.admin("POST", "/_venue/faults", { latencyMs })
  const run = svcbot(["run", "--config", configPath], { SVC_API_KEY: venue.keyId, SVC_API_SECRET: venue.secret })
  return { venue, configPath, dbPath, run }
}

/** Two candles closed after the start: the fill of the first live candle's buy lies inside the replayed span. */
const compared = async (trial: Trial): Promise<void> => {
  await waitForEvent(trial.run, "config.loaded", 90_000)
  await pollUntil(
    async () => (query<{ n: number }>(trial.dbPath, "SELECT count(*) AS n FROM paper_candles WHERE warmup = 0")[0]!.n >= 3 ? true : undefined),
    200_000,
    "three live candles",
    500
  )
  trial.run.child.kill("SIGTERM")
  expect(await trial.run.exit, trial.run.stderr.join("")).toBe(0)
}

describe("paper parity on fills", () => {
  it("a clean paper run matches its replay fill for fill and is promoted; a run whose orders were late is refused on paper.maxFillMismatches", async () => {
    const clean = await start("parity-clean", 0)
    const late = await start("parity-late", 2500)
    const making = await start("parity-maker", 0, "market-maker", maker)
    try {
      await Promise.all([compared(clean), compared(late), compared(making)])

      const granted = svcbot(["promote", "buyer", "--to", "live", "--config", clean.configPath, "--db", clean.dbPath])
      const grantedCode = await granted.exit
      const grantedText = granted.lines.join("\n")
      console.log(`clean run:\n${grantedText}\n${granted.stderr.join("")}`)
      expect(grantedCode, granted.stderr.join("")).toBe(0)
      expect(grantedText).toMatch(/paper\.maxFillMismatches: required <= 0, evidence 0/)
      const cleanFills = Number(/: 0 of (\d+) paper fills differ/.exec(grantedText)?.[1])
      expect(cleanFills, "the clean run's compared fills").toBeGreaterThanOrEqual(1)

      const refused = svcbot(["promote", "buyer", "--to", "live", "--config", late.configPath, "--db", late.dbPath])
      const refusedCode = await refused.exit
      const refusal = refused.stderr.join("")
      console.log(`late run:\n${refusal}`)
      expect(refusedCode).toBe(1)
      expect(refusal).toMatch(/paper\.maxFillMismatches: required <= 0, evidence [1-9]/)
      expect(refusal).toMatch(/buy-\d+#0 fill 0: expected buy .* taker fee .*, got buy .* taker fee/)
      const live = query<{ n: number }>(late.dbPath, "SELECT count(*) AS n FROM promotions WHERE stage = 'live'")[0]!.n
      expect(live, "a refused promotion writes no record").toBe(0)

      const cancels = query<{ n: number; timed: number }>(
        making.dbPath,
        "SELECT count(*) AS n, count(reached_venue_at) AS timed FROM paper_intents WHERE kind = 'cancel'"
      )[0]!
      const maker = svcbot(["promote", "maker", "--to", "live", "--config", making.configPath, "--db", making.dbPath])
      const makerCode = await maker.exit
      const makerText = maker.lines.join("\n")
      console.log(`market-maker run (${cancels.n} cancels recorded, ${cancels.timed} with the venue's time):\n${makerText}\n${maker.stderr.join("")}`)
      expect(makerCode, maker.stderr.join("")).toBe(0)
      expect(makerText).toMatch(/paper\.maxFillMismatches: required <= 0, evidence 0/)
      expect(Number(/: 0 of (\d+) paper fills differ/.exec(makerText)?.[1]), "the market-maker's compared fills").toBeGreaterThanOrEqual(1)
      expect(cancels.timed, "cancels the venue applied, with its time").toBeGreaterThanOrEqual(1)
    } finally {
      await Promise.all([clean.venue.close(), late.venue.close(), making.venue.close()])
    }
  }, 420_000)
})
