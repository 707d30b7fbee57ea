/**
 * The backtest report: one self-contained HTML file that opens offline (inline CSS, SVG drawn by
 * an inline script, the data as inline JSON; a Content-Security-Policy forbids anything else).
 * It shows the price with the strategy's plotted series and its fills, the equity against a
 * buy-and-hold benchmark, the drawdown, all three zoomed and panned together, then the metrics,
 * the benchmark, monthly returns and a sortable table of round trips.
 *
 * Long runs: each series is embedded with at most `MAX_POINTS` points (per bucket the first,
 * lowest, highest and last, so spikes and drawdowns stay), and the page reduces what is in view
 * the same way to a few points per pixel. Fill markers are thinned to one per side per few
 * pixels until the view is narrow enough for all of them.
 */
import { Decimal, toFloat } from "../domain/Decimal.js"
import { atIncrement, atPlaces, ratio as ratioText } from "../domain/Display.js"
import { roundTrips } from "../engine/RoundTrips.js"
import { buyAndHold, buyAndHoldMarks, type BuyAndHold } from "../report/Benchmark.js"
import { CHART_APP, CHART_LIBRARY } from "../report/ChartScript.js"
import { periodReturns, type PeriodReturn } from "../report/Monthly.js"
import type { PlotSeries } from "../report/Plots.js"
import type { PairSpec } from "../venue/Orders.js"
import type { VenueCandle } from "../venue/PricePath.js"
import type { Metrics, RunFill } from "./Metrics.js"

/** What the report needs of the pair: its assets, and its tick and step for display and for when a position is flat. */
export type ReportPair = Pick<PairSpec, "symbol" | "base" | "quote" | "tickSize" | "stepSize">

export interface ReportInput {
  readonly title: string
  /** Lines shown under the title: strategy, params, data, hashes. */
  readonly details: ReadonlyArray<readonly [string, string]>
  readonly candles: ReadonlyArray<VenueCandle>
  readonly intervalMs: number
  /** Equity at each candle's close. */
  readonly equity: ReadonlyArray<Decimal>
  readonly fills: ReadonlyArray<RunFill>
  readonly metrics: Metrics
  /** The pair traded. The round-trip table needs it (a position is flat below one step); without it the table says so. */
  readonly pair?: ReportPair
  /** The strategy's plotted series (`plotRecorder`), drawn over the price. */
  readonly plots?: ReadonlyArray<PlotSeries>
}

/** Points embedded per series; the page reduces further to what the screen shows. */
const MAX_POINTS = 100_000
/** Quote amounts are shown at most this precise. */
const AMOUNT_PLACES = 8
const PLOT_COLORS = ["#e08a00", "#8a3ffc", "#009d9a", "#d12771", "#6f8f00", "#a56eff"]

const escapeHtml = (text: string): string =>
  text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!)

/** Indices to embed: all of them, or per bucket the first, lowest, highest and last, in time order. */
const envelope = (values: ArrayLike<number>): ReadonlyArray<number> | undefined => {
  const n = values.length
  if (n <= MAX_POINTS) return undefined
  const buckets = MAX_POINTS / 4
  const out: Array<number> = []
  const size = n / buckets
  for (let b = 0; b < buckets; b++) {
    const start = Math.floor(b * size)
    const end = Math.min(n, Math.floor((b + 1) * size))
    let lo = start
    let hi = start
    for (let i = start; i < end; i++) {
      // A NaN (no value yet) is never the lowest or highest; a bucket of NaN keeps its first as a gap.
      if (values[i]! < values[lo]! || Number.isNaN(values[lo]!)) lo = i
      if (values[i]! > values[hi]! || Number.isNaN(values[hi]!)) hi = i
    }
    for (const i of [...new Set([start, lo, hi, end - 1])].sort((x, y) => x - y)) out.push(i)
  }
  return out
}

/** Ten significant digits are more than a chart can show, and keep the embedded JSON small. */
const shortNumber = (value: number): number | null => (Number.isFinite(value) ? Number(value.toPrecision(10)) : null)

