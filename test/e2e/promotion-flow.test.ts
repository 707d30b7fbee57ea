/**
 * The promotion flow as docker-compose deploys it: the paper bot and the live bot
 * keep their own databases (`SVC_DATABASE_PATH`) and share one evidence store
 * (`SVC_EVIDENCE_PATH`), and every step is the command the docs show:
 * backtest, promote to paper, a paper run, promote to live refused with the gates
 * named, then granted under looser gates, then `--mode live` refused while the config
 * lists an unpromoted instance (writing nothing) and started with only the promoted one.
 *
 * Live mode needs https and refuses svc-venue unless the run is a staging run, so the
 * venue here serves TLS with a throwaway certificate and the configs say `staging`.
 *
 * A refused `promote --json` is a result a script reads: the refusal with its gates on stdout.
 */
import { Effect, Exit, Scope } from "effect"
import { existsSync, mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { devTradeKey } from "../../src/venue/Accounts.js"
import { serveVenue } from "../../src/venue/Server.js"
import { events, killAll, query, svcbot, waitForEvent } from "../support/daemon.js"
import { selfSigned } from "../support/tls.js"

const cleanups: Array<() => Promise<unknown>> = []
afterAll(async () => {
  killAll()
  for (const cleanup of cleanups.reverse()) await cleanup()
})

const SMA = { fastPeriod: 3, slowPeriod: 8, entry: "market", quoteQty: "100" }
const strictGates = { backtest: { minTrades: 0, maxDrawdownPct: 100, minSharpe: -100, minDays: 0, allowSynthetic: true } }
const looseGates = { ...strictGates, paper: { minDays: 0, maxTrackingErrorPct: 100 } }

describe("backtest -> paper -> live with the evidence store compose shares", () => {
  it("records evidence from the paper bot, refuses then grants live, and starts live only for the promoted instance", async () => {
    const tls = selfSigned("svcbot-flow")
    const dir = tls.dir
    const scope = Effect.runSync(Scope.make())
    cleanups.push(() => Effect.runPromise(Scope.close(scope, Exit.void)))
    const venue = await Effect.runPromise(
      Scope.extend(serveVenue({ port: 0, tls, tape: { kind: "synthetic", seed: 3 }, tickMs: 200 }), scope)
    )
    const evidence = join(dir, "evidence", "evidence.db")
    const paperDb = join(dir, "paper", "svcbot.db")
    const liveDb = join(dir, "live", "svcbot.db")
    const env = (database: string) => ({
      SVC_API_KEY: devTradeKey.keyId,
      SVC_API_SECRET: devTradeKey.secret,
      NODE_EXTRA_CA_CERTS: tls.certPath,
      SVC_DATABASE_PATH: database,
      SVC_EVIDENCE_PATH: evidence
    })
    const config = (name: string, body: Record<string, unknown>) => {
      const path = join(dir, name)
      writeFileSync(path, JSON.stringify({ venue: { embedded: false, baseUrl: venue.url, staging: true }, engine: { cancelOnStop: true }, ...body }))
      return path
    }
    const sma = (promotion: unknown) => ({ id: "btc-sma", strategy: "sma-crossover", symbol: "BTCUSDT", pollMs: 250, params: SMA, allocation: { USDT: "1000" }, promotion })
    const idle = { id: "eth-grid", strategy: "grid", symbol: "ETHUSDT", pollMs: 250, params: { lowerPrice: "2900", upperPrice: "3100", levels: 5, orderQty: "0.01" }, allocation: { USDT: "500" } }
    const paperConfig = config("paper.json", { mode: "paper", strategies: [sma(strictGates), idle] })
    const looseConfig = config("paper-loose.json", { mode: "paper", strategies: [sma(looseGates), idle] })
    const liveBoth = config("live-both.json", { mode: "live", strategies: [sma(looseGates), idle] })
    const liveOne = config("live.json", { mode: "live", strategies: [sma(looseGates)] })

    const backtest = svcbot(["backtest", "--strategy", "sma-crossover", "--params", JSON.stringify(SMA), "--synthetic", "42:2000"], env(paperDb))
    expect(await backtest.exit, backtest.stderr.join("")).toBe(0)
    expect(query<{ n: number }>(evidence, "SELECT count(*) AS n FROM runs WHERE kind = 'backtest'")[0]!.n).toBe(1)

    const toPaper = svcbot(["promote", "btc-sma", "--to", "paper", "--config", paperConfig], env(paperDb))
    expect(await toPaper.exit, toPaper.stderr.join("")).toBe(0)

    const paper = svcbot(["run", "--config", paperConfig, "--for", "8s"], env(paperDb))
    expect(await paper.exit, paper.stderr.join("")).toBe(0)
    expect(events(paper).filter((e) => e.event === "paper.recorded").map((e) => e.strategy).sort()).toEqual(["btc-sma", "eth-grid"])
    // The paper bot writes evidence to the shared store, not to its own database.
    expect(query<{ n: number }>(evidence, "SELECT count(*) AS n FROM runs WHERE kind = 'paper' AND status = 'completed'")[0]!.n).toBe(2)
    expect(query<{ n: number }>(paperDb, "SELECT count(*) AS n FROM runs")[0]!.n).toBe(0)

    const refused = svcbot(["promote", "btc-sma", "--to", "live", "--config", paperConfig], env(paperDb))
    expect(await refused.exit).toBe(1)
    const refusal = refused.stderr.join("")
    console.log(refusal)
    expect(refusal).toMatch(/paper\.minDays: required >= 7, evidence 0\.0/)
    expect(refusal).toMatch(/run \d+ \(completed\): 0 of \d+ paper fills differ/)

    const granted = svcbot(["promote", "btc-sma", "--to", "live", "--config", looseConfig], env(paperDb))
    expect(await granted.exit, granted.stderr.join("")).toBe(0)
    expect(granted.lines.join("\n")).toMatch(/btc-sma|sma-crossover promoted to live/)

    // A live start with an unpromoted instance is refused before anything is written.
    const blocked = svcbot(["run", "--config", liveBoth], env(liveDb))
    expect(await blocked.exit).toBe(2)
    expect(blocked.stderr.join("")).toMatch(/strategy eth-grid may not trade live: grid was never promoted to live/)
    expect(existsSync(liveDb), "a refused live start creates no database").toBe(false)

    const live = svcbot(["run", "--config", liveOne], env(liveDb))
    const loaded = await waitForEvent(live, "config.loaded", 60_000)
    expect(loaded.strategies).toEqual(["btc-sma"])
    live.child.kill("SIGTERM")
    expect(await live.exit, live.stderr.join("")).toBe(0)
    // Live trading records no paper evidence.
    expect(query<{ n: number }>(evidence, "SELECT count(*) AS n FROM runs WHERE kind = 'paper'")[0]!.n).toBe(2)
  }, 180_000)
})

describe("svcbot promote --json refused", () => {
  it("prints the refusal with every gate, the failed ones apart, as one JSON object on stdout, and exits 1", async () => {
    const evidence = join(mkdtempSync(join(tmpdir(), "svcbot-promote-json-")), "evidence.db")
    const params = JSON.stringify(SMA)
    const backtest = svcbot(["backtest", "--strategy", "sma-crossover", "--params", params, "--synthetic", "42:2000", "--db", evidence])
    expect(await backtest.exit, backtest.stderr.join("")).toBe(0)

    // The default gates: a synthetic tape of under two days is not evidence for paper.
    const refused = svcbot(["promote", "sma-crossover", "--to", "paper", "--params", params, "--db", evidence, "--json"])
    expect(await refused.exit).toBe(1)
    expect(refused.lines).toHaveLength(1)
    const refusal = JSON.parse(refused.lines[0]!) as {
      strategy: string
      stage: string
      sourceHash: string
      paramsHash: string
      failed: Array<{ gate: string; required: string; actual: string; passed: boolean }>
      checks: Array<{ gate: string; passed: boolean }>
    }
    expect(refusal).toMatchObject({ strategy: "sma-crossover", stage: "paper", sourceHash: expect.stringMatching(/^[0-9a-f]{64}$/), paramsHash: expect.stringMatching(/^[0-9a-f]{64}$/) })
    const failed = refusal.failed.map((c) => c.gate)
    expect(failed).toEqual(expect.arrayContaining(["backtest.marketData", "backtest.minDays"]))
    expect(refusal.failed.find((c) => c.gate === "backtest.minDays")).toMatchObject({ required: ">= 30", passed: false })
    expect(refusal.checks.filter((c) => !c.passed).map((c) => c.gate)).toEqual(failed)
    expect(refusal.checks.map((c) => c.gate)).toContain("backtest.run")
    // People read the same refusal on stderr.
    expect(refused.stderr.join("")).toMatch(/svcbot: {3}- backtest\.minDays: required >= 30, evidence 1\.3889/)
  }, 120_000)
})
