/**
 * The search: candidates run as trials on a window (with successive halving, on
 * growing parts of it), ranked by the objective; and walk-forward, which
 * optimises on each training window and scores the winner on the window after
 * it. Pure orchestration over a `TrialRunner`: where the trials run, and whether
 * their results were already stored, does not change what is found.
 */
import { Data, Either } from "effect"
import { type Constraints, compareRanked, decimalOrUndefined, type MetricsJson, type Objective, objectiveValue, overfit, perWindow, violations } from "./Objective.js"
import type { TrialRunner } from "./Runner.js"
import type { Halving } from "./Space.js"
import { type Study, trialOf } from "./Trial.js"

export class SearchInvalid extends Data.TaggedError("SearchInvalid")<{ readonly message: string }> {}

export interface Window {
  readonly fromMs: number
  readonly toMs: number
}

export interface SearchSettings {
  readonly objective: Objective
  readonly constraints: Constraints
  readonly halving?: Halving
}

/** A candidate as the ranking leaves it: its figures on the last window it ran. */
export interface RankedCandidate {
  /** Canonical params JSON. */
  readonly params: string
  /** The last halving rung it ran (0-based); the final rung is the whole window. */
  readonly rung: number
  readonly window: Window
  readonly metrics?: MetricsJson
  readonly error?: string
  /** The objective's value as a decimal string; null when the run gives none. */
  readonly objective: string | null
  /** Broken constraints, judged on the whole window only. */
  readonly violations: ReadonlyArray<string>
  readonly feasible: boolean
}

export interface WindowOutcome {
  readonly window: Window
  readonly ranked: ReadonlyArray<RankedCandidate>
  /** How many trials the search asked for (halving rungs included). */
  readonly trials: number
}

/**
 * Where each halving rung's window ends: the window cut into `slices` parts on the candle grid,
 * rung r running from the window's start to the end of part r. Parts that would hold no whole
 * candle are merged, so the ends are strictly increasing and the last is the window's end.
 */
export const rungEnds = (window: Window, intervalMs: number, halving: Halving | undefined): ReadonlyArray<number> => {
  if (halving === undefined) return [window.toMs]
  const candles = Math.round((window.toMs - window.fromMs) / intervalMs)
  const ends: Array<number> = []
  for (let r = 1; r <= halving.slices; r++) {
    const end = r === halving.slices ? window.toMs : window.fromMs + Math.round((candles * r) / halving.slices) * intervalMs
    if (end > (ends[ends.length - 1] ?? window.fromMs)) ends.push(end)
  }
  return ends
}

const rankedOf = (params: string, rung: number, window: Window, result: { readonly metrics?: MetricsJson; readonly error?: string }, settings: SearchSettings, final: boolean): RankedCandidate => {
  const value = result.metrics === undefined ? undefined : objectiveValue(settings.objective, result.metrics)
  const broken = final && result.metrics !== undefined ? violations(settings.constraints, result.metrics) : []
  return {
    params,
    rung,
    window,
    ...(result.metrics === undefined ? {} : { metrics: result.metrics }),
    ...(result.error === undefined ? {} : { error: result.error }),
    objective: value === undefined ? null : value.toFixed(),
    violations: broken,
    feasible: result.error === undefined && broken.length === 0
  }
}

const byRank = (a: RankedCandidate, b: RankedCandidate): number =>
  compareRanked({ ...a, value: decimalOrUndefined(a.objective) }, { ...b, value: decimalOrUndefined(b.objective) })

/**
 * Runs the candidates on the window and ranks them. With halving, every candidate runs on the
 * first slice; the best `keep` share (at least one) goes on to the window extended by the next
 * slice, and so on until the survivors have run on the whole window. Constraints are judged on
 * the whole window: a short slice has too few trades to judge them.
 */
export const optimiseWindow = async (
  study: Study,
  runner: TrialRunner,
  candidates: ReadonlyArray<string>,
  settings: SearchSettings,
  window: Window,
  onRung?: (rung: number, rungs: number, trials: number) => void
): Promise<WindowOutcome> => {
  const ends = rungEnds(window, study.intervalMs, settings.halving)
  const latest = new Map<string, RankedCandidate>()
  let alive = candidates
  let trials = 0
  for (let rung = 0; rung < ends.length; rung++) {
    const slice = { fromMs: window.fromMs, toMs: ends[rung]! }
    const final = rung === ends.length - 1
    onRung?.(rung, ends.length, alive.length)
    const results = await runner.run(alive.map((params) => trialOf(study, params, slice.fromMs, slice.toMs)))
    trials += alive.length
    const entries = alive.map((params, i) => rankedOf(params, rung, slice, results[i]!, settings, final))
    for (const entry of entries) latest.set(entry.params, entry)
    if (!final) {
      const keep = Math.max(1, Math.ceil(alive.length * settings.halving!.keep))
      alive = [...entries].sort(byRank).slice(0, keep).map((entry) => entry.params)
    }
  }
  return { window, ranked: [...latest.values()].sort(byRank), trials }
}

// ---------------------------------------------------------------------------
// walk-forward

export interface WalkForwardSpec {
  readonly trainMs: number
  readonly testMs: number
  /** As written, e.g. "90d:30d". */
  readonly text: string
}

