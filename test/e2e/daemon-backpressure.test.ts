/**
 * A strategy that keeps asking for what is refused must not spin: `svcbot run` with
 * a risk limit that refuses every quote of the market-maker. Its refusals of one
 * kind put it into backoff, then pause it; health names the pause; `svcbot resume`
 * lets it go on. The intents it gets to the engine stay under the per-minute ceiling.
 */
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { events, freeLoopbackPort, healthz, killAll, pollUntil, svcbot, waitForEvent } from "../support/daemon.js"

afterAll(killAll)

describe("back-pressure on a refused strategy", () => {
  it("backs off, pauses with the reason, shows in health, and resumes on `svcbot resume`", async () => {
    const dir = mkdtempSync(join(tmpdir(), "svcbot-backpressure-"))
    const dbPath = join(dir, "svcbot.db")
    const port = await freeLoopbackPort()
    const configPath = join(dir, "config.json")
    writeFileSync(
      configPath,
      JSON.stringify({
        database: { path: dbPath },
        health: { host: "127.0.0.1", port },
        // Every quote is worth more than 1 USDT: each one is refused by the risk check.
        engine: { risk: { maxOrderNotional: "1" }, backpressure: { refusalsBeforeBackoff: 3, initialBackoffMs: 500, maxBackoffMs: 2000, refusalsBeforePause: 8 } },
        strategies: [
          { id: "mm", strategy: "market-maker", symbol: "ETHUSDT", pollMs: 250, maxIntentsPerMinute: 30, params: { halfSpreadBps: 15, orderQty: "0.05", maxInventory: "0.5", skewBps: 20, requoteBps: 5 } }
        ]
      })
    )
    const started = Date.now()
    const run = svcbot(["run", "--config", configPath])
    const paused = await waitForEvent(run, "strategy.paused", 90_000, (e) => e.strategy === "mm")
    expect(paused.reason).toBe("8 intents in a row refused (order-notional-cap)")
    const logged = events(run)
    const backoffs = logged.filter((e) => e.event === "strategy.backoff" && e.strategy === "mm")
    const refusals = logged.filter((e) => e.event === "risk.refused" && e.strategy === "mm")
    const minutes = Math.max(1, (Date.now() - started) / 60_000)
    console.log(`back-pressure: ${refusals.length} refusals and ${backoffs.length} backoffs before the pause, in ${((Date.now() - started) / 1000).toFixed(1)} s`)
    expect(backoffs.length).toBeGreaterThan(0)
    // The pause comes with the 8th refusal the instance hears of. The market-maker places its bid and
    // ask together, so when the 7th refusal is the last one heard, a pair already at the engine makes 9.
    expect(refusals.length).toBeLessThanOrEqual(8 + 1)
    expect(refusals.length / minutes).toBeLessThanOrEqual(30)

    const health = await pollUntil(async () => {
      const answer = await healthz(`http://127.0.0.1:${port}/healthz`)
      return answer !== undefined && answer.status === 503 && answer.body.includes("mm is paused") ? answer : undefined
    }, 30_000, "health naming the pause", 100)
    expect(JSON.parse(health.body).status).toBe("degraded")

    // Paused: nothing more reaches the engine.
    const refusedWhenPaused = events(run).filter((e) => e.event === "risk.refused").length
    await waitForEvent(run, "heartbeat", 30_000, (e) => e.strategy === "mm" && e.paused !== null)
    expect(events(run).filter((e) => e.event === "risk.refused").length).toBe(refusedWhenPaused)

    const resume = svcbot(["resume", "mm", "--config", configPath])
    expect(await resume.exit, resume.stderr.join("")).toBe(0)
    expect(resume.lines.join("\n")).toContain("mm resumed")
    await waitForEvent(run, "strategy.resumed", 30_000, (e) => e.strategy === "mm")

    const unknown = svcbot(["resume", "nope", "--config", configPath])
    expect(await unknown.exit).toBe(2)
    expect(unknown.stderr.join("")).toContain('no strategy instance "nope"')

    run.child.kill("SIGTERM")
    expect(await run.exit).toBe(0)
  }, 150_000)
})
