/**
 * `svcbot data download` against a real svc-venue over loopback: the file holds exactly the
 * venue's candles whatever the page size, an interrupted download (killed, or cut mid-line)
 * finishes into the same file an uninterrupted one writes, the backtester reads it, the key's
 * weight budget is not touched, a 429 is waited out, and bad input exits 2 naming the fix.
 */
import { Command } from "@effect/cli"
import { NodeContext } from "@effect/platform-node"
import { Cause, Effect, Exit, Option } from "effect"
import { copyFileSync, mkdtempSync, readFileSync, truncateSync, writeFileSync } from "node:fs"
import * as http from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest"
import { dataCommand } from "../../src/cli/data.js"
import { SETTLED_AFTER_CLOSE_MS } from "../../src/data/MarketData.js"
import { CliError } from "../../src/cli/errors.js"
import { killAll, pollUntil, svcbot } from "../support/daemon.js"
import { startVenue, type TestVenue } from "../support/venue.js"

afterAll(killAll)

const cli = Command.run(Command.make("svcbot").pipe(Command.withSubcommands([dataCommand])), { name: "svcbot", version: "test" })

interface CliRun {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/** `svcbot data ARGS` in-process: what it printed, and the exit code main.ts would give. */
const data = async (args: ReadonlyArray<string>): Promise<CliRun> => {
  const out: Array<string> = []
  const err: Array<string> = []
  const log = vi.spyOn(console, "log").mockImplementation((...parts: Array<unknown>) => void out.push(parts.join(" ")))
  const error = vi.spyOn(console, "error").mockImplementation((...parts: Array<unknown>) => void err.push(parts.join(" ")))
  try {
    const exit = await Effect.runPromiseExit(cli(["node", "svcbot", "data", ...args]).pipe(Effect.provide(NodeContext.layer)))
    const failure = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined
    if (Exit.isFailure(exit) && !(failure instanceof CliError)) throw new Error(`svcbot data failed unexpectedly: ${Cause.pretty(exit.cause)}`)
    if (failure instanceof CliError) err.push(`svcbot: ${failure.message}`)
    return { code: failure instanceof CliError ? failure.exitCode : 0, stdout: out.join("\n"), stderr: err.join("\n") }
  } finally {
    log.mockRestore()
    error.mockRestore()
  }
}

/** The venue's candles as CSV rows, from its own answer's text (amounts as it wrote them). */
const venueRows = async (venue: TestVenue): Promise<Array<string>> => {
  const answer = await venue.raw("GET", "/api/spot/candles?symbol=BTCUSDT&interval=1m&limit=1000")
  expect(answer.status).toBe(200)
  const candles = (JSON.parse(answer.text) as { candles: Array<Record<string, string | number>> }).candles
  return candles.map((c) => [c.openTime, c.open, c.high, c.low, c.close, c.volume].join(","))
}

const HEADER = "open_time_ms,open,high,low,close,volume"
const rowsOf = (path: string): Array<string> => readFileSync(path, "utf8").split("\n").slice(1).filter((line) => line !== "")

describe("svcbot data download", () => {
  let venue: TestVenue
  let dir: string
  let expected: Array<string>
  let fromMs: number
  beforeAll(async () => {
    // The synthetic tape's 240 minutes of history and no steps: the candles stay as they are.
    venue = await startVenue({ tape: { kind: "synthetic", seed: 11 }, tickMs: 0, limits: { weightWindowMs: 3_600_000 } })
    dir = mkdtempSync(join(tmpdir(), "svcbot-data-"))
    expected = await venueRows(venue)
    expect(expected.length).toBe(240)
    fromMs = Number(expected[0]!.split(",")[0])
    // The history's last candle closed at the minute the venue started in, and a download takes a
    // candle only once it has settled (SETTLED_AFTER_CLOSE_MS after its close): a venue started in
    // the first seconds of a minute would otherwise lose its last candle to every download.
    const settledAtMs = Number(expected[expected.length - 1]!.split(",")[0]) + 60_000 + SETTLED_AFTER_CLOSE_MS
    await new Promise((done) => setTimeout(done, Math.max(0, settledAtMs - Date.now()) + 50))
  })
  afterAll(() => venue.close())

  const download = (out: string, ...more: Array<string>) =>
    data(["download", "--symbol", "BTCUSDT", "--interval", "1m", "--from", String(fromMs), "--out", out, "--base-url", venue.url, ...more])

  it("pages through the range and writes exactly the venue's candles, in time order", async () => {
    const out = join(dir, "paged.csv")
    const run = await download(out, "--page-size", "50", "--json")
    expect(run.code).toBe(0)
    const summary = JSON.parse(run.stdout)
    expect(summary).toMatchObject({ written: 240, requests: 5, resumedAfterMs: null, gaps: [], firstOpenTimeMs: fromMs })
    expect(readFileSync(out, "utf8")).toBe([HEADER, ...expected, ""].join("\n"))
    expect(run.stderr).toContain("100%")

    const whole = join(dir, "whole.csv")
    expect((await download(whole)).code).toBe(0)
    expect(readFileSync(whole, "utf8")).toBe(readFileSync(out, "utf8"))
  })

  it("skips the years before the venue's history in a few requests instead of a page each", async () => {
    const out = join(dir, "since-2020.csv")
    const run = await data(["download", "--symbol", "BTCUSDT", "--from", "2020-01-01", "--out", out, "--base-url", venue.url, "--json"])
    expect(run.code).toBe(0)
    expect(rowsOf(out)).toEqual(expected)
    // About 3.6 million minutes are 3,600 pages of 1000; halving the range takes about 22 single-candle pages.
    expect(JSON.parse(run.stdout).requests).toBeLessThan(40)
  })

  it("continues a file cut in the middle of a line: the partial row is fetched again, nothing doubled", async () => {
    const full = join(dir, "full.csv")
    expect((await download(full, "--page-size", "70")).code).toBe(0)
    const text = readFileSync(full, "utf8")
    const cut = join(dir, "cut.csv")
    copyFileSync(full, cut)
    const lineStart = text.indexOf(expected[100]!)
    truncateSync(cut, lineStart + 17)
    const run = await download(cut, "--page-size", "70", "--json")
    expect(run.code).toBe(0)
    const summary = JSON.parse(run.stdout)
    expect(summary).toMatchObject({ written: 140, droppedPartialLine: true, resumedAfterMs: Number(expected[99]!.split(",")[0]) })
    expect(readFileSync(cut, "utf8")).toBe(text)

    // Killed while writing the header: the file starts over.
    writeFileSync(cut, HEADER.slice(0, 9))
    expect((await download(cut)).code).toBe(0)
    expect(readFileSync(cut, "utf8")).toBe(text)

    // Run again on a complete file: nothing to add, nothing changed.
    const again = await download(cut, "--json")
    expect(JSON.parse(again.stdout)).toMatchObject({ written: 0, requests: 0 })
    expect(readFileSync(cut, "utf8")).toBe(text)
  })

  it("finishes a download killed mid-way into the file an uninterrupted one writes", async () => {
    const out = join(dir, "killed.csv")
    // Slow answers and small pages: the download is still going when it is killed.
    await venue.admin("POST", "/_venue/faults", { latencyMs: 150 })
    try {
      const run = svcbot(["data", "download", "--symbol", "BTCUSDT", "--from", String(fromMs), "--out", out, "--base-url", venue.url, "--page-size", "5"])
      const rowsAtKill = await pollUntil(
        async () => {
          try {
            const rows = rowsOf(out).length
            return rows >= 30 ? rows : undefined
          } catch {
            return undefined
          }
        },
        60_000,
        "the download to write 30 rows"
      )
      run.child.kill("SIGKILL")
      await run.exit
      expect(rowsAtKill).toBeLessThan(240)
      expect(rowsOf(out).length).toBeLessThan(240)
    } finally {
      await venue.admin("POST", "/_venue/faults", {})
    }
    const resumed = await download(out, "--page-size", "5", "--json")
    expect(resumed.code).toBe(0)
    expect(JSON.parse(resumed.stdout).written).toBeGreaterThan(0)
    expect(readFileSync(out, "utf8")).toBe([HEADER, ...expected, ""].join("\n"))
  })

  it("writes a file the backtester runs on", async () => {
    const out = join(dir, "backtest.csv")
    expect((await download(out)).code).toBe(0)
    const run = svcbot([
      "backtest",
      "--data",
      out,
      "--strategy",
      "sma-crossover",
      "--params",
      '{"fastPeriod": 5, "slowPeriod": 20, "entry": "market", "quoteQty": "100"}',
      "--json",
      "--db",
      join(dir, "evidence.db")
    ])
    expect(await run.exit).toBe(0)
    const result = JSON.parse(run.lines.join("\n")) as { metrics: { candles: number } }
    expect(result.metrics.candles).toBe(240)
  })

  it("spends none of the key's weight budget: public reads carry no key", async () => {
    const used = async () => Number((await venue.signed("GET", "/api/wallets/spot")).headers["x-svc-used-weight-1m"])
    const before = await used()
    expect((await download(join(dir, "budget.csv"), "--page-size", "10")).code).toBe(0)
    const after = await used()
    // The one weight window of this venue lasts an hour: the only charge since is the second wallet read.
    expect(after).toBe(2 * before)
  })

  it("waits out a 429's Retry-After and asks for the same page again", async () => {
    let refused = 0
    const proxy = http.createServer((request, response) => {
      if (refused === 0 && request.url?.includes("before=") === true) {
        refused += 1
        response.writeHead(429, { "content-type": "application/json", "retry-after": "1" })
        response.end(JSON.stringify({ code: "RATE_LIMITED", bucket: "weight-1m", msg: "slow down" }))
        return
      }
      const upstream = http.request(`${venue.url}${request.url}`, { method: request.method, headers: request.headers }, (answer) => {
        response.writeHead(answer.statusCode ?? 502, answer.headers)
        answer.pipe(response)
      })
      request.pipe(upstream)
    })
    await new Promise<void>((done) => proxy.listen(0, "127.0.0.1", done))
    const port = (proxy.address() as { port: number }).port
    try {
      const out = join(dir, "limited.csv")
      const run = await data(["download", "--symbol", "BTCUSDT", "--from", String(fromMs), "--out", out, "--base-url", `http://127.0.0.1:${port}`, "--page-size", "100", "--json"])
      expect(run.code).toBe(0)
      expect(refused).toBe(1)
      expect(JSON.parse(run.stdout)).toMatchObject({ written: 240, rateLimitedWaits: 1, requests: 4 })
      expect(run.stderr).toContain("waiting 1 s as its Retry-After asks")
      expect(rowsOf(out)).toEqual(expected)
    } finally {
      await new Promise<void>((done) => proxy.close(() => done()))
    }
  })

  it("refuses bad input with exit 2 and a line naming the fix", async () => {
    const out = join(dir, "bad.csv")
    const cases: Array<[ReadonlyArray<string>, string]> = [
      [["--symbol", "DOGEUSDT", "--from", String(fromMs)], "has no pair DOGEUSDT; pass one it lists to --symbol: BTCUSDT"],
      [["--symbol", "BTCUSDT", "--interval", "7x", "--from", String(fromMs)], '--interval must be a count of minutes, hours or days such as 1m'],
      [["--symbol", "BTCUSDT", "--interval", "2m", "--from", String(fromMs)], "refuses candles of interval 2m"],
      [["--symbol", "BTCUSDT", "--from", "2026-03-02", "--to", "2026-03-01"], "--from 2026-03-02T00:00:00.000Z must be before --to 2026-03-01T00:00:00.000Z"],
      [["--symbol", "BTCUSDT", "--from", "last tuesday"], "--from must be epoch milliseconds or a UTC date such as 2024-03-01"],
      [["--symbol", "BTCUSDT", "--from", "2999-01-01"], "there is nothing to download yet"],
      [["--symbol", "BTCUSDT", "--from", String(fromMs), "--page-size", "5000"], "--page-size must be from 1 to 1000"]
    ]
    for (const [args, message] of cases) {
      const run = await data(["download", ...args, "--out", out, "--base-url", venue.url])
      expect(run.code, args.join(" ")).toBe(2)
      expect(run.stderr).toContain(message)
    }
    const foreign = join(dir, "foreign.csv")
    writeFileSync(foreign, "time,price\n1,2\n")
    const refused = await download(foreign)
    expect(refused.code).toBe(2)
    expect(refused.stderr).toContain("is not a file svcbot data wrote; give --out a new file")
    expect(readFileSync(foreign, "utf8")).toBe("time,price\n1,2\n")

    const oneMinute = join(dir, "one-minute.csv")
    expect((await download(oneMinute)).code).toBe(0)
    const fiveMinutes = await data(["download", "--symbol", "BTCUSDT", "--interval", "5m", "--from", String(fromMs), "--out", oneMinute, "--base-url", venue.url])
    expect(fiveMinutes.code).toBe(2)
    expect(fiveMinutes.stderr).toContain("its candles are 1 minute(s) apart, not the 5 of --interval")

    // The built CLI end to end: one line on stderr, exit 2.
    const spawned = svcbot(["data", "download", "--symbol", "BTCUSDT", "--from", String(fromMs), "--out", out])
    expect(await spawned.exit).toBe(2)
    expect(spawned.stderr.join("").trim()).toBe("svcbot: no exchange address: pass --base-url https://exchange.example (or set SVC_BASE_URL)")
  })
})
