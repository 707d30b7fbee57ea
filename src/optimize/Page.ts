/**
 * The HTML page of an optimisation run: one self-contained file (inline SVG and
 * CSS, no script, nothing fetched: a Content-Security-Policy forbids it) with
 * the settings, a heat map of the objective over two params, the walk-forward
 * folds in-sample against out-of-sample, and the ranked table.
 */
import { Data, Either } from "effect"
import { isLosslessNumber, parse } from "../domain/Json.js"
import { type Objective, objectiveValue } from "./Objective.js"
import type { StoredResult } from "./Results.js"
import type { Window } from "./Search.js"
import { describeSettings, foldCells, rankedCells, type RunOutcome, shortFigure, windowText } from "./Summary.js"

export class HeatMapInvalid extends Data.TaggedError("HeatMapInvalid")<{ readonly message: string }> {}

export interface HeatMap {
  readonly x: string
  readonly y: string
  /** The trials' window: the one on which the most candidates ran. */
  readonly window: Window
  readonly xs: ReadonlyArray<string>
  readonly ys: ReadonlyArray<string>
  /** By `x value|y value`: the best objective over the other params, and the params that gave it. */
  readonly cells: ReadonlyMap<string, { readonly value: number | null; readonly params: string }>
}

const escape = (text: string): string => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

const valueText = (value: unknown): string => (isLosslessNumber(value) ? value.value : typeof value === "string" ? value : JSON.stringify(value))

const sortValues = (values: Iterable<string>): ReadonlyArray<string> => {
  const all = [...new Set(values)]
  return all.every((v) => v !== "" && Number.isFinite(Number(v))) ? all.sort((a, b) => Number(a) - Number(b)) : all.sort()
}

/**
 * The heat map of the objective over params `x` and `y` (default: the first two params, by
 * name, that take more than one value), on the window where the most candidates ran (with
 * halving, the first slice; with walk-forward, the latest fold's). Each cell holds the best
 * value over the other params.
 */
export const heatMapOf = (results: ReadonlyArray<StoredResult>, objective: Objective, chosen?: readonly [string, string]): Either.Either<HeatMap, HeatMapInvalid> => {
  const byWindow = new Map<string, Array<StoredResult>>()
  for (const result of results) {
    const key = `${result.fromMs}:${result.toMs}`
    byWindow.set(key, [...(byWindow.get(key) ?? []), result])
  }
  const windowScore = (rows: ReadonlyArray<StoredResult>): ReadonlyArray<number> => [rows.length, rows[0]!.toMs - rows[0]!.fromMs, rows[0]!.fromMs]
  const rows = [...byWindow.values()].sort((a, b) => {
    const [sa, sb] = [windowScore(a), windowScore(b)]
    return sb[0]! - sa[0]! || sb[1]! - sa[1]! || sb[2]! - sa[2]!
  })[0]
  if (rows === undefined) return Either.left(new HeatMapInvalid({ message: "the run has no results to map" }))
  const params = rows.map((row) => ({ row, values: parse(row.params) as Record<string, unknown> }))
  const distinct = (name: string) => new Set(params.map((p) => valueText(p.values[name])))
  const names = Object.keys(params[0]!.values).sort()
  const varying = names.filter((name) => distinct(name).size > 1)
  const [x, y] = chosen ?? [varying[0], varying[1] ?? varying[0]]
  if (x === undefined || y === undefined) return Either.left(new HeatMapInvalid({ message: "no param takes more than one value, so there is nothing to map" }))
  for (const name of [x, y]) {
    if (!names.includes(name)) return Either.left(new HeatMapInvalid({ message: `--heatmap: "${name}" is not a param of this run; its params are ${names.join(", ")}` }))
  }
  const cells = new Map<string, { value: number | null; params: string }>()
  for (const { row, values } of params) {
    const key = `${valueText(values[x])}|${valueText(values[y])}`
    const value = row.metrics === undefined ? undefined : objectiveValue(objective, row.metrics)
    const number = value === undefined ? null : value.toNumber()
    const held = cells.get(key)
    if (held === undefined || (number !== null && (held.value === null || number > held.value))) cells.set(key, { value: number, params: row.params })
  }
  return Either.right({
    x,
    y,
    window: { fromMs: rows[0]!.fromMs, toMs: rows[0]!.toMs },
    xs: sortValues(params.map((p) => valueText(p.values[x]))),
    ys: sortValues(params.map((p) => valueText(p.values[y]))),
    cells
  })
}

