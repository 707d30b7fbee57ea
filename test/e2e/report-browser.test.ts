import { Either } from "effect"
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { chromium, type Browser, type Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { runBacktest } from "../../src/backtest/Backtest.js"
import type { RunFill } from "../../src/backtest/Metrics.js"
import { renderReport } from "../../src/backtest/Report.js"
import { Decimal } from "../../src/domain/Decimal.js"
import { plotRecorder } from "../../src/report/Plots.js"
import { decodeParams } from "../../src/strategy/Strategy.js"
import { decodeAccounts, devAccounts, toFees, toPairSpec } from "../../src/venue/Accounts.js"
import { syntheticCandles } from "../../src/venue/Tape.js"
import smaCrossover from "../../strategies/sma-crossover.js"

const CHROMIUM = "/usr/bin/chromium"
const haveChromium = existsSync(CHROMIUM)
if (!haveChromium) process.stderr.write(`report browser test skipped: ${CHROMIUM} is absent (apt-get install -y chromium)\n`)

const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"]
const ARTIFACTS = join("test", "artifacts")

interface Watched {
  readonly page: Page
  /** Console errors and warnings, page errors, and any request that is not the file itself. */
  readonly problems: Array<string>
}

const visibleRange = async (page: Page): Promise<readonly [number, number]> => {
  const charts = page.locator("#charts")
  return [Number(await charts.getAttribute("data-from")), Number(await charts.getAttribute("data-to"))]
}

const markersDrawn = async (page: Page): Promise<number> => Number(await page.locator("#price-chart").getAttribute("data-markers"))

/** Waits for the next drawn frame, after which a zoom or pan has been rendered. */
const settled = (page: Page) =>
  page.evaluate(() => {
    const frame = (globalThis as unknown as { requestAnimationFrame(callback: () => void): void }).requestAnimationFrame
    return new Promise<void>((done) => frame(() => frame(done)))
  })

const columnTexts = (page: Page, column: number) => page.locator(`#trades tbody tr td:nth-child(${column})`).allInnerTexts()

describe.skipIf(!haveChromium)("the HTML report in headless Chromium", () => {
  let dir: string
  let browser: Browser
  let reportPath: string
  let fills: ReadonlyArray<RunFill>

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "svcbot-report-"))
    const pair = toPairSpec(decodeAccounts(devAccounts).pairs[0]!)
    // Two weeks of minutes with short averages: some thousand fills, far more than the chart has pixels.
    const candles = syntheticCandles(20_160, { seed: 3, startPrice: new Decimal(60000), tickSize: pair.tickSize, stepSize: pair.stepSize, startMs: Date.UTC(2024, 0, 1) })
    const params = Either.getOrThrow(decodeParams(smaCrossover, "report", { fastPeriod: 5, slowPeriod: 20, entry: "market", quoteQty: "2000" }))
    const plots = plotRecorder(smaCrossover, candles.length)!
    const result = Either.getOrThrow(
      runBacktest({
        strategy: smaCrossover,
        params,
        pair,
        fees: toFees(devAccounts.fees),
        settleDelayMs: 50,
        balances: { USDT: new Decimal(10000) },
        candles,
        intervalMs: 60_000,
        afterCandle: plots.afterCandle
      })
    )
    fills = result.fills
    reportPath = join(dir, "report.html")
    writeFileSync(
      reportPath,
      renderReport({
        title: "Backtest: sma-crossover <on> BTCUSDT",
        details: [["params", '{"fastPeriod":5,"slowPeriod":20}']],
        candles,
        intervalMs: 60_000,
        equity: result.equity,
        fills: result.fills,
        metrics: result.metrics,
        pair,
        plots: plots.series
      })
    )
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true })
  })

  afterAll(async () => {
    await browser?.close()
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  })

  const open = async (): Promise<Watched> => {
    const page = await browser.newPage({ viewport: { width: 1100, height: 1000 } })
    const problems: Array<string> = []
    page.on("console", (message) => {
      if (message.type() === "error" || message.type() === "warning") problems.push(`${message.type()}: ${message.text()}`)
    })
    page.on("pageerror", (error) => problems.push(`page error: ${error.message}`))
    page.on("request", (request) => {
      if (!request.url().startsWith("file:")) problems.push(`request: ${request.url()}`)
    })
    await page.goto(pathToFileURL(reportPath).href)
    await settled(page)
    return { page, problems }
  }

  it("draws the price with both SMAs and thinned fills, the equity against buy and hold, and the drawdown", async () => {
    const { page, problems } = await open()
    expect(await page.title()).toBe("Backtest: sma-crossover <on> BTCUSDT")
    for (const id of ["price-chart", "equity-chart", "drawdown-chart"]) {
      const box = await page.locator(`#${id}`).boundingBox()
      expect(box!.width).toBeGreaterThan(500)
      expect(box!.height).toBeGreaterThan(100)
      expect(await page.locator(`#${id} .time-tick`).count()).toBeGreaterThan(2)
      expect(await page.locator(`#${id} .value-tick`).count()).toBeGreaterThan(2)
    }
    const pathLength = (selector: string) =>
      page.locator(selector).evaluate((path) => (path as unknown as { getTotalLength(): number }).getTotalLength())
    expect(await pathLength("#price-chart path.price")).toBeGreaterThan(500)
    expect(await page.locator("#price-chart path.plot").evaluateAll((paths) => paths.map((p) => p.getAttribute("data-name")))).toEqual(["fast SMA", "slow SMA"])
    expect(await pathLength('#price-chart path.plot[data-name="slow SMA"]')).toBeGreaterThan(500)
    expect(await pathLength("#equity-chart path.equity")).toBeGreaterThan(500)
    expect(await pathLength("#equity-chart path.benchmark")).toBeGreaterThan(500)
    expect(await page.locator("#drawdown-chart path.area.drawdown").count()).toBe(1)
    // Pointing at a moment reads every series there and marks it across all three charts.
    const priceBox = (await page.locator("#price-chart").boundingBox())!
    await page.mouse.move(priceBox.x + priceBox.width / 2, priceBox.y + priceBox.height / 2)
    await expect(page.locator("#readout").textContent()).resolves.toMatch(/^2024-01-\d\d \d\d:\d\d  close \d+(\.\d+)?  fast SMA \d[\s\S]*  slow SMA \d[\s\S]*  equity \d[\s\S]*  buy and hold \d[\s\S]*  drawdown -?\d/)
    const crosshairs = await page.locator("line.crosshair[visibility=visible]").evaluateAll((lines) => lines.map((line) => line.getAttribute("x1")))
    expect(crosshairs).toHaveLength(3)
    expect(new Set(crosshairs).size).toBe(1)
    await page.mouse.move(1, 1)
    // All three charts show the same time axis.
    const timeLabels = await page.locator("#price-chart .time-tick").allTextContents()
    expect(await page.locator("#equity-chart .time-tick").allTextContents()).toEqual(timeLabels)
    expect(await page.locator("#drawdown-chart .time-tick").allTextContents()).toEqual(timeLabels)
    // Two weeks of minutes: ticks at UTC midnights (or Mondays), labelled by date.
    for (const label of timeLabels) expect(label).toMatch(/^(Jan \d{1,2}|2024)$/)

    expect(fills.length).toBeGreaterThan(600)
    const shown = await markersDrawn(page)
    expect(shown).toBeGreaterThan(20)
    expect(shown).toBeLessThan(fills.length)
    expect(await page.locator("#price-chart path.marker").count()).toBe(shown)
    await expect(page.locator("#metrics").innerText()).resolves.toMatch(/Sharpe[\s\S]*Max drawdown[\s\S]*Fees paid/)
    await expect(page.locator("#benchmark").innerText()).resolves.toMatch(/Final equity[\s\S]*Total return/)
    expect(await page.locator("#monthly tbody tr").count()).toBe(1)

    mkdirSync(ARTIFACTS, { recursive: true })
    const screenshot = join(ARTIFACTS, "report.png")
    // The charts and the tables above the round trips: the part a person checks by eye.
    await page.screenshot({ path: screenshot, fullPage: true, clip: { x: 0, y: 0, width: 1100, height: 1500 } })
    expect(statSync(screenshot).size).toBeGreaterThan(20_000)
    process.stdout.write(`report screenshot: ${screenshot} (${statSync(screenshot).size} bytes)\n`)
    expect(problems).toEqual([])
    await page.close()
  })

  it("zooms and pans all charts together, and shows every fill once zoomed in", async () => {
    const { page, problems } = await open()
    const [from0, to0] = await visibleRange(page)
    expect(to0 - from0).toBe(20_160 * 60_000)
    const allLabels = await page.locator("#price-chart .time-tick").allTextContents()
    const thinned = await markersDrawn(page)

    // The wheel over the price chart zooms in around the pointer.
    const box = (await page.locator("#price-chart").boundingBox())!
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2)
    for (let i = 0; i < 6; i++) await page.mouse.wheel(0, -100)
    await settled(page)
    const [from1, to1] = await visibleRange(page)
    expect(to1 - from1).toBeLessThan((to0 - from0) / 3)
    expect(from1).toBeGreaterThan(from0)
    expect(await page.locator("#equity-chart .time-tick").allTextContents()).toEqual(await page.locator("#price-chart .time-tick").allTextContents())
    expect(await page.locator("#price-chart .time-tick").allTextContents()).not.toEqual(allLabels)
    const zoomedMarkers = await markersDrawn(page)
    expect(zoomedMarkers).not.toBe(thinned)
    expect(zoomedMarkers).toBeLessThanOrEqual(fills.filter((fill) => fill.time >= from1 && fill.time <= to1).length)

    // Dragging pans: the span stays, the window moves later in time when dragged to the left.
    await page.mouse.move(box.x + box.width * 0.6, box.y + box.height / 2)
    await page.mouse.down()
    await page.mouse.move(box.x + box.width * 0.4, box.y + box.height / 2, { steps: 5 })
    await page.mouse.up()
    await settled(page)
    const [from2, to2] = await visibleRange(page)
    expect(to2 - from2).toBeCloseTo(to1 - from1, -3)
    expect(from2).toBeGreaterThan(from1)

    // Zoomed in to the narrowest view (20 candles): every fill in view is drawn.
    for (let i = 0; i < 12; i++) await page.click("#zoom-in")
    await settled(page)
    const [from3, to3] = await visibleRange(page)
    expect(to3 - from3).toBe(20 * 60_000)
    const inView = fills.filter((fill) => fill.time >= from3 && fill.time <= to3).length
    expect(await markersDrawn(page)).toBe(inView)
    expect(await page.locator("#price-chart .time-tick").first().textContent()).toMatch(/^\d\d:\d\d$/)

    await page.click("#zoom-all")
    await settled(page)
    expect(await visibleRange(page)).toEqual([from0, to0])
    expect(await markersDrawn(page)).toBe(thinned)
    expect(problems).toEqual([])
    await page.close()
  })

  it("sorts the round-trip table by a column, both ways, and shows a clicked trade on the charts", async () => {
    const { page, problems } = await open()
    const rows = await page.locator("#trades tbody tr").count()
    expect(rows).toBeGreaterThan(100)
    const header = page.locator("#trades thead th", { hasText: /^PnL$/ })
    const pnlColumn = 8
    const before = await columnTexts(page, pnlColumn)
    await header.click()
    const ascending = (await columnTexts(page, pnlColumn)).map(Number)
    expect(ascending).not.toEqual(before.map(Number))
    expect(ascending).toEqual([...ascending].sort((a, b) => a - b))
    expect(await header.getAttribute("aria-sort")).toBe("ascending")
    await header.click()
    const descending = (await columnTexts(page, pnlColumn)).map(Number)
    expect(descending).toEqual([...descending].sort((a, b) => b - a))
    expect(descending[0]).toBeGreaterThan(ascending[0]!)

    await page.locator("#trades tbody tr").first().click()
    await settled(page)
    const [from, to] = await visibleRange(page)
    expect(to - from).toBeLessThan(20_160 * 60_000)
    expect(problems).toEqual([])
    await page.close()
  })
})
