/**
 * `GET /metrics` of a running daemon, the way Prometheus scrapes it: `svcbot run`
 * as a child process on the embedded svc-venue places orders and gets fills, and
 * its exposition is read as text and held against the daemon's SQLite ledger.
 * The health server listens where it does by default, with a token from a Docker-style secret file.
 */
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { events, freeLoopbackPort, killAll, pollUntil, query, svcbot, waitForEvent } from "../support/daemon.js"
import { maskKeyId } from "../../src/log/Redaction.js"
import { devTradeKey } from "../../src/venue/Accounts.js"

afterAll(killAll)

interface Sample {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly value: number
}

interface Family {
  readonly type: string
  readonly samples: Array<Sample>
}

const NAME = "[a-zA-Z_:][a-zA-Z0-9_:]*"
const SAMPLE = new RegExp(`^(${NAME})(?:\\{(.*)\\})? (\\S+)(?: -?\\d+)?$`)
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)/y
const SUFFIXES: Readonly<Record<string, ReadonlyArray<string>>> = { histogram: ["_bucket", "_sum", "_count"], summary: ["_sum", "_count"] }

const number = (text: string, line: string): number => {
  if (text === "+Inf") return Infinity
  if (text === "-Inf") return -Infinity
  if (text === "NaN") return NaN
  if (!/^-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$/.test(text)) throw new Error(`not a sample value: ${line}`)
  return Number(text)
}

