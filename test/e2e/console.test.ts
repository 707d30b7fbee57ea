/**
 * The operator's console against a running paper daemon on the embedded venue: the page in
 * headless Chromium (no error, nothing fetched from elsewhere, every instance, fills arriving
 * live, pause and resume from the page), the API against the CLI on the same database, the
 * controls' token rules, and what an open page costs the daemon in CPU.
 */
import { execFile } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { setTimeout as delay } from "node:timers/promises"
import { chromium, type Browser, type Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { events, freeLoopbackPort, killAll, pollUntil, query, ROOT, type Run, svcbot, waitForEvent } from "../support/daemon.js"

const CHROMIUM = "/usr/bin/chromium"
const haveChromium = existsSync(CHROMIUM)
if (!haveChromium) process.stderr.write(`console browser test skipped: ${CHROMIUM} is absent (apt-get install -y chromium)\n`)
const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"]
const ARTIFACTS = join("test", "artifacts")
const TOKEN = "console-test-token-0123456789abcdefghijklmnop"
const HEARTBEAT_MS = 10_000

afterAll(killAll)

/** One CLI command's stdout, parsed. */
const cli = (args: ReadonlyArray<string>): Promise<unknown> =>
  new Promise((done, fail) =>
    execFile(process.execPath, [join(ROOT, "bin/svcbot.js"), ...args], { cwd: ROOT, env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "" }, timeout: 120_000 }, (error, stdout, stderr) =>
      error === null ? done(JSON.parse(stdout)) : fail(new Error(`svcbot ${args.join(" ")}: ${stderr}`))
    )
  )

/** CPU seconds the process has used so far (user + system), from the kernel. */
const cpuSeconds = (pid: number): number => {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
  return (Number(fields[11]) + Number(fields[12])) / 100
}