interface EmbeddedSeries {
  /**
   * Time in candle intervals after the first candle's open; absent when the series has a point
   * for every candle, whose times the page then takes from `closeTimes` (once, for all such series).
   */
  readonly x?: ReadonlyArray<number>
  readonly y: ReadonlyArray<number | null>
}

const embed = (x: (i: number) => number, values: ArrayLike<number>, digits: (value: number) => number | null = shortNumber): EmbeddedSeries => {
  const picked = envelope(values)
  if (picked === undefined) return { y: Array.from(values, digits) }
  return { x: picked.map((i) => shortNumber(x(i)) ?? 0), y: picked.map((i) => digits(values[i]!)) }
}

/** Drawdown in percent: a hundredth of a basis point is finer than any chart. */
const drawdownNumber = (value: number): number | null => (Number.isFinite(value) ? Number(value.toFixed(4)) : null)

const percent = (value: number | null): string => (value === null ? "n/a" : `${value.toFixed(2)} %`)
const ratio = (value: number | null): string => (value === null ? "n/a" : value.toFixed(3))

const formatDuration = (ms: number): string => {
  const minutes = Math.round(ms / 60_000)
  const days = Math.floor(minutes / 1440)
  const hours = Math.floor((minutes % 1440) / 60)
  return days > 0 ? `${days} d ${hours} h` : `${hours} h ${minutes % 60} min`
}

/** The metrics table rows as label and display text; also printed by the CLI. */
export const metricRows = (m: Metrics): ReadonlyArray<readonly [string, string]> => [
  ["Initial equity", m.initialEquity.toFixed()],
  ["Final equity", m.finalEquity.toFixed()],
  ["PnL", m.pnl.toFixed()],
  ["Total return", `${m.totalReturnPct.toDecimalPlaces(4).toFixed()} %`],
  ["Annualised return", percent(m.annualisedReturnPct)],
  ["Sharpe", ratio(m.sharpe)],
  ["Sortino", ratio(m.sortino)],
  ["Max drawdown", percent(m.maxDrawdownPct)],
  ["Max drawdown duration", formatDuration(m.maxDrawdownDurationMs)],
  ["Fills", String(m.fills)],
  ["Trades (closed)", String(m.trades)],
  ["Win rate", percent(m.winRatePct)],
  ["Profit factor", m.profitFactor === null ? (m.trades > 0 ? "no losing trade" : "n/a") : m.profitFactor.toFixed(3)],
  ["Exposure", percent(m.exposurePct)],
  ["Fees paid", m.feesPaid.toFixed()],
  ["Turnover", m.turnover.toFixed()],
  ["Turnover / initial equity", ratio(m.turnoverRatio)],
  ["Candles", String(m.candles)],
  ["From", new Date(m.fromMs).toISOString()],
  ["To", new Date(m.toMs).toISOString()]
]

/** The benchmark beside the strategy, as label and display text. */
export const benchmarkRows = (m: Metrics, benchmark: BuyAndHold): ReadonlyArray<readonly [string, string]> => [
  ["Bought at (first open)", benchmark.entryPrice.toFixed()],
  ["Base bought", atPlaces(benchmark.baseQty, AMOUNT_PLACES)],
  ["Final equity", atPlaces(benchmark.finalEquity, AMOUNT_PLACES)],
  ["PnL", atPlaces(benchmark.pnl, AMOUNT_PLACES)],
  ["Total return", `${ratioText(benchmark.returnPct)} %`],
  ["Strategy return less buy and hold", `${ratioText(m.totalReturnPct.minus(benchmark.returnPct))} points`]
]

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

const returnCell = (period: PeriodReturn | undefined): string => {
  if (period === undefined) return "<td></td>"
  if (period.returnPct === undefined) return '<td class="num">n/a</td>'
  const sign = period.returnPct.isNegative() ? "loss" : period.returnPct.isZero() ? "" : "gain"
  return `<td class="num ${sign}">${period.returnPct.toFixed(2)} %</td>`
}

