/**
 * The backtest report: one self-contained HTML file (inline SVG and CSS, no
 * script, no network) with the price chart and trade markers, the equity curve,
 * the drawdown and the metrics table. Long runs are drawn from at most a few
 * thousand points per chart: every bucket keeps its first, lowest, highest and
 * last value, so spikes and drawdowns stay visible.
 */
import { type Decimal, toFloat } from "../domain/Decimal.js"
import type { Candle } from "./Candles.js"
import type { Metrics, RunFill } from "./Metrics.js"

export interface ReportInput {
  readonly title: string
  /** Lines shown under the title: strategy, params, data, hashes. */
  readonly details: ReadonlyArray<readonly [string, string]>
  readonly candles: ReadonlyArray<Candle>
  readonly intervalMs: number
  /** Equity at each candle's close. */
  readonly equity: ReadonlyArray<Decimal>
  readonly fills: ReadonlyArray<RunFill>
  readonly metrics: Metrics
}

const WIDTH = 1000
const HEIGHT = 240
const PAD = { left: 72, right: 12, top: 12, bottom: 26 }
const BUCKETS = 1000
/** Trade markers beyond this many would only paint the chart solid. */
const MAX_MARKERS = 2000
const MAX_FILL_ROWS = 500

const escapeHtml = (text: string): string =>
  text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!)

/** Indices to draw: per bucket the first, min, max and last point, in time order. */
const envelope = (values: ArrayLike<number>): ReadonlyArray<number> => {
  const n = values.length
  if (n <= BUCKETS * 4) return Array.from({ length: n }, (_, i) => i)
  const out: Array<number> = []
  const size = n / BUCKETS
  for (let b = 0; b < BUCKETS; b++) {
    const start = Math.floor(b * size)
    const end = Math.min(n, Math.floor((b + 1) * size))
    let lo = start
    let hi = start
    for (let i = start; i < end; i++) {
      if (values[i]! < values[lo]!) lo = i
      if (values[i]! > values[hi]!) hi = i
    }
    for (const i of [...new Set([start, lo, hi, end - 1])].sort((x, y) => x - y)) out.push(i)
  }
  return out
}

interface Scale {
  readonly x: (timeMs: number) => number
  readonly y: (value: number) => number
  readonly minValue: number
  readonly maxValue: number
  readonly fromMs: number
  readonly toMs: number
}

const makeScale = (fromMs: number, toMs: number, minValue: number, maxValue: number): Scale => {
  const span = maxValue - minValue || Math.abs(maxValue) || 1
  const lo = minValue - span * 0.04
  const hi = maxValue + span * 0.04
  const plotW = WIDTH - PAD.left - PAD.right
  const plotH = HEIGHT - PAD.top - PAD.bottom
  const timeSpan = toMs - fromMs || 1
  return {
    x: (t) => PAD.left + ((t - fromMs) / timeSpan) * plotW,
    y: (v) => PAD.top + (1 - (v - lo) / (hi - lo)) * plotH,
    minValue: lo,
    maxValue: hi,
    fromMs,
    toMs
  }
}

const formatAxisNumber = (value: number): string => {
  const magnitude = Math.abs(value)
  if (magnitude >= 1e6) return `${(value / 1e6).toFixed(2)}M`
  if (magnitude >= 1000) return value.toFixed(0)
  if (magnitude >= 1) return value.toFixed(2)
  return value.toPrecision(3)
}

const formatTime = (ms: number, spanMs: number): string => {
  const iso = new Date(ms).toISOString()
  return spanMs > 3 * 86_400_000 ? iso.slice(0, 10) : iso.slice(5, 16).replace("T", " ")
}

