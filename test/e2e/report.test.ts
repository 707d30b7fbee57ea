import { Either } from "effect"
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { chromium, type Browser } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { runBacktest } from "../../src/backtest/Backtest.js"
import { renderReport } from "../../src/backtest/Report.js"
import { Decimal } from "../../src/domain/Decimal.js"
import { decodeParams } from "../../src/strategy/Strategy.js"
import { decodeAccounts, devAccounts, toFees, toPairSpec } from "../../src/venue/Accounts.js"
import { syntheticCandles } from "../../src/venue/Tape.js"
import smaCrossover from "../../strategies/sma-crossover.js"

const CHROMIUM = "/usr/bin/chromium"
const haveChromium = existsSync(CHROMIUM)
if (!haveChromium) process.stderr.write(`report e2e test skipped: ${CHROMIUM} is absent (apt-get install -y chromium)\n`)

const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"]

describe.skipIf(!haveChromium)("the HTML report in headless Chromium", () => {
  let dir: string
  let browser: Browser
  let reportPath: string
  let fills = 0

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "svcbot-report-"))
    const pair = toPairSpec(decodeAccounts(devAccounts).pairs[0]!)
    // Long enough that the charts are drawn from bucketed points, not every candle.
    const candles = syntheticCandles(6000, { seed: 3, startPrice: new Decimal(60000), tickSize: pair.tickSize, stepSize: pair.stepSize, startMs: Date.UTC(2024, 0, 1) })
    const params = Either.getOrThrow(decodeParams(smaCrossover, "report", { fastPeriod: 10, slowPeriod: 60, entry: "market", quoteQty: "2000" }))
    const result = Either.getOrThrow(
      runBacktest({ strategy: smaCrossover, params, pair, fees: toFees(devAccounts.fees), settleDelayMs: 50, balances: { USDT: new Decimal(10000) }, candles, intervalMs: 60_000 })
    )
    fills = result.fills.length
    reportPath = join(dir, "report.html")
    writeFileSync(
      reportPath,
      renderReport({
        title: "Backtest: sma-crossover <on> BTCUSDT",
        details: [["params", '{"fastPeriod":10,"slowPeriod":60}']],
        candles,
        intervalMs: 60_000,
        equity: result.equity,
        fills: result.fills,
        metrics: result.metrics
      })
    )
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true })
  })

  afterAll(async () => {
    await browser?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it("renders the price, equity and drawdown charts and the metrics table with no console errors and no network", async () => {
    const page = await browser.newPage({ viewport: { width: 1100, height: 900 } })
    const problems: Array<string> = []
    const requests: Array<string> = []
    page.on("console", (message) => {
      if (message.type() === "error" || message.type() === "warning") problems.push(`${message.type()}: ${message.text()}`)
    })
    page.on("pageerror", (error) => problems.push(`page error: ${error.message}`))
    page.on("request", (request) => {
      if (!request.url().startsWith("file:")) requests.push(request.url())
    })
    await page.goto(pathToFileURL(reportPath).href)

    expect(await page.title()).toBe("Backtest: sma-crossover <on> BTCUSDT")
    for (const id of ["price-chart", "equity-chart", "drawdown-chart"]) {
      const box = await page.locator(`#${id}`).boundingBox()
      expect(box!.width).toBeGreaterThan(500)
      expect(box!.height).toBeGreaterThan(100)
    }
    const pricePoints = await page.locator("#price-chart polyline.price").getAttribute("points")
    const equityPoints = await page.locator("#equity-chart polyline.equity").getAttribute("points")
    // 6000 candles are drawn as at most four points per bucket, and always more than a few.
    expect(pricePoints!.trim().split(" ").length).toBeGreaterThan(1000)
    expect(pricePoints!.trim().split(" ").length).toBeLessThan(6000)
    expect(equityPoints!.trim().split(" ").length).toBeGreaterThan(1000)
    expect(await page.locator("#drawdown-chart polygon.drawdown").count()).toBe(1)
    expect(fills).toBeGreaterThan(10)
    expect(await page.locator("#price-chart polygon.marker.buy").count()).toBeGreaterThan(0)
    expect(await page.locator("#price-chart polygon.marker").count()).toBe(fills)
    const pathLength = await page.locator("#equity-chart polyline.equity").evaluate((line) => (line as unknown as { getTotalLength(): number }).getTotalLength())
    expect(pathLength).toBeGreaterThan(500)
    await expect(page.locator("#metrics").innerText()).resolves.toMatch(/Sharpe[\s\S]*Max drawdown[\s\S]*Fees paid/)

    // Kept in test-results/ (ignored by git) for a person to look at.
    mkdirSync("test-results", { recursive: true })
    const screenshot = join("test-results", "report.png")
    await page.screenshot({ path: screenshot, fullPage: true })
    expect(statSync(screenshot).size).toBeGreaterThan(20_000)
    process.stdout.write(`report screenshot: ${screenshot} (${statSync(screenshot).size} bytes)\n`)

    expect(problems).toEqual([])
    expect(requests).toEqual([])
    await page.close()
  })
})