const monthlyTable = (input: ReportInput): string => {
  const { months, years } = periodReturns(input.metrics.initialEquity, input.candles, input.equity)
  const byMonth = new Map(months.map((m) => [`${m.year}-${m.month}`, m]))
  const rows = years.map(
    (year) => `<tr><th>${year.year}</th>${MONTHS.map((_, m) => returnCell(byMonth.get(`${year.year}-${m}`))).join("")}${returnCell(year)}</tr>`
  )
  return `<table id="monthly"><thead><tr><th></th>${MONTHS.map((m) => `<th>${m}</th>`).join("")}<th>Year</th></tr></thead><tbody>${rows.join("")}</tbody></table>`
}

interface TradeColumn {
  readonly label: string
  readonly num: boolean
}

const TRADE_COLUMNS: ReadonlyArray<TradeColumn> = [
  { label: "#", num: true },
  { label: "entry", num: false },
  { label: "exit", num: false },
  { label: "side", num: false },
  { label: "quantity", num: true },
  { label: "entry price", num: true },
  { label: "exit price", num: true },
  { label: "PnL", num: true },
  { label: "fees", num: true },
  { label: "duration", num: true }
]

interface TradeRow {
  readonly openedAt: number
  readonly closedAt: number | null
  /** Display text per column, HTML-escaped. */
  readonly text: ReadonlyArray<string>
  /** What each column sorts by. */
  readonly key: ReadonlyArray<number | string | null>
}

const isoMinute = (ms: number): string => new Date(ms).toISOString().slice(0, 16).replace("T", " ")

const tradeRows = (fills: ReadonlyArray<RunFill>, pair: ReportPair): ReadonlyArray<TradeRow> => {
  const trips = roundTrips(
    fills.map((fill) => ({ ...fill, symbol: pair.symbol })),
    new Map([[pair.symbol, pair]]),
    new Map([[pair.symbol, pair.stepSize]])
  )
  return trips.map((trip, i) => {
    const duration = trip.closedAt === undefined ? null : trip.closedAt - trip.openedAt
    return {
      openedAt: trip.openedAt,
      closedAt: trip.closedAt ?? null,
      text: [
        String(i + 1),
        isoMinute(trip.openedAt),
        trip.closedAt === undefined ? "open" : isoMinute(trip.closedAt),
        trip.side,
        trip.entryQty.toFixed(),
        atIncrement(trip.entryPrice, pair.tickSize),
        trip.exitPrice === undefined ? "" : atIncrement(trip.exitPrice, pair.tickSize),
        atPlaces(trip.netPnl, AMOUNT_PLACES),
        atPlaces(trip.fees, AMOUNT_PLACES),
        duration === null ? "" : formatDuration(duration)
      ].map(escapeHtml),
      key: [
        i,
        trip.openedAt,
        trip.closedAt ?? null,
        trip.side,
        toFloat(trip.entryQty),
        toFloat(trip.entryPrice),
        trip.exitPrice === undefined ? null : toFloat(trip.exitPrice),
        toFloat(trip.netPnl),
        toFloat(trip.fees),
        duration
      ]
    }
  })
}