const axes = (scale: Scale, unit: string): string => {
  const parts: Array<string> = []
  for (let i = 0; i <= 4; i++) {
    const value = scale.minValue + ((scale.maxValue - scale.minValue) * i) / 4
    const y = scale.y(value).toFixed(1)
    parts.push(`<line class="grid" x1="${PAD.left}" x2="${WIDTH - PAD.right}" y1="${y}" y2="${y}"/>`)
    parts.push(`<text class="tick" x="${PAD.left - 6}" y="${y}" text-anchor="end" dominant-baseline="middle">${formatAxisNumber(value)}${unit}</text>`)
  }
  for (let i = 0; i <= 4; i++) {
    const t = scale.fromMs + ((scale.toMs - scale.fromMs) * i) / 4
    const anchor = i === 0 ? "start" : i === 4 ? "end" : "middle"
    parts.push(
      `<text class="tick" x="${scale.x(t).toFixed(1)}" y="${HEIGHT - 8}" text-anchor="${anchor}">${formatTime(t, scale.toMs - scale.fromMs)}</text>`
    )
  }
  return parts.join("")
}

const polyline = (times: ArrayLike<number>, values: ArrayLike<number>, scale: Scale): string =>
  envelope(values)
    .map((i) => `${scale.x(times[i]!).toFixed(1)},${scale.y(values[i]!).toFixed(1)}`)
    .join(" ")

const chart = (id: string, title: string, body: string): string =>
  `<section class="chart"><h2>${title}</h2><svg id="${id}" viewBox="0 0 ${WIDTH} ${HEIGHT}" width="100%" role="img" aria-label="${title}">${body}</svg></section>`

const priceChart = (input: ReportInput): string => {
  const n = input.candles.length
  const times = new Float64Array(n)
  const closes = new Float64Array(n)
  let lo = Number.POSITIVE_INFINITY
  let hi = Number.NEGATIVE_INFINITY
  for (let i = 0; i < n; i++) {
    const candle = input.candles[i]!
    times[i] = candle.openTimeMs
    closes[i] = toFloat(candle.close)
    lo = Math.min(lo, toFloat(candle.low))
    hi = Math.max(hi, toFloat(candle.high))
  }
  if (n === 0) return chart("price-chart", "Price", "")
  const scale = makeScale(input.metrics.fromMs, input.metrics.toMs, lo, hi)
  const markers = input.fills.slice(0, MAX_MARKERS).map((fill) => {
    const x = scale.x(fill.time)
    const y = scale.y(toFloat(fill.price))
    const points =
      fill.side === "buy"
        ? `${x.toFixed(1)},${(y - 1).toFixed(1)} ${(x - 5).toFixed(1)},${(y + 8).toFixed(1)} ${(x + 5).toFixed(1)},${(y + 8).toFixed(1)}`
        : `${x.toFixed(1)},${(y + 1).toFixed(1)} ${(x - 5).toFixed(1)},${(y - 8).toFixed(1)} ${(x + 5).toFixed(1)},${(y - 8).toFixed(1)}`
    return `<polygon class="marker ${fill.side}" points="${points}"><title>${fill.side} ${fill.baseQty.toFixed()} @ ${fill.price.toFixed()} (${fill.liquidity})</title></polygon>`
  })
  const note =
    input.fills.length > MAX_MARKERS
      ? `<text class="tick" x="${WIDTH - PAD.right}" y="${PAD.top + 10}" text-anchor="end">first ${MAX_MARKERS} of ${input.fills.length} fills marked</text>`
      : ""
  return chart(
    "price-chart",
    "Price and fills",
    `${axes(scale, "")}<polyline class="line price" points="${polyline(times, closes, scale)}"/>${markers.join("")}${note}`
  )
}

