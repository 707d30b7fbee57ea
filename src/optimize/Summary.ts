/**
 * What an optimisation run found, as it is stored with the run and shown: the
 * ranked candidates, and with walk-forward the folds. Text tables for people,
 * JSON (params as objects, numbers exact) for programs.
 */
import { parse, stringify } from "../domain/Json.js"
import { type Constraints, type Objective, OVERFIT_RETENTION } from "./Objective.js"
import type { Fold, RankedCandidate, Window } from "./Search.js"
import type { Halving, Search } from "./Space.js"

export interface RunOutcome {
  readonly runId: number
  readonly strategy: string
  readonly symbol: string
  readonly data: string
  readonly objective: Objective
  /** The data's whole window. */
  readonly window: Window
  readonly candidates: number
  readonly trials: number
  readonly search: Search
  readonly seed: number
  readonly halving?: Halving
  readonly constraints: Constraints
  /** Best first. With walk-forward: the last fold's training ranking. */
  readonly ranked: ReadonlyArray<RankedCandidate>
  readonly walkForward?: { readonly spec: string; readonly folds: ReadonlyArray<Fold>; readonly overfitFolds: number }
}

/** The run as one JSON text: each entry's params as an object with exact numbers. */
export const outcomeJson = (outcome: RunOutcome): string => {
  const { walkForward, ...rest } = outcome
  return stringify({
    ...rest,
    ranked: outcome.ranked.map((entry, i) => ({ rank: i + 1, ...entry, params: parse(entry.params) })),
    ...(walkForward === undefined
      ? {}
      : { walkForward: walkForward.spec, overfitFolds: walkForward.overfitFolds, folds: walkForward.folds.map((fold) => ({ ...fold, params: parse(fold.params) })) })
  })
}

const iso = (ms: number): string => new Date(ms).toISOString().slice(0, 16).replace("T", " ")

export const windowText = (window: Window): string => `${iso(window.fromMs)} .. ${iso(window.toMs)}`

/** A figure at 4 significant decimals for a table; the stored value keeps every digit. */
export const shortFigure = (value: string | number | null | undefined): string => {
  if (value === null || value === undefined) return "-"
  const n = typeof value === "number" ? value : Number(value)
  return Number.isInteger(n) ? String(n) : n.toFixed(4)
}

const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): ReadonlyArray<string> => {
  // The params column is last and left as long as it is.
  const widths = header.map((h, c) => (c === header.length - 1 ? 0 : Math.max(h.length, ...rows.map((r) => r[c]!.length))))
  return [header, ...rows].map((cells) => cells.map((cell, c) => cell.padEnd(widths[c]!)).join("  ").trimEnd())
}

export const describeSettings = (outcome: RunOutcome): string => {
  const search = outcome.search.method === "random" ? `random search (${outcome.search.samples} samples, seed ${outcome.seed})` : "grid search"
  const halving = outcome.halving === undefined ? "" : `, halving over ${outcome.halving.slices} slices keeping ${outcome.halving.keep}`
  const limits = [
    outcome.constraints.minTrades === undefined ? [] : [`minTrades ${outcome.constraints.minTrades}`],
    outcome.constraints.maxDrawdownPct === undefined ? [] : [`maxDrawdownPct ${outcome.constraints.maxDrawdownPct}`]
  ].flat()
  return `${outcome.candidates} candidates, ${outcome.trials} trials, ${search}${halving}, ranked by ${outcome.objective}${limits.length === 0 ? "" : `; constraints ${limits.join(", ")}`}`
}

/** A ranked candidate's cells, under the columns rank, objective, trades, max drawdown %, return %, window, note, params. */
export const rankedCells = (outcome: RunOutcome, entry: RunOutcome["ranked"][number], index: number): Array<string> => [
  String(index + 1),
  shortFigure(entry.objective),
  shortFigure(entry.metrics?.trades),
  shortFigure(entry.metrics?.maxDrawdownPct),
  shortFigure(entry.metrics?.totalReturnPct),
  windowText(entry.window),
  entry.error !== undefined ? `error: ${entry.error.split("\n")[0]}` : entry.violations.length > 0 ? entry.violations.join("; ") : entry.rung < (outcome.ranked[0]?.rung ?? 0) ? `dropped after slice ${entry.rung + 1}` : "",
  entry.params
]

/** The ranked table's first `limit` rows. */
export const rankedTable = (outcome: RunOutcome, limit: number): ReadonlyArray<string> =>
  table(
    ["rank", outcome.objective, "trades", "maxDD%", "return%", "window", "note", "params"],
    outcome.ranked.slice(0, limit).map((entry, i) => rankedCells(outcome, entry, i))
  )

/** A fold's cells, under the columns fold, train, test, in-sample, out-of-sample, retention, flag, params. */
export const foldCells = (fold: Fold): Array<string> => [
  String(fold.index + 1),
  windowText(fold.train),
  windowText(fold.test),
  shortFigure(fold.inSample.perWindow),
  fold.outOfSample.error === undefined ? shortFigure(fold.outOfSample.perWindow) : "error",
  fold.retention === null ? "-" : `${(fold.retention * 100).toFixed(0)} %`,
  [fold.overfit ? "OVERFIT" : "", fold.feasible ? "" : "no candidate met the constraints"].filter((s) => s !== "").join(", "),
  fold.params
]

/** The folds, in-sample against out-of-sample, each flagged when the overfitting rule fires. */
export const foldsTable = (outcome: RunOutcome): ReadonlyArray<string> => {
  const walk = outcome.walkForward
  if (walk === undefined) return []
  const unit = outcome.objective === "profit" ? " per day" : ""
  return [
    `walk-forward ${walk.spec}: ${walk.folds.length} folds, ${walk.overfitFolds} flagged as overfit (out-of-sample ${outcome.objective}${unit} below ${OVERFIT_RETENTION * 100} % of in-sample)`,
    ...table(
      ["fold", "train (UTC)", "test (UTC)", `in-sample${unit}`, `out-of-sample${unit}`, "retention", "flag", "params"],
      walk.folds.map(foldCells)
    )
  ]
}

export const outcomeText = (outcome: RunOutcome, limit = 10): string =>
  [
    `${outcome.strategy} on ${outcome.symbol}, ${outcome.data} ${windowText(outcome.window)} (optimisation run #${outcome.runId})`,
    describeSettings(outcome),
    ...(outcome.walkForward === undefined ? [] : [...foldsTable(outcome), "", "the last fold's training ranking (the params to trade next):"]),
    ...rankedTable(outcome, limit)
  ].join("\n")
