/**
 * A paper run of the daemon is promotion evidence: when `svcbot run` stops, each
 * strategy instance has one `paper` row in the runs table under exactly the
 * identity `promote` and `liveStatus` compute (strategy, source hash, params
 * hash), covering the candles that closed during the run; `svcbot promote --to
 * live` then judges that evidence by the paper gates.
 */
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import { identityOf } from "../../src/promotion/Promotion.js"
import { STRATEGIES_DIR } from "../../src/strategy/Loader.js"
import { decodeAccounts, devAccounts, toPairSpec } from "../../src/venue/Accounts.js"
import { syntheticCandles } from "../../src/venue/Tape.js"
import { events, killAll, query, svcbot, waitForEvent } from "../support/daemon.js"
import { startVenue } from "../support/venue.js"

afterAll(killAll)

const CANDLES = 30
const pair = toPairSpec(decodeAccounts(devAccounts).pairs[0]!)
const candles = syntheticCandles(CANDLES, { seed: 8, startPrice: new Decimal(60000), tickSize: pair.tickSize, stepSize: pair.stepSize, startMs: Date.UTC(2024, 0, 1) })

const instances = [
  {
    id: "btc-sma",
    strategy: "sma-crossover",
    symbol: "BTCUSDT",
    candleInterval: "1m",
    pollMs: 250,
    params: { fastPeriod: 3, slowPeriod: 8, entry: "market", quoteQty: "1000.0", maxSlippageBps: 50 }
  },
  {
    id: "btc-grid",
    strategy: "grid",
    symbol: "BTCUSDT",
    pollMs: 250,
    params: { lowerPrice: "59000", upperPrice: "61000", levels: 11, orderQty: "0.002", retryAfterMs: 30000 }
  }
]

interface RunRow {
  kind: string
  strategy: string
  source_hash: string
  params_hash: string
  symbol: string
  data_source: string
  data_from_ms: number
  data_to_ms: number
  candles: number
  tracking_error_pct: string | null
}

describe("svcbot run in paper mode records its evidence", () => {
  it("writes one paper run per instance with the promotion identity, and promote --to live judges it by the paper gates", async () => {
    const venue = await startVenue({ tape: { kind: "csv", candles }, tickMs: 0 })
    try {
      const dir = mkdtempSync(join(tmpdir(), "svcbot-paper-run-"))
      const dbPath = join(dir, "svcbot.db")
      const configPath = join(dir, "config.json")
      writeFileSync(
        configPath,
        JSON.stringify({ mode: "paper", venue: { embedded: false, baseUrl: venue.url }, database: { path: dbPath }, engine: { cancelOnStop: true }, strategies: instances })
      )
      const run = svcbot(["run", "--config", configPath], { SVC_API_KEY: venue.keyId, SVC_API_SECRET: venue.secret })
      await waitForEvent(run, "config.loaded", 60_000)
      // Every candle of the tape closes while the daemon runs.
      await venue.admin("POST", "/_venue/tape", { steps: CANDLES })
      run.child.kill("SIGTERM")
      expect(await run.exit, run.stderr.join("")).toBe(0)

      const recorded = events(run).filter((e) => e.event === "paper.recorded")
      expect(recorded.map((e) => e.strategy).sort()).toEqual(["btc-grid", "btc-sma"])
      const rows = query<RunRow>(dbPath, "SELECT * FROM runs ORDER BY run_id")
      expect(rows).toHaveLength(instances.length)
      for (const instance of instances) {
        const identity = identityOf(instance.strategy, join(STRATEGIES_DIR, `${instance.strategy}.ts`), instance.params)
        const row = rows.find((r) => r.strategy === instance.strategy)
        expect(row, instance.id).toMatchObject({
          kind: "paper",
          source_hash: identity.sourceHash,
          params_hash: identity.paramsHash,
          symbol: "BTCUSDT",
          data_source: `venue:${venue.url}`,
          candles: CANDLES,
          data_from_ms: candles[0]!.openTimeMs,
          data_to_ms: candles[CANDLES - 1]!.openTimeMs + 60_000
        })
        expect(row!.tracking_error_pct, `${instance.id} measured its tracking error`).not.toBeNull()
      }

      const promote = svcbot(["promote", "btc-sma", "--to", "live", "--config", configPath, "--db", dbPath])
      expect(await promote.exit).toBe(1)
      const refusal = promote.stderr.join("")
      // Half an hour of tape is evidence, just not seven days of it.
      expect(refusal).toMatch(/paper\.minDays: required >= 7, evidence 0\.02083/)
      expect(refusal).not.toMatch(/paper\.minDays: required >= \d+, evidence none/)
      expect(refusal).not.toMatch(/paper\.maxTrackingErrorPct: required <= [\d.]+, evidence none/)
    } finally {
      await venue.close()
    }
  }, 90_000)
})