/** Red (worst) through yellow to green (best); grey for no value. */
const colour = (value: number | null, lo: number, hi: number): string => {
  if (value === null) return "#d0d0d0"
  const t = hi === lo ? 1 : (value - lo) / (hi - lo)
  const hue = Math.round(t * 120)
  return `hsl(${hue}, 70%, 55%)`
}

const heatMapSvg = (map: HeatMap, objective: Objective): string => {
  const cell = Math.max(18, Math.min(48, Math.floor(640 / Math.max(map.xs.length, map.ys.length))))
  const left = 90
  const top = 20
  const width = left + cell * map.xs.length + 20
  const height = top + cell * map.ys.length + 60
  const values = [...map.cells.values()].flatMap((c) => (c.value === null ? [] : [c.value]))
  const lo = Math.min(...values)
  const hi = Math.max(...values)
  const parts: Array<string> = []
  map.ys.forEach((yv, j) => {
    const row = map.ys.length - 1 - j
    parts.push(`<text x="${left - 6}" y="${top + row * cell + cell / 2 + 4}" text-anchor="end">${escape(yv)}</text>`)
    map.xs.forEach((xv, i) => {
      const found = map.cells.get(`${xv}|${yv}`)
      const fill = found === undefined ? "#ffffff" : colour(found.value, lo, hi)
      const title = found === undefined ? "not tried" : `${map.x} ${xv}, ${map.y} ${yv}: ${objective} ${shortFigure(found.value)}\n${found.params}`
      parts.push(`<rect x="${left + i * cell}" y="${top + row * cell}" width="${cell}" height="${cell}" fill="${fill}" stroke="#fff"><title>${escape(title)}</title></rect>`)
      if (found !== undefined && cell >= 34) parts.push(`<text x="${left + i * cell + cell / 2}" y="${top + row * cell + cell / 2 + 4}" text-anchor="middle" class="v">${escape(shortFigure(found.value).slice(0, 6))}</text>`)
    })
  })
  map.xs.forEach((xv, i) => parts.push(`<text x="${left + i * cell + cell / 2}" y="${top + map.ys.length * cell + 16}" text-anchor="middle">${escape(xv)}</text>`))
  parts.push(`<text x="${left + (cell * map.xs.length) / 2}" y="${height - 14}" text-anchor="middle" class="axis">${escape(map.x)}</text>`)
  parts.push(`<text x="14" y="${top + (cell * map.ys.length) / 2}" transform="rotate(-90 14 ${top + (cell * map.ys.length) / 2})" text-anchor="middle" class="axis">${escape(map.y)}</text>`)
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" role="img" aria-label="heat map of ${escape(objective)}">${parts.join("")}</svg>`
}

/** In-sample and out-of-sample bars per fold; an overfit fold's label is red. */
const foldsSvg = (outcome: RunOutcome): string => {
  const folds = outcome.walkForward!.folds
  const values = folds.flatMap((f) => [f.inSample.perWindow, f.outOfSample.perWindow]).map((v) => (v === null ? 0 : Number(v)))
  const hi = Math.max(0, ...values)
  const lo = Math.min(0, ...values)
  const span = hi - lo || 1
  const group = 56
  const plot = 200
  const top = 16
  const left = 80
  const width = left + 10 + group * folds.length
  const y = (v: number) => top + ((hi - v) / span) * plot
  const parts: Array<string> = [`<line x1="${left}" x2="${width}" y1="${y(0)}" y2="${y(0)}" stroke="#888"/>`]
  folds.forEach((fold, i) => {
    const x = left + 6 + i * group
    for (const [k, figure, fill] of [[0, fold.inSample.perWindow, "#4a78b5"], [1, fold.outOfSample.perWindow, "#e08a2c"]] as const) {
      const v = figure === null ? 0 : Number(figure)
      parts.push(`<rect x="${x + k * 20}" y="${Math.min(y(v), y(0))}" width="18" height="${Math.max(1, Math.abs(y(v) - y(0)))}" fill="${fill}"><title>fold ${i + 1} ${k === 0 ? "in-sample" : "out-of-sample"}: ${shortFigure(figure)}</title></rect>`)
    }
    parts.push(`<text x="${x + 19}" y="${top + plot + 16}" text-anchor="middle"${fold.overfit ? ' class="bad"' : ""}>${i + 1}${fold.overfit ? " !" : ""}</text>`)
  })
  parts.push(`<text x="${left - 4}" y="${y(hi) + 4}" text-anchor="end">${escape(shortFigure(hi))}</text><text x="${left - 4}" y="${y(lo) + 4}" text-anchor="end">${escape(shortFigure(lo))}</text>`)
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${top + plot + 30}" role="img" aria-label="walk-forward folds">${parts.join("")}</svg>`
}