/** The page's data: every chart series in candle intervals from the first open. */
const chartData = (input: ReportInput, benchmark: BuyAndHold | undefined, trades: ReadonlyArray<TradeRow>) => {
  const candles = input.candles
  const t0 = input.metrics.fromMs
  const step = input.intervalMs
  const n = candles.length
  const closeX = (i: number) => (candles[i]!.openTimeMs - t0) / step + 1
  const closes = new Float64Array(n)
  for (let i = 0; i < n; i++) closes[i] = toFloat(candles[i]!.close)
  // Equity and the benchmark start at the first open with the starting equity, then mark each close.
  const markX = (i: number) => (i === 0 ? 0 : closeX(i - 1))
  const initial = toFloat(input.metrics.initialEquity)
  const equity = new Float64Array(n + 1)
  const drawdown = new Float64Array(n + 1)
  equity[0] = initial
  for (let i = 0; i < n; i++) equity[i + 1] = toFloat(input.equity[i]!)
  let peak = equity[0]!
  for (let i = 0; i <= n; i++) {
    peak = Math.max(peak, equity[i]!)
    drawdown[i] = peak > 0 ? ((equity[i]! - peak) / peak) * 100 : 0
  }
  let benchmarkMarks = new Float64Array(0)
  if (benchmark !== undefined) {
    benchmarkMarks = new Float64Array(n + 1)
    benchmarkMarks[0] = initial
    benchmarkMarks.set(buyAndHoldMarks(benchmark, closes), 1)
  }
  const fills = [...input.fills].sort((a, b) => a.time - b.time)
  const tick = input.pair?.tickSize
  return {
    t0,
    step,
    span: n === 0 ? 1 : closeX(n - 1),
    // Needed only by series embedded whole, which a run longer than MAX_POINTS has none of.
    closeTimes: n > MAX_POINTS ? [] : Array.from({ length: n }, (_, i) => closeX(i)),
    price: embed(closeX, closes),
    plots: (input.plots ?? []).map((plot, k) => ({ name: plot.name, color: PLOT_COLORS[k % PLOT_COLORS.length]!, ...embed(closeX, plot.values) })),
    equity: embed(markX, equity),
    benchmark: embed(markX, benchmarkMarks),
    drawdown: embed(markX, drawdown, drawdownNumber),
    fills: {
      x: fills.map((f) => (f.time - t0) / step),
      price: fills.map((f) => toFloat(f.price)),
      side: fills.map((f) => f.side),
      label: fills.map((f) =>
        escapeHtml(`${f.side} ${f.baseQty.toFixed()} @ ${tick === undefined ? f.price.toFixed() : atIncrement(f.price, tick)} (${f.liquidity}) ${isoMinute(f.time)}`)
      )
    },
    tradeColumns: TRADE_COLUMNS,
    trades
  }
}

/** JSON inside a script element: a "<" could close the element, so none is left as is. */
const scriptJson = (value: unknown): string => JSON.stringify(value).replace(/</g, "\\u003c")

const tableRows = (rows: ReadonlyArray<readonly [string, string]>): string =>
  rows.map(([k, v]) => `<tr><th>${escapeHtml(k)}</th><td class="num">${escapeHtml(v)}</td></tr>`).join("")

const legendItem = (cls: string, label: string, style = ""): string =>
  `<span class="key"><i class="${cls}"${style === "" ? "" : ` style="${style}"`}></i>${escapeHtml(label)}</span>`

const STYLE = `
body{font:14px/1.4 system-ui,sans-serif;margin:24px auto;max-width:1040px;color:#1d2330;background:#fff}
h1{font-size:20px;margin:0 0 8px}h2{font-size:15px;margin:18px 0 4px}
dl.details{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0 0 12px;color:#4a5263}
dl.details dd{margin:0;font-family:ui-monospace,monospace;word-break:break-all}
.toolbar{position:sticky;top:0;z-index:1;display:flex;gap:8px;align-items:center;padding:6px 0;background:#fff}
.toolbar button{font:inherit;padding:2px 10px}.toolbar .hint,.note{color:#6b7385;font-size:12px}
svg{display:block;width:100%;background:#fbfcfe;border:1px solid #e3e7ee;touch-action:none;cursor:grab;user-select:none}
.grid{stroke:#e3e7ee;stroke-width:1}.tick{font-size:11px;fill:#6b7385}
.line{fill:none;stroke-width:1.3;vector-effect:non-scaling-stroke}.price{stroke:#44506a}.equity{stroke:#1f6feb}
.benchmark{stroke:#e08a00;stroke-dasharray:5 3}.plot{stroke-width:1;stroke-opacity:.8}
.area.drawdown{fill:#f0b4b4;stroke:#c44;stroke-width:1}.crosshair{stroke:#8a93a6;stroke-width:1;stroke-dasharray:2 2}
.readout{position:sticky;top:34px;z-index:1;min-height:18px;background:#fff;font:12px ui-monospace,monospace;color:#4a5263;white-space:pre}
.marker.buy{fill:#1a9e4b}.marker.sell{fill:#d1342f}
.legend{font-weight:normal;font-size:12px;color:#4a5263;margin-left:12px}
.key{margin-right:12px;white-space:nowrap}.key i{display:inline-block;width:14px;height:3px;margin:0 4px 3px 0;vertical-align:middle}
.key i.price{background:#44506a}.key i.equity{background:#1f6feb}.key i.benchmark{background:#e08a00}
.key i.buy,.key i.sell{width:0;height:0;border:5px solid transparent;background:none}
.key i.buy{border-bottom:8px solid #1a9e4b;border-top:0}.key i.sell{border-top:8px solid #d1342f;border-bottom:0}
table{border-collapse:collapse;margin-top:6px}td,th{padding:3px 10px;border-bottom:1px solid #eef0f4;text-align:left}
td.num{text-align:right;font-family:ui-monospace,monospace;white-space:nowrap}td.gain{color:#1a7f3c}td.loss{color:#b3261e}
#trades thead th{cursor:pointer;white-space:nowrap}#trades thead th[aria-sort=ascending]::after{content:" \\25B2"}
#trades thead th[aria-sort=descending]::after{content:" \\25BC"}#trades tbody tr{cursor:pointer}#trades tbody tr:hover{background:#f3f6fb}
#monthly td{min-width:52px}
`

