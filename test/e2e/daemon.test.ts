/**
 * The daemon as a user runs it: `svcbot run` as a child process against the
 * embedded svc-venue (or a venue of the test's own), checked through its log
 * lines and its SQLite database.
 */
import { spawn } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createServer, type AddressInfo } from "node:net"
import { afterAll, describe, expect, it } from "vitest"
import { events, killAll, pollUntil, query, ROOT, svcbot } from "../support/daemon.js"

afterAll(killAll)

const tempDir = () => mkdtempSync(join(tmpdir(), "svcbot-e2e-"))

const IN_FLIGHT = "('intent', 'submitting', 'unknown')"
const OPEN = "('accepted', 'pending', 'resting')"

describe("svcbot run (paper trading on the embedded venue)", () => {
  it("runs the default config for 20s: JSON logs, orders reach terminal kinds, fills in the database", async () => {
    const dir = tempDir()
    const dbPath = join(dir, "svcbot.db")
    const run = svcbot(["run", "--config", "config/default.json", "--for", "20s"], { SVC_DATABASE_PATH: dbPath })
    const code = await run.exit
    expect(run.stderr.join(""), run.stderr.join("")).toBe("")
    expect(code).toBe(0)
    const logged = events(run)
    const names = logged.map((e) => e.event)
    expect(names).toContain("venue.listening")
    expect(names).toContain("reconcile.completed")
    expect(names.filter((n) => n === "strategy.started")).toHaveLength(4)
    expect(names.filter((n) => n === "order.accepted").length).toBeGreaterThan(0)
    expect(names).toContain("app.stopped")
    const states = query<{ state: string; n: number }>(dbPath, "SELECT state, count(*) AS n FROM orders GROUP BY state")
    const byState = Object.fromEntries(states.map((s) => [s.state, s.n]))
    console.log(`orders by state after 20s: ${JSON.stringify(byState)}`)
    expect((byState.fill ?? 0) + (byState.cancelled ?? 0)).toBeGreaterThan(0)
    expect(query(dbPath, `SELECT 1 FROM orders WHERE state IN ${IN_FLIGHT} OR state IN ${OPEN}`)).toHaveLength(0)
    const fills = query<{ n: number }>(dbPath, "SELECT count(*) AS n FROM fills")[0]!.n
    console.log(`fills stored: ${fills}`)
    expect(fills).toBeGreaterThan(0)
  })

  it("stops on SIGTERM within its bound, cancelling open orders and leaving no in-flight intent", async () => {
    const dir = tempDir()
    const dbPath = join(dir, "svcbot.db")
    const run = svcbot(["run", "--config", "config/default.json"], { SVC_DATABASE_PATH: dbPath })
    await pollUntil(async () => (run.lines.filter((l) => l.includes('"order.accepted"')).length >= 5 ? true : undefined), 40_000, "resting orders", 100)
    run.child.kill("SIGTERM")
    const code = await run.exit
    expect(code).toBe(0)
    const names = events(run).map((e) => e.event)
    expect(names).toContain("app.stopping")
    expect(names).toContain("order.cancelled")
    expect(query(dbPath, `SELECT 1 FROM orders WHERE state IN ${IN_FLIGHT} OR state IN ${OPEN}`)).toHaveLength(0)
  })

  it("isolates a strategy that throws: it is paused with strategy.error, the others go on", async () => {
    const dir = tempDir()
    const plugin = join(ROOT, "test/e2e/fixtures/explodes.ts")
    const config = JSON.parse(readFileSync(join(ROOT, "config/default.json"), "utf8")) as { strategies: Array<Record<string, unknown>>; database: { path: string } }
    config.strategies = [config.strategies.find((s) => s.id === "btc-grid")!, { id: "bad-one", strategy: plugin, symbol: "BTCUSDT", pollMs: 500 }]
    config.database.path = join(dir, "svcbot.db")
    writeFileSync(join(dir, "config.json"), JSON.stringify(config))
    const run = svcbot(["run", "--config", join(dir, "config.json"), "--for", "8s"])
    expect(await run.exit).toBe(0)
    const logged = events(run)
    const errors = logged.filter((e) => e.event === "strategy.error")
    expect(errors.length).toBe(1)
    expect(errors[0]).toMatchObject({ strategy: "bad-one", trigger: "Ticker" })
    expect(String(errors[0]!.error)).toContain("boom")
    expect(logged.some((e) => e.event === "order.accepted")).toBe(true)
  })
})

