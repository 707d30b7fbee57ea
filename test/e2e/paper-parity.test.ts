/**
 * Fill-level parity of paper trading, end to end: two daemons paper-trade the same
 * strategy (a market buy on every candle) on two svc-venues at once, one clean and
 * one answering every request 2.5 s late (an admin fault). `svcbot promote --to live`
 * replays each recorded run over the venue's own price steps: the clean run's fills
 * all match and the promotion is granted; the late run's orders reached the venue
 * past `paper.latencyToleranceMs`, their fills differ from the replay, and the
 * promotion is refused naming `paper.maxFillMismatches`.
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
const instance = { id: "buyer", strategy: plugin, symbol: "BTCUSDT", candleInterval: "1m", pollMs: 250, params: {}, allocation: { USDT: "1000" }, promotion }

interface Trial {
  readonly venue: TestVenue
  readonly configPath: string
  readonly dbPath: string
  readonly run: Run
}

/** A paper promotion of the instance's exact code and params, made before the run so the run counts toward live. */
const promotedToPaper = (dbPath: string): void => {
  const db = openDatabase({ path: dbPath })
  try {
    recordPromotion(db, { ...identityOf("buys-every-candle", plugin, {}), stage: "paper", sourcePath: plugin, evidence: { runIds: [], checks: [] }, promotedAtMs: Date.now() - 1 })
  } finally {
    db.close()
  }
}

const start = async (name: string, latencyMs: number): Promise<Trial> => {
  const venue = await startVenue({ tape: { kind: "synthetic", seed: 21 }, tickMs: 100, limits: { weightPerMinute: 1_000_000 } })
  const { configPath, dbPath } = paperConfig(name, venue.url, { engine: { cancelOnStop: true, fillSyncIntervalMs: 1000 }, strategies: [instance] })
  promotedToPaper(dbPath)
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
    try {
      await Promise.all([compared(clean), compared(late)])

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
    } finally {
      await Promise.all([clean.venue.close(), late.venue.close()])
    }
  }, 420_000)
})