const UNIT_MS = { h: 3_600_000, d: 86_400_000, w: 604_800_000 } as const

/** Reads `TRAIN:TEST`, each a whole number with unit h, d or w, e.g. `90d:30d` or `36h:12h`. */
export const parseWalkForward = (text: string): Either.Either<WalkForwardSpec, SearchInvalid> => {
  const match = /^(\d{1,6})([hdw]):(\d{1,6})([hdw])$/.exec(text.trim())
  const train = match === null ? 0 : Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS]
  const test = match === null ? 0 : Number(match[3]) * UNIT_MS[match[4] as keyof typeof UNIT_MS]
  if (match === null || train === 0 || test === 0) {
    return Either.left(new SearchInvalid({ message: `--walk-forward must be TRAIN:TEST, each a positive whole number with unit h, d or w, e.g. 90d:30d or 36h:12h; got "${text}"` }))
  }
  return Either.right({ trainMs: train, testMs: test, text: text.trim() })
}

export interface FoldWindows {
  readonly train: Window
  readonly test: Window
}

/**
 * The folds over the data: the first trains on [start, start + TRAIN) and tests on the TEST after
 * it; each next fold moves both forward by TEST, so the test windows follow each other without
 * overlap. Only whole folds are made: the data's tail that cannot hold a whole test window is left out.
 */
export const foldWindows = (data: Window, spec: WalkForwardSpec): Either.Either<ReadonlyArray<FoldWindows>, SearchInvalid> => {
  const folds: Array<FoldWindows> = []
  for (let start = data.fromMs; start + spec.trainMs + spec.testMs <= data.toMs; start += spec.testMs) {
    const trainEnd = start + spec.trainMs
    folds.push({ train: { fromMs: start, toMs: trainEnd }, test: { fromMs: trainEnd, toMs: trainEnd + spec.testMs } })
  }
  if (folds.length === 0) {
    const hours = (data.toMs - data.fromMs) / UNIT_MS.h
    return Either.left(new SearchInvalid({ message: `--walk-forward ${spec.text} needs data spanning at least TRAIN + TEST, but the data spans ${hours.toFixed(1)} h; use shorter windows or more data` }))
  }
  return Either.right(folds)
}

export interface FoldFigures {
  readonly objective: string | null
  /** The objective made comparable between windows (`perWindow`): what the overfitting rule compares. */
  readonly perWindow: string | null
  readonly metrics?: MetricsJson
  readonly error?: string
}

export interface Fold {
  readonly index: number
  readonly train: Window
  readonly test: Window
  /** The winner of the training window, canonical params JSON. */
  readonly params: string
  /** Whether the winner met the constraints in-sample (false when no candidate did). */
  readonly feasible: boolean
  readonly inSample: FoldFigures
  readonly outOfSample: FoldFigures
  /** Out-of-sample over in-sample, per window; null when either is missing or in-sample is not positive. */
  readonly retention: number | null
  readonly overfit: boolean
  readonly trials: number
}

export interface WalkForwardOutcome {
  readonly folds: ReadonlyArray<Fold>
  /** The last fold's training ranking: the params to trade next. */
  readonly latest: WindowOutcome
  readonly trials: number
}

const figuresOf = (objective: Objective, window: Window, result: { readonly metrics?: MetricsJson; readonly error?: string }): FoldFigures => {
  const value = result.metrics === undefined ? undefined : objectiveValue(objective, result.metrics)
  return {
    objective: value === undefined ? null : value.toFixed(),
    perWindow: value === undefined ? null : perWindow(objective, value, window.toMs - window.fromMs).toFixed(),
    ...(result.metrics === undefined ? {} : { metrics: result.metrics }),
    ...(result.error === undefined ? {} : { error: result.error })
  }
}

/** Optimises on each fold's training window and runs the winner on its test window. */
export const walkForward = async (
  study: Study,
  runner: TrialRunner,
  candidates: ReadonlyArray<string>,
  settings: SearchSettings,
  folds: ReadonlyArray<FoldWindows>,
  onFold?: (index: number, count: number) => void
): Promise<WalkForwardOutcome> => {
  const out: Array<Fold> = []
  let latest: WindowOutcome | undefined
  let trials = 0
  for (const [index, windows] of folds.entries()) {
    onFold?.(index, folds.length)
    const trained = await optimiseWindow(study, runner, candidates, settings, windows.train)
    const winner = trained.ranked[0]!
    const [tested] = await runner.run([trialOf(study, winner.params, windows.test.fromMs, windows.test.toMs)])
    trials += trained.trials + 1
    const inSample = figuresOf(settings.objective, windows.train, winner)
    const outOfSample = figuresOf(settings.objective, windows.test, tested!)
    const is = decimalOrUndefined(inSample.perWindow)
    const oos = decimalOrUndefined(outOfSample.perWindow)
    out.push({
      index,
      train: windows.train,
      test: windows.test,
      params: winner.params,
      feasible: winner.feasible,
      inSample,
      outOfSample,
      retention: is !== undefined && oos !== undefined && is.gt(0) ? oos.div(is).toNumber() : null,
      overfit: overfit(is, oos),
      trials: trained.trials + 1
    })
    latest = trained
  }
  return { folds: out, latest: latest!, trials }
}