describe("the README's front door", () => {
  it("npm start runs the paper-trading daemon on the embedded venue", async () => {
    const dbPath = join(tempDir(), "svcbot.db")
    const child = spawn("npm", ["start", "--silent", "--", "--for", "8s"], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", SVC_DATABASE_PATH: dbPath },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
    const code = await new Promise<number | null>((done) => child.on("exit", done))
    expect(code).toBe(0)
    const names = stdout.split("\n").filter((line) => line.startsWith("{")).map((line) => (JSON.parse(line) as { event: string }).event)
    expect(names).toContain("venue.listening")
    expect(names).toContain("strategy.started")
    expect(names).toContain("app.stopped")
    expect(query(dbPath, "SELECT 1 FROM intents").length).toBeGreaterThan(0)
  })
})

describe("svcbot run feeds history to indicators only", () => {
  it("intents returned for warm-up candles are dropped with one strategy.warmup event, and none is journaled", async () => {
    const dir = tempDir()
    const dbPath = join(dir, "svcbot.db")
    const plugin = join(ROOT, "test/e2e/fixtures/buys-every-candle.ts")
    writeFileSync(join(dir, "config.json"), JSON.stringify({ database: { path: dbPath }, strategies: [{ id: "eager", strategy: plugin, symbol: "BTCUSDT", pollMs: 500 }] }))
    const run = svcbot(["run", "--config", join(dir, "config.json"), "--for", "6s"])
    expect(await run.exit, run.stderr.join("")).toBe(0)
    const warmups = events(run).filter((e) => e.event === "strategy.warmup")
    expect(warmups).toHaveLength(1)
    expect(Number(warmups[0]!.dropped)).toBeGreaterThan(10)
    const journaled = query<{ tag: string }>(dbPath, "SELECT tag FROM intents WHERE strategy_id = 'eager'")
    console.log(`warm-up: ${String(warmups[0]!.dropped)} intents dropped, ${journaled.length} journaled from live candles`)
    // Only the newest candle of the first delivery is live, and at most one more closes in 6 s.
    expect(journaled.length).toBeLessThanOrEqual(2)
  })
})

describe("svcbot run refuses to start on bad input, writing nothing", () => {
  const refuse = async (config: unknown, env: Record<string, string> = {}) => {
    const dir = tempDir()
    const dbPath = join(dir, "svcbot.db")
    writeFileSync(join(dir, "config.json"), JSON.stringify({ database: { path: dbPath }, ...(config as object) }))
    const run = svcbot(["run", "--config", join(dir, "config.json"), "--for", "5s"], env)
    const code = await run.exit
    expect(existsSync(dbPath)).toBe(false)
    return { code, stderr: run.stderr.join("") }
  }

  it("a bad cron expression is a config error naming the field", async () => {
    const { code, stderr } = await refuse({ strategies: [{ id: "d", strategy: "dca", symbol: "BTCUSDT", schedule: "every day", params: { quoteQty: "50", maxSlippageBps: 30 } }] })
    expect(code).toBe(2)
    expect(stderr).toMatch(/strategies\[0\]\.schedule: "every day" is not a valid cron expression/)
  })

  it("an unknown strategy names the instance and the fix", async () => {
    const { code, stderr } = await refuse({ strategies: [{ id: "x", strategy: "moon-shot", symbol: "BTCUSDT" }] })
    expect(code).toBe(2)
    expect(stderr).toMatch(/config\.json: strategies\[0\]\.strategy: no strategy "moon-shot" \(use a shipped name/)
  })

  it("a health.port in use, or a health.host not of this machine, names it and the fix", async () => {
    const holder = createServer()
    await new Promise<void>((listening) => holder.listen(0, "127.0.0.1", listening))
    const port = (holder.address() as AddressInfo).port
    try {
      const inUse = await refuse({ health: { port } })
      expect(inUse.code).toBe(2)
      expect(inUse.stderr).toBe(`svcbot: health.port ${port} is in use on 127.0.0.1: stop what holds it, or set health.port (or SVC_HEALTH_PORT) to a free port\n`)
    } finally {
      holder.close()
    }
    // 192.0.2.0/24 is reserved for documentation: never an address of this machine.
    const elsewhere = await refuse({ health: { host: "192.0.2.1", port } })
    expect(elsewhere.code).toBe(2)
    expect(elsewhere.stderr).toBe("svcbot: health.host 192.0.2.1 is not an address of this machine: set health.host to one of its addresses (127.0.0.1, or 0.0.0.0 for all)\n")
  })

  it("bad strategy params name the field", async () => {
    const { code, stderr } = await refuse({ strategies: [{ id: "g", strategy: "grid", symbol: "BTCUSDT", params: { lowerPrice: "abc" } }] })
    expect(code).toBe(2)
    expect(stderr).toMatch(/config\.json: strategies\[0\]\.params\.lowerPrice: "abc" is not a decimal number/)
  })
})
