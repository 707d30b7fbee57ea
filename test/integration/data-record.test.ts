/**
 * `svcbot data record` against a real svc-venue over loopback whose clock runs 60 times
 * faster than real time, so that a candle closes every real second: the recorder appends
 * each candle once it has closed (equal to the venue's final candle), stops on SIGTERM with
 * whole lines only, and a restart catches up on what closed meanwhile with no duplicate and
 * no gap.
 */
import { Effect, Exit, Scope } from "effect"
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { serveVenue, type RunningVenue } from "../../src/venue/Server.js"
import { killAll, pollUntil, svcbot } from "../support/daemon.js"

afterAll(killAll)

const SPEED = 60
const MINUTE_MS = 60_000

const rowsOf = (path: string): Array<string> => {
  try {
    return readFileSync(path, "utf8").split("\n").slice(1).filter((line) => line !== "")
  } catch {
    return []
  }
}

const openTimeOf = (row: string): number => Number(row.split(",")[0])

describe("svcbot data record", () => {
  let scope: Scope.CloseableScope
  let running: RunningVenue
  let dir: string
  beforeAll(async () => {
    const startMs = Date.now()
    scope = Effect.runSync(Scope.make())
    running = await Effect.runPromise(
      Scope.extend(serveVenue({ tape: { kind: "synthetic", seed: 3 }, tickMs: 250, clock: () => startMs + (Date.now() - startMs) * SPEED }), scope)
    )
    dir = mkdtempSync(join(tmpdir(), "svcbot-record-"))
  })
  afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)))

  /** The venue's candles by open time, as CSV rows of its own answer's text. */
  const venueRows = async (): Promise<Map<number, string>> => {
    const answer = await fetch(`${running.url}/api/spot/candles?symbol=BTCUSDT&interval=1m&limit=1000`)
    const candles = ((await answer.json()) as { candles: Array<Record<string, string | number>> }).candles
    return new Map(candles.map((c) => [Number(c.openTime), [c.openTime, c.open, c.high, c.low, c.close, c.volume].join(",")]))
  }

  const recordUntil = async (out: string, rows: number) => {
    const run = svcbot(["data", "record", "--symbol", "BTCUSDT", "--out", out, "--base-url", running.url, "--poll-ms", "200"])
    await pollUntil(async () => (rowsOf(out).length >= rows ? true : undefined), 60_000, `${rows} recorded candles`, 50)
    run.child.kill("SIGTERM")
    expect(await run.exit).toBe(0)
    return run
  }

  it("appends closed candles only, stops cleanly on SIGTERM, and continues without duplicates or gaps", async () => {
    const out = join(dir, "btcusdt-1m.csv")
    const startedAtMs = running.venue.now()
    const first = await recordUntil(out, 4)
    expect(first.lines.join("\n")).toMatch(/^BTCUSDT 1m: recorded \d+ candles to .*btcusdt-1m\.csv; the last opened /)
    const text = readFileSync(out, "utf8")
    expect(text.endsWith("\n")).toBe(true)
    const firstRows = rowsOf(out)
    // A new file starts at the candle that had just closed, not with the venue's history.
    expect(openTimeOf(firstRows[0]!)).toBeGreaterThanOrEqual(Math.floor(startedAtMs / MINUTE_MS) * MINUTE_MS - MINUTE_MS)

    // Stopped for a few venue minutes, then started again on the same file.
    await pollUntil(async () => (running.venue.now() >= openTimeOf(firstRows.at(-1)!) + 4 * MINUTE_MS ? true : undefined), 30_000, "venue minutes to pass")
    await recordUntil(out, firstRows.length + 6)
    const rows = rowsOf(out)
    expect(rows.slice(0, firstRows.length)).toEqual(firstRows)
    for (let i = 1; i < rows.length; i++) expect(openTimeOf(rows[i]!) - openTimeOf(rows[i - 1]!), `row ${i + 1}`).toBe(MINUTE_MS)

    // Every row is the venue's candle as it stands now that it has long closed: none was written while still forming.
    const venue = await venueRows()
    for (const row of rows) expect(row).toBe(venue.get(openTimeOf(row)))
    const lastRow = openTimeOf(rows.at(-1)!)
    expect(lastRow + MINUTE_MS).toBeLessThanOrEqual(running.venue.now())
  })

  it("refuses a file of another interval", async () => {
    const out = join(dir, "one-minute.csv")
    writeFileSync(out, "open_time_ms,open,high,low,close,volume\n1764000000000,100,101,99,100.5,2\n1764000060000,100.5,102,100,101,3\n")
    const run = svcbot(["data", "record", "--symbol", "BTCUSDT", "--interval", "5m", "--out", out, "--base-url", running.url])
    expect(await run.exit).toBe(2)
    expect(run.stderr.join("")).toContain("its candles are 1 minute(s) apart, not the 5 of --interval")
    expect(readFileSync(out, "utf8").split("\n").length).toBe(4)
  })
})