const equityCharts = (input: ReportInput): string => {
  const n = input.equity.length
  const times = new Float64Array(n + 1)
  const values = new Float64Array(n + 1)
  const drawdowns = new Float64Array(n + 1)
  times[0] = input.metrics.fromMs
  values[0] = toFloat(input.metrics.initialEquity)
  for (let i = 0; i < n; i++) {
    times[i + 1] = input.metrics.fromMs + (i + 1) * input.intervalMs
    values[i + 1] = toFloat(input.equity[i]!)
  }
  let peak = values[0]!
  let lo = values[0]!
  let hi = values[0]!
  let deepest = 0
  for (let i = 0; i <= n; i++) {
    const value = values[i]!
    peak = Math.max(peak, value)
    drawdowns[i] = peak > 0 ? ((value - peak) / peak) * 100 : 0
    deepest = Math.min(deepest, drawdowns[i]!)
    lo = Math.min(lo, value)
    hi = Math.max(hi, value)
  }
  const equityScale = makeScale(input.metrics.fromMs, input.metrics.toMs, lo, hi)
  const ddScale = makeScale(input.metrics.fromMs, input.metrics.toMs, deepest, 0)
  const ddLine = polyline(times, drawdowns, ddScale)
  const zero = ddScale.y(0).toFixed(1)
  const area = `${equityScale.x(times[0]!).toFixed(1)},${zero} ${ddLine} ${equityScale.x(times[n]!).toFixed(1)},${zero}`
  return (
    chart("equity-chart", "Equity", `${axes(equityScale, "")}<polyline class="line equity" points="${polyline(times, values, equityScale)}"/>`) +
    chart("drawdown-chart", "Drawdown", `${axes(ddScale, "%")}<polygon class="area drawdown" points="${area}"/>`)
  )
}

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

const STYLE = `
body{font:14px/1.4 system-ui,sans-serif;margin:24px auto;max-width:1040px;color:#1d2330;background:#fff}
h1{font-size:20px;margin:0 0 8px}h2{font-size:15px;margin:18px 0 4px}
dl.details{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0 0 12px;color:#4a5263}
dl.details dd{margin:0;font-family:ui-monospace,monospace;word-break:break-all}
svg{display:block;background:#fbfcfe;border:1px solid #e3e7ee}
.grid{stroke:#e3e7ee;stroke-width:1}.tick{font-size:11px;fill:#6b7385}
.line{fill:none;stroke-width:1.3}.price{stroke:#44506a}.equity{stroke:#1f6feb}
.area.drawdown{fill:#f0b4b4;stroke:#c44;stroke-width:1}
.marker.buy{fill:#1a9e4b}.marker.sell{fill:#d1342f}
table{border-collapse:collapse;margin-top:6px}td,th{padding:3px 10px;border-bottom:1px solid #eef0f4;text-align:left}
td.num{text-align:right;font-family:ui-monospace,monospace}
`

export const renderReport = (input: ReportInput): string => {
  const details = input.details.map(([k, v]) => `<dt>${escapeHtml(k)}</dt><dd>${escapeHtml(v)}</dd>`).join("")
  const metrics = metricRows(input.metrics)
    .map(([k, v]) => `<tr><th>${escapeHtml(k)}</th><td class="num">${escapeHtml(v)}</td></tr>`)
    .join("")
  const fillRows = input.fills
    .slice(0, MAX_FILL_ROWS)
    .map(
      (f) =>
        `<tr><td>${new Date(f.time).toISOString()}</td><td>${escapeHtml(f.tag)}</td><td>${f.side}</td><td class="num">${f.price.toFixed()}</td><td class="num">${f.baseQty.toFixed()}</td><td class="num">${f.fee.toFixed()} ${escapeHtml(f.feeAsset)}</td><td>${f.liquidity}</td></tr>`
    )
    .join("")
  const more = input.fills.length > MAX_FILL_ROWS ? `<p>${input.fills.length - MAX_FILL_ROWS} more fills in the --json output.</p>` : ""
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>${escapeHtml(input.title)}</title><style>${STYLE}</style></head>
<body><h1>${escapeHtml(input.title)}</h1><dl class="details">${details}</dl>
${priceChart(input)}${equityCharts(input)}
<section><h2>Metrics</h2><table id="metrics">${metrics}</table></section>
<section><h2>Fills</h2><table id="fills"><tr><th>time</th><th>tag</th><th>side</th><th>price</th><th>base qty</th><th>fee</th><th>liquidity</th></tr>${fillRows}</table>${more}</section>
</body></html>
`
}
