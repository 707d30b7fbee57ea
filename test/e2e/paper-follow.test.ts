/**
 * Paper trading on another venue's prices, through the daemon: `venue.follow` makes
 * the embedded venue move with a followed venue's public market data (here a second
 * svc-venue on loopback whose price the test sets), with no key for the followed one.
 * The paper run's recorded price steps are the followed prices.
 */
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { events, killAll, pollUntil, query, svcbot, waitForEvent } from "../support/daemon.js"
import { startVenue } from "../support/venue.js"

afterAll(killAll)

describe("paper trading on followed prices", () => {
  it("the embedded venue follows the leader's price, and the paper evidence records it", async () => {
    const leader = await startVenue({ tape: { kind: "manual" } })
    try {
      await leader.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "61234.5" })
      const dir = mkdtempSync(join(tmpdir(), "svcbot-follow-"))
      const dbPath = join(dir, "svcbot.db")
      const configPath = join(dir, "config.json")
      writeFileSync(
        configPath,
        JSON.stringify({
          mode: "paper",
          venue: { embedded: true, follow: { baseUrl: leader.url, pollMs: 200 } },
          database: { path: dbPath },
          strategies: [
            { id: "grid", strategy: "grid", symbol: "BTCUSDT", pollMs: 250, params: { lowerPrice: "60000", upperPrice: "62000", levels: 5, orderQty: "0.001" }, allocation: { USDT: "2000", BTC: "0.01" } }
          ]
        })
      )
      const run = svcbot(["run", "--config", configPath])
      const listening = await waitForEvent(run, "venue.listening", 60_000)
      expect(listening).toMatchObject({ embedded: true, follow: leader.url })
      await waitForEvent(run, "config.loaded", 60_000)
      const recorded = (price: string) => async () =>
        query<{ n: number }>(dbPath, "SELECT count(*) AS n FROM paper_steps WHERE price = ?", price)[0]!.n > 0 ? true : undefined
      await pollUntil(recorded("61234.5"), 30_000, "the leader's price among the paper run's steps", 250)
      // The leader moves; the follower, its matching and the evidence move with it.
      await leader.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "60987.25" })
      await pollUntil(recorded("60987.25"), 30_000, "the leader's new price among the paper run's steps", 250)
      run.child.kill("SIGTERM")
      expect(await run.exit, run.stderr.join("")).toBe(0)
      expect(events(run).some((e) => e.event === "paper.recorded" && e.strategy === "grid")).toBe(true)
    } finally {
      await leader.close()
    }
  }, 120_000)
})