const htmlTable = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>, rowClass?: (i: number) => string): string =>
  `<table><tr>${header.map((h) => `<th>${escape(h)}</th>`).join("")}</tr>${rows
    .map((row, i) => `<tr${rowClass?.(i) ? ` class="${rowClass(i)}"` : ""}>${row.map((c) => `<td>${escape(c)}</td>`).join("")}</tr>`)
    .join("")}</table>`

/** At most this many ranked rows are written; the results table holds them all. */
const PAGE_ROWS = 200

export const renderPage = (outcome: RunOutcome, map: Either.Either<HeatMap, HeatMapInvalid>): string => {
  const walk = outcome.walkForward
  const unit = outcome.objective === "profit" ? " per day" : ""
  const sections = [
    `<h1>Optimisation run #${outcome.runId}: ${escape(outcome.strategy)} on ${escape(outcome.symbol)}</h1>`,
    `<p>${escape(outcome.data)}, ${escape(windowText(outcome.window))} UTC. ${escape(describeSettings(outcome))}.</p>`,
    `<h2>Heat map</h2>`,
    Either.isRight(map)
      ? `<p>${escape(outcome.objective)} over ${escape(map.right.x)} (across) and ${escape(map.right.y)} (up), on ${escape(windowText(map.right.window))}; each cell is the best over the other params (hover for its params). Red: the lowest value, green: the highest; grey: no value; white: not tried.</p>${heatMapSvg(map.right, outcome.objective)}`
      : `<p>${escape(map.left.message)}</p>`
  ]
  if (walk !== undefined) {
    sections.push(
      `<h2>Walk-forward ${escape(walk.spec)}</h2>`,
      `<p>Blue: in-sample ${escape(outcome.objective)}${unit} of each fold's winner on its training window; orange: out-of-sample on the test window after it. ${walk.overfitFolds} of ${walk.folds.length} folds are flagged (!): out-of-sample below half of a positive in-sample figure.</p>`,
      foldsSvg(outcome),
      htmlTable(
        ["fold", "train (UTC)", "test (UTC)", `in-sample${unit}`, `out-of-sample${unit}`, "retention", "flag", "params"],
        walk.folds.map(foldCells),
        (i) => (walk.folds[i]!.overfit ? "bad" : "")
      )
    )
  }
  sections.push(
    `<h2>Ranked candidates${walk === undefined ? "" : " (the last fold's training window)"}</h2>`,
    htmlTable(
      ["rank", outcome.objective, "trades", "max drawdown %", "return %", "window", "note", "params"],
      outcome.ranked.slice(0, PAGE_ROWS).map((entry, i) => rankedCells(outcome, entry, i))
    ),
    outcome.ranked.length > PAGE_ROWS ? `<p>${outcome.ranked.length - PAGE_ROWS} more in the results database.</p>` : ""
  )
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>Optimisation run #${outcome.runId}</title>
<style>
body { font: 14px system-ui, sans-serif; margin: 24px; color: #222 }
table { border-collapse: collapse; margin: 8px 0 24px } td, th { border: 1px solid #ddd; padding: 3px 8px; text-align: left; font-variant-numeric: tabular-nums }
th { background: #f4f4f4 } tr.bad td { background: #fde8e8 } svg text { font-size: 11px } svg text.axis { font-size: 13px; font-weight: 600 } svg text.v { font-size: 10px } svg text.bad { fill: #c00; font-weight: 700 }
</style></head><body>
${sections.join("\n")}
</body></html>
`
}