/** Parses the Prometheus text exposition format strictly: every line is a comment, a TYPE, a HELP or a sample of a typed family. */
const parseExposition = (text: string): ReadonlyMap<string, Family> => {
  const families = new Map<string, Family>()
  const familyOf = (sample: string): Family | undefined => {
    const direct = families.get(sample)
    if (direct !== undefined) return direct
    for (const [name, family] of families) if ((SUFFIXES[family.type] ?? []).some((suffix) => sample === `${name}${suffix}`)) return family
    return undefined
  }
  for (const line of text.split("\n")) {
    if (line === "") continue
    const type = new RegExp(`^# TYPE (${NAME}) (counter|gauge|histogram|summary|untyped)$`).exec(line)
    if (type !== null) {
      if (families.has(type[1]!)) throw new Error(`a second TYPE for ${type[1]}`)
      families.set(type[1]!, { type: type[2]!, samples: [] })
      continue
    }
    if (new RegExp(`^# HELP ${NAME} `).test(line)) continue
    if (line.startsWith("#")) throw new Error(`a comment that is neither HELP nor TYPE: ${line}`)
    const sample = SAMPLE.exec(line)
    if (sample === null) throw new Error(`not a sample line: ${line}`)
    const labels: Record<string, string> = {}
    const body = sample[2] ?? ""
    LABEL.lastIndex = 0
    while (LABEL.lastIndex < body.length) {
      const label = LABEL.exec(body)
      if (label === null) throw new Error(`unreadable labels: ${line}`)
      labels[label[1]!] = label[2]!.replace(/\\(["\\n])/g, (_, c: string) => (c === "n" ? "\n" : c))
    }
    const family = familyOf(sample[1]!)
    if (family === undefined) throw new Error(`a sample of no TYPEd family: ${line}`)
    family.samples.push({ name: sample[1]!, labels, value: number(sample[3]!, line) })
  }
  return families
}

const samplesOf = (families: ReadonlyMap<string, Family>, name: string, labels: Readonly<Record<string, string>> = {}): ReadonlyArray<Sample> =>
  [...families.values()].flatMap((family) => family.samples).filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))

const valueOf = (families: ReadonlyMap<string, Family>, name: string, labels: Readonly<Record<string, string>>): number | undefined => {
  const found = samplesOf(families, name, labels)
  return found.length === 1 ? found[0]!.value : undefined
}

const DCA = "dca-metrics"
const TOKEN = "e2e-metrics-token_0123456789abcdef"
const GRID = "grid-metrics"

describe("GET /metrics of a running daemon", () => {
  it("parses, counts what the ledger holds, shows PnL, budgets and latency, and carries no secret", async () => {
    const port = await freeLoopbackPort()
    const dir = mkdtempSync(join(tmpdir(), "svcbot-metrics-"))
    const setup = { configPath: join(dir, "config.json"), dbPath: join(dir, "svcbot.db"), tokenPath: join(dir, "svc_health_token") }
    writeFileSync(setup.tokenPath, `${TOKEN}\n`)
    writeFileSync(
      setup.configPath,
      JSON.stringify({
        mode: "paper",
        venue: { embedded: true, tape: "synthetic:42", tickMs: 500, settleMs: 50 },
        database: { path: setup.dbPath },
        health: { port },
        heartbeatMs: 1000,
        strategies: [
          // Two buys and no more: the ledger stops moving, so the counters can be held against it exactly.
          { id: DCA, strategy: "dca", symbol: "BTCUSDT", schedule: "*/2 * * * * *", params: { quoteQty: "50", maxQuoteTotal: "100" }, allocation: { USDT: "1000" } },
          {
            id: GRID,
            strategy: "grid",
            symbol: "BTCUSDT",
            pollMs: 500,
            params: { lowerPrice: "59000", upperPrice: "61000", levels: 5, orderQty: "0.002" },
            allocation: { USDT: "10000", BTC: "0.1" }
          }
        ]
      })
    )
    const run = svcbot(["run", "--config", setup.configPath], { SVC_HEALTH_TOKEN_FILE: setup.tokenPath })
    await waitForEvent(run, "config.loaded", 60_000)
    const url = `http://127.0.0.1:${port}/metrics`
    const listening = events(run).find((e) => e.event === "health.listening")
    expect(listening?.metrics).toBe(url)
    expect((await fetch(url)).status).toBe(401)
    expect((await fetch(url, { headers: { authorization: "Bearer not-the-token-not-the-token-not" } })).status).toBe(401)

    const dcaFills = () =>
      query<{ n: number }>(setup.dbPath, "SELECT count(*) AS n FROM fills f JOIN orders o ON o.client_order_id = f.client_order_id WHERE o.strategy_id = ?", DCA)[0]!.n
    const dcaOrders = (states: string) => query<{ n: number }>(setup.dbPath, `SELECT count(*) AS n FROM orders WHERE strategy_id = ? AND state IN (${states})`, DCA)[0]!.n
    // Both buys filled and nothing of the instance still working.
    await pollUntil(async () => (dcaOrders("'fill'") >= 2 && dcaOrders("'intent', 'submitting', 'accepted', 'pending', 'resting', 'unknown'") === 0 ? true : undefined), 60_000, "two filled dca buys", 200)
    const ledgerFills = dcaFills()

    let response: Response | undefined
    let text = ""
    let families: ReadonlyMap<string, Family> = new Map()
    // The scrape that has caught up: fills reach the counter after the ledger, PnL with the next heartbeat.
    await pollUntil(
      async () => {
        response = await fetch(url, { headers: { authorization: `Bearer ${TOKEN}` } })
        text = await response.text()
        families = parseExposition(text)
        const counted = samplesOf(families, "svcbot_fills_total", { strategy: DCA }).reduce((sum, s) => sum + s.value, 0)
        const realized = valueOf(families, "svcbot_realized_pnl", { strategy: DCA, symbol: "BTCUSDT" })
        return counted === ledgerFills && realized !== undefined ? true : undefined
      },
      30_000,
      `svcbot_fills_total{strategy="${DCA}"} to reach the ledger's ${ledgerFills} fills, and a heartbeat's PnL`,
      250
    ).catch((error: unknown) => {
      throw new Error(`${String(error)}\nlast scrape:\n${text.split("\n").filter((l) => l.startsWith("svcbot_fills") || l.startsWith("svcbot_realized")).join("\n")}`)
    })

    expect(response!.status).toBe(200)
    expect(response!.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/)
    expect(ledgerFills).toBeGreaterThanOrEqual(2)
    expect(samplesOf(families, "svcbot_fills_total", { strategy: DCA }).every((s) => s.labels.side === "buy" && s.labels.symbol === "BTCUSDT")).toBe(true)

    // Orders: every journaled intent counted once, every fill of an order counted once.
    expect(valueOf(families, "svcbot_orders_total", { strategy: DCA, symbol: "BTCUSDT", state: "intent" })).toBe(dcaOrders("'intent', 'submitting', 'accepted', 'pending', 'resting', 'fill', 'rejected', 'cancelled', 'unknown', 'not_placed', 'refused', 'lost'"))
    expect(valueOf(families, "svcbot_orders_total", { strategy: DCA, symbol: "BTCUSDT", state: "fill" })).toBe(dcaOrders("'fill'"))
    expect(valueOf(families, "svcbot_orders_total", { strategy: GRID, symbol: "BTCUSDT", state: "accepted" }) ?? 0).toBeGreaterThan(0)

    // PnL, position and open orders from the heartbeat; a bought position is held.
    expect(valueOf(families, "svcbot_position", { strategy: DCA, symbol: "BTCUSDT" }) ?? 0).toBeGreaterThan(0)
    expect(valueOf(families, "svcbot_fees", { strategy: DCA, symbol: "BTCUSDT" })).toBeDefined()
    expect(valueOf(families, "svcbot_open_orders", { strategy: GRID, symbol: "BTCUSDT" })).toBeDefined()

    // The rate budget of the key, as the exchange's headers report it, under the key's masked id.
    const key = { key: maskKeyId(devTradeKey.keyId) }
    expect(valueOf(families, "svcbot_budget_used_weight_1m", key) ?? 0).toBeGreaterThan(0)
    expect(valueOf(families, "svcbot_budget_weight_limit_1m", key) ?? 0).toBeGreaterThan(0)

    // Latency: placements were timed, and each series' +Inf bucket holds all its observations.
    const counts = samplesOf(families, "svcbot_request_duration_seconds_count")
    expect(counts.some((s) => s.labels.endpoint?.startsWith("POST /api/") === true && s.labels.status === "2xx" && s.value > 0)).toBe(true)
    for (const count of counts) {
      expect(valueOf(families, "svcbot_request_duration_seconds_bucket", { ...count.labels, le: "+Inf" }), JSON.stringify(count.labels)).toBe(count.value)
      expect(count.labels.endpoint, "no query string in an endpoint label").not.toContain("?")
    }

    // The process's default metrics are there.
    expect(families.get("process_cpu_user_seconds_total")?.type).toBe("counter")
    expect(families.get("nodejs_eventloop_lag_p99_seconds")?.type).toBe("gauge")

    // Bounded labels and no secrets: no order id or tag, no key secret, no full key id.
    const orderIds = query<{ client_order_id: string | null; tag: string | null }>(setup.dbPath, "SELECT client_order_id, tag FROM orders")
    const labelValues = new Set([...families.values()].flatMap((family) => family.samples.flatMap((s) => Object.values(s.labels))))
    for (const row of orderIds) {
      if (row.client_order_id !== null) expect(labelValues.has(row.client_order_id), row.client_order_id).toBe(false)
      if (row.tag !== null) expect(labelValues.has(row.tag), row.tag).toBe(false)
    }
    expect(text).not.toContain(devTradeKey.secret)
    expect(text).not.toContain(devTradeKey.keyId)
    expect(run.lines.join("\n")).not.toContain(TOKEN)

    run.child.kill("SIGTERM")
    expect(await run.exit).toBe(0)
  })
})

describe("the exposition parser", () => {
  it("refuses what Prometheus would refuse, so a parse means something", () => {
    expect(() => parseExposition('# TYPE a counter\na{x="1"} 1\n')).not.toThrow()
    expect(() => parseExposition("a 1\n")).toThrow(/no TYPEd family/)
    expect(() => parseExposition('# TYPE a counter\na{x=1} 1\n')).toThrow(/unreadable labels/)
    expect(() => parseExposition("# TYPE a counter\na one\n")).toThrow(/not a sample value/)
    expect(() => parseExposition("# TYPE a gauge\n# TYPE a gauge\n")).toThrow(/second TYPE/)
  })
})