describe.skipIf(!haveChromium)("the operator's console", () => {
  let run: Run
  let origin: string
  let configPath: string
  let dbPath: string
  let browser: Browser
  let ids: Array<string>

  const api = async (path: string, init: { method?: string; token?: string | null; body?: string } = {}) => {
    const token = init.token === undefined ? TOKEN : init.token
    const response = await fetch(`${origin}${path}`, {
      method: init.method ?? "GET",
      headers: { ...(token === null ? {} : { authorization: `Bearer ${token}` }), ...(init.body === undefined ? {} : { "content-type": "application/json" }) },
      ...(init.body === undefined ? {} : { body: init.body }),
      signal: AbortSignal.timeout(30_000)
    })
    return { status: response.status, body: (await response.json()) as Record<string, any> }
  }
  const intentsOf = (instance: string): number => query<{ n: number }>(dbPath, "SELECT count(*) AS n FROM intents WHERE strategy_id = ?", instance)[0]!.n
  const actionLines = (action: string, instance: string) => events(run).filter((e) => e.event === "operator.action" && e.action === action && e.instance === instance)

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), "svcbot-console-"))
    dbPath = join(dir, "svcbot.db")
    configPath = join(dir, "config.json")
    const port = await freeLoopbackPort()
    const config = JSON.parse(readFileSync(join(ROOT, "config/default.json"), "utf8")) as Record<string, any>
    config.database.path = dbPath
    config.health = { port, token: TOKEN }
    // Ten seconds instead of a minute, so that the CPU windows below each hold a heartbeat in 20 s.
    config.heartbeatMs = HEARTBEAT_MS
    ids = config.strategies.map((s: { id: string }) => s.id)
    writeFileSync(configPath, JSON.stringify(config))
    origin = `http://127.0.0.1:${port}`
    run = svcbot(["run", "--config", configPath])
    await waitForEvent(run, "console.ready", 120_000)
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true })
  }, 180_000)

  afterAll(async () => {
    await browser?.close()
    if (run !== undefined && run.child.exitCode === null) {
      run.child.kill("SIGTERM")
      await run.exit
    }
  })

  /** The page, with every console message, page error and request that leaves the daemon's origin collected. */
  const open = async (): Promise<{ page: Page; problems: Array<string> }> => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } })
    const problems: Array<string> = []
    page.on("console", (message) => {
      if (message.type() === "error" || message.type() === "warning") problems.push(`${message.type()}: ${message.text()}`)
    })
    page.on("pageerror", (error) => problems.push(`page error: ${error.message}`))
    page.on("request", (request) => {
      if (!request.url().startsWith(`${origin}/`)) problems.push(`request: ${request.url()}`)
    })
    await page.goto(`${origin}/`)
    return { page, problems }
  }

  it("shows every instance with the token asked once, a new fill without a reload, and pauses and resumes from the page", async () => {
    const { page, problems } = await open()
    // Reads need the token this daemon has: the page asks for it, then keeps it for the tab's session.
    await page.locator("#token-panel.open").waitFor({ timeout: 30_000 })
    await page.fill("#token-input", TOKEN)
    await page.click("#token-save")
    await page.locator("body[data-loaded=true]").waitFor({ timeout: 60_000 })
    await page.locator("body[data-stream=open]").waitFor({ timeout: 60_000 })
    expect(await page.evaluate(() => Object.keys((globalThis as unknown as { sessionStorage: object }).sessionStorage))).toEqual(["svcbot.console.token"])
    expect(await page.evaluate(() => (globalThis as unknown as { document: { cookie: string } }).document.cookie)).toBe("")
    expect(await page.locator("article.instance").evaluateAll((cards) => cards.map((c) => c.getAttribute("data-instance")))).toEqual(ids)
    for (const id of ids) await expect(page.locator(`article[data-instance="${id}"] .state`).textContent()).resolves.toBe("running")
    await expect(page.locator("#status").textContent()).resolves.toMatch(/^(ready|degraded|starting)$/)
    await expect(page.locator("#budget").textContent()).resolves.toMatch(/weight \d+ of \d+ per minute · orders \d+ of \d+ per 10 s/)

    // A fill the venue makes now reaches the page through the event stream.
    const fillsListed = () => page.locator('#events li[data-type="fill"]').count()
    const before = await fillsListed()
    const storedBefore = query<{ n: number }>(dbPath, "SELECT count(*) AS n FROM fills")[0]!.n
    await pollUntil(async () => ((await fillsListed()) > before ? true : undefined), 90_000, "a fill in the page's event list", 250)
    expect(query<{ n: number }>(dbPath, "SELECT count(*) AS n FROM fills")[0]!.n).toBeGreaterThan(storedBefore)
    const listed = await page.locator('#events li[data-type="fill"]').first().textContent()
    expect(listed).toMatch(/^\d{1,2}:\d\d:\d\d.*fill.*(buy|sell) [\d.]+ [A-Z]+ @ [\d.]+$/)
    await pollUntil(async () => (Number(await page.locator('article[data-instance="eth-mm"] svg.pnl').getAttribute("data-points")) > 0 ? true : undefined), 60_000, "eth-mm's PnL chart")
    expect(await page.locator('article[data-instance="eth-mm"] svg.pnl .value-tick').count()).toBeGreaterThan(1)

    mkdirSync(ARTIFACTS, { recursive: true })
    const screenshot = join(ARTIFACTS, "console.png")
    await page.screenshot({ path: screenshot, fullPage: true })
    expect(statSync(screenshot).size).toBeGreaterThan(20_000)
    process.stdout.write(`console screenshot: ${screenshot} (${statSync(screenshot).size} bytes)\n`)

    // Pause the market maker, which requotes all the time, from its card.
    await pollUntil(async () => (intentsOf("eth-mm") > 0 ? true : undefined), 60_000, "eth-mm's first intents")
    await page.click('article[data-instance="eth-mm"] button[data-action="pause"]')
    await page.locator('article[data-instance="eth-mm"][data-state="paused"]').waitFor({ timeout: 10_000 })
    // What was handled before the pause took effect is journaled by now; nothing after it.
    await delay(1500)
    const whilePaused = intentsOf("eth-mm")
    const othersBefore = query<{ n: number }>(dbPath, "SELECT count(*) AS n FROM orders WHERE strategy_id <> 'eth-mm'")[0]!.n
    await delay(6000)
    expect(intentsOf("eth-mm")).toBe(whilePaused)
    const status = (await cli(["status", "--config", configPath, "--json"])) as { strategies: Array<{ id: string; paused: string | null }> }
    expect(status.strategies.find((s) => s.id === "eth-mm")!.paused).toBe("paused by an operator from the console")
    await expect(api("/api/v1/instances").then((r) => r.body.instances.find((i: { id: string }) => i.id === "eth-mm").state)).resolves.toBe("paused")

    await page.click('article[data-instance="eth-mm"] button[data-action="resume"]')
    await page.locator('article[data-instance="eth-mm"][data-state="running"]').waitFor({ timeout: 10_000 })
    await pollUntil(async () => (intentsOf("eth-mm") > whilePaused ? true : undefined), 60_000, "eth-mm quoting again after resume")
    expect(query<{ n: number }>(dbPath, "SELECT count(*) AS n FROM orders WHERE strategy_id <> 'eth-mm'")[0]!.n).toBeGreaterThanOrEqual(othersBefore)
    const resumed = (await cli(["status", "--config", configPath, "--json"])) as { strategies: Array<{ id: string; paused: string | null }>; operatorActions: Array<{ action: string; instance: string }> }
    expect(resumed.strategies.find((s) => s.id === "eth-mm")!.paused).toBeNull()
    expect(resumed.operatorActions.slice(0, 2).map((a) => `${a.action} ${a.instance}`)).toEqual(["resume eth-mm", "pause eth-mm"])
    await expect(page.locator('#events li[data-type="action"]').count()).resolves.toBeGreaterThanOrEqual(2)
    expect(actionLines("pause", "eth-mm")).toHaveLength(1)
    expect(actionLines("resume", "eth-mm")).toHaveLength(1)
    expect(problems).toEqual([])
    await page.close()
  }, 300_000)

  it("reads again a few seconds after a read fails, instead of staying half loaded", async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } })
    let asked = 0
    // The first read of the instances after the token fails as a dropped connection would.
    await page.route(`${origin}/api/v1/instances`, (route) => (++asked === 1 ? route.abort("connectionreset") : route.continue()))
    await page.goto(`${origin}/`)
    await page.locator("#token-panel.open").waitFor({ timeout: 30_000 })
    await page.fill("#token-input", TOKEN)
    await page.click("#token-save")
    await page.locator("body[data-loaded=true]").waitFor({ timeout: 60_000 })
    expect(asked, "the instances read again after the failed one").toBeGreaterThanOrEqual(2)
    expect(await page.locator("article.instance").count()).toBe(ids.length)
    await page.close()
  }, 120_000)

  it("answers controls 401 with a wrong or missing token and 200 with the right one, logging each action once", async () => {
    expect((await api("/api/v1/instances/btc-dca/stop-entries", { method: "POST", token: null })).status).toBe(401)
    const wrong = await api("/api/v1/instances/btc-dca/stop-entries", { method: "POST", token: `${TOKEN}x` })
    expect(wrong.status).toBe(401)
    expect(wrong.body).toEqual({ error: { code: "unauthorized", message: expect.stringContaining("health.token") } })
    expect((await api("/api/v1/instances", { token: "nope" })).status).toBe(401)
    const right = await api("/api/v1/instances/btc-dca/stop-entries", { method: "POST" })
    expect(right.status).toBe(200)
    expect(right.body).toMatchObject({ action: "stop-entries", instance: "btc-dca", outcome: "entries stopped" })
    expect((await api("/api/v1/instances")).body.instances.find((i: { id: string }) => i.id === "btc-dca").state).toBe("entries-stopped")
    const status = (await cli(["status", "--config", configPath, "--json"])) as { entriesStopped: Array<{ instance: string; since: string }> }
    expect(status.entriesStopped.map((s) => s.instance)).toEqual(["btc-dca"])
    expect((await api("/api/v1/instances/btc-dca/resume", { method: "POST" })).body.outcome).toBe("resumed")
    expect((await api("/api/v1/instances/nobody/pause", { method: "POST" })).body.error.code).toBe("unknown-instance")
    expect((await api("/api/v1/lost/ack", { method: "POST", body: "{}" })).status).toBe(400)
    const ack = await api("/api/v1/lost/ack", { method: "POST", body: '{"all":true}' })
    expect(ack).toMatchObject({ status: 200, body: { action: "ack-lost", outcome: "no lost orders" } })
    await pollUntil(async () => (actionLines("resume", "btc-dca").length > 0 ? true : undefined), 10_000, "the resume line")
    expect(actionLines("stop-entries", "btc-dca")).toHaveLength(1)
    expect(actionLines("resume", "btc-dca")).toHaveLength(1)
    expect(events(run).filter((e) => e.event === "operator.action" && e.action === "ack-lost")).toHaveLength(1)
    expect((await api("/api/v1/actions?limit=3")).body.actions.map((a: { action: string }) => a.action)).toEqual(["ack-lost", "resume", "stop-entries"])
    // Bad queries are refused by name, in the one error shape.
    expect(await api("/api/v1/fills?limit=0")).toEqual({ status: 400, body: { error: { code: "bad-query", message: expect.stringContaining("limit must be a whole number from 1 to 1000") } } })
    expect((await api("/api/v1/orders?instance=nobody")).status).toBe(404)
    expect((await api("/api/v1/pnl")).body.error.message).toContain("instance is required")
  }, 180_000)

  it("lists every configured instance and serves the same profit and trades as the CLI on the same database", async () => {
    const instances = (await api("/api/v1/instances")).body.instances as Array<{ id: string; pnl: Record<string, string>; book: Record<string, string> }>
    expect(instances.map((i) => i.id)).toEqual(ids)
    for (const instance of instances) for (const amount of [...Object.values(instance.pnl), ...Object.values(instance.book)]) expect(amount).toMatch(/^-?\d+(\.\d+)?$/)
    // Hold the ledger still: every instance paused, its orders cancelled, until nothing rests.
    for (const id of ids) expect((await api(`/api/v1/instances/${id}/pause`, { method: "POST" })).status).toBe(200)
    for (const id of ids) expect((await api(`/api/v1/instances/${id}/cancel-all`, { method: "POST" })).body.outcome).toMatch(/^\d+ cancels? sent/)
    await pollUntil(async () => ((await api("/api/v1/orders?open=true")).body.orders.length === 0 ? true : undefined), 60_000, "no open orders")
    const [profit, trades] = [(await api("/api/v1/profit")).body, (await api("/api/v1/trades")).body]
    expect(await cli(["profit", "--db", dbPath, "--json"])).toEqual(profit)
    expect(await cli(["trades", "--db", dbPath, "--json"])).toEqual(trades)
    expect((profit.profit as Array<unknown>).length).toBeGreaterThan(0)
    process.stdout.write(`API = CLI: ${(profit.profit as Array<unknown>).length} profit rows, ${(trades.trades as Array<unknown>).length} trades\n`)
    for (const id of ids) expect((await api(`/api/v1/instances/${id}/resume`, { method: "POST" })).body.outcome).toBe("resumed")
  }, 240_000)

  it("costs the daemon about the same CPU with the page open and its event stream connected as without (printed)", async () => {
    const pid = run.child.pid!
    // Twice the heartbeat each way, so that the heartbeat falls in both windows.
    const windowMs = 2 * HEARTBEAT_MS
    const measure = async () => {
      const start = cpuSeconds(pid)
      await delay(windowMs)
      return cpuSeconds(pid) - start
    }
    const closed = await measure()
    const { page, problems } = await open()
    await page.fill("#token-input", TOKEN)
    await page.click("#token-save")
    await page.locator("body[data-stream=open]").waitFor({ timeout: 60_000 })
    const opened = await measure()
    // On a phone the cards stack and nothing but the tables' own scroll areas is wider than the screen.
    await page.setViewportSize({ width: 390, height: 844 })
    await page.locator("body[data-loaded=true]").waitFor({ timeout: 60_000 })
    const widths = await page.evaluate(() => {
      const root = (globalThis as unknown as { document: { documentElement: { scrollWidth: number; clientWidth: number } } }).document.documentElement
      return [root.scrollWidth, root.clientWidth]
    })
    expect(widths[0]).toBeLessThanOrEqual(widths[1]! + 1)
    await page.screenshot({ path: join(ARTIFACTS, "console-phone.png") })
    await page.close()
    expect(problems).toEqual([])
    const ratio = opened / closed
    process.stdout.write(`daemon CPU over ${windowMs / 1000} s: page closed ${closed.toFixed(2)} s, page open with its event stream ${opened.toFixed(2)} s, ratio ${ratio.toFixed(2)}\n`)
    expect(closed).toBeGreaterThan(0)
  }, 300_000)
})