const chartSection = (id: string, title: string, legend: string): string =>
  `<section class="chart"><h2>${title}<span class="legend">${legend}</span></h2><svg id="${id}" role="img" aria-label="${title}"></svg></section>`

export const renderReport = (input: ReportInput): string => {
  const details = input.details.map(([k, v]) => `<dt>${escapeHtml(k)}</dt><dd>${escapeHtml(v)}</dd>`).join("")
  const benchmark = input.candles.length === 0 ? undefined : buyAndHold(input.metrics.initialEquity, input.candles)
  const trades = input.pair === undefined ? [] : tradeRows(input.fills, input.pair)
  const plots = input.plots ?? []
  const priceLegend = [
    legendItem("price", "close"),
    ...plots.map((plot, k) => legendItem("plot", plot.name, `background:${PLOT_COLORS[k % PLOT_COLORS.length]}`)),
    legendItem("buy", "buy"),
    legendItem("sell", "sell")
  ].join("")
  const tradesSection =
    input.pair === undefined
      ? "<p>Round trips are listed when the report is given the pair traded (its step decides when a position is flat).</p>"
      : `<p class="note" id="trades-note"></p><table id="trades"><thead><tr>${TRADE_COLUMNS.map((c) => `<th>${c.label}</th>`).join("")}</tr></thead><tbody></tbody></table>`
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>${escapeHtml(input.title)}</title><style>${STYLE}</style></head>
<body><h1>${escapeHtml(input.title)}</h1><dl class="details">${details}</dl>
<div class="toolbar"><button id="zoom-in" type="button">Zoom in</button><button id="zoom-out" type="button">Zoom out</button><button id="zoom-all" type="button">Show all</button>
<span id="range"></span><span class="hint">wheel: zoom, drag: pan, double-click: show all, click a trade: show it</span></div>
<noscript><p>The charts and the round-trip table are drawn by the page's own script: allow it to see them.</p></noscript>
<div class="readout" id="readout"></div>
<div id="charts">
${chartSection("price-chart", "Price and fills", priceLegend)}<p class="note" id="marker-note"></p>
${chartSection("equity-chart", "Equity", legendItem("equity", "strategy") + legendItem("benchmark", "buy and hold"))}
${chartSection("drawdown-chart", "Drawdown", "")}
</div>
<section><h2>Metrics</h2><table id="metrics">${tableRows(metricRows(input.metrics))}</table></section>
<section><h2>Benchmark: buy and hold</h2><p class="note">The starting equity put into ${escapeHtml(input.pair?.base ?? "the base asset")} at the first candle's open, without fees, and held.</p>
<table id="benchmark">${benchmark === undefined ? "" : tableRows(benchmarkRows(input.metrics, benchmark))}</table></section>
<section><h2>Monthly returns</h2>${monthlyTable(input)}</section>
<section><h2>Round trips</h2>${tradesSection}</section>
<script type="application/json" id="report-data">${scriptJson(chartData(input, benchmark, trades))}</script>
<script>${CHART_LIBRARY}${CHART_APP}</script>
</body></html>
`
}
