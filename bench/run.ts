/**
 * `npm run bench`: runs every bench/*.bench.ts in its own process, one after the
 * other (they measure throughput, so they must not share the two cores), prints
 * each one's table as it runs, then one summary table of every figure.
 *
 *   npm run bench                          every bench
 *   npm run bench -- venue client          only those
 *   npm run bench -- --json FILE           also write { "<bench>.<figure>": { ratio, goal, met } } to FILE
 *
 * Every figure is a ratio against a baseline measured in the same run. The runner
 * reads them from the JSON line each bench prints (an object with a `bench` field):
 * - a numeric `ratio` is the figure of the object holding it, with that object's `goal`;
 * - a numeric field whose name holds `Ratio` (or starts with `ratio`) or ends in `Share`
 *   is a figure of its own, with the sibling `<stem>Goal` (`overheadRatio` -> `overheadGoal`).
 * A number goal means "at least"; a string goal says its direction (`"<= 1.1"`).
 * A bench that exits non-zero or prints no figures fails the run and is named in the summary.
 */
import { spawn } from "node:child_process"
import { readdirSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const here = dirname(fileURLToPath(import.meta.url))

interface Figure {
  readonly bench: string
  readonly figure: string
  readonly ratio: number
  readonly goal: string | null
  readonly met: boolean | null
}

interface Outcome {
  readonly bench: string
  readonly figures: ReadonlyArray<Figure>
  /** Why the bench counts as failed, when it does. */
  readonly failure: string | null
}

const args = process.argv.slice(2)
const jsonAt = args.indexOf("--json")
const jsonFile = jsonAt === -1 ? undefined : args[jsonAt + 1]
if (jsonAt !== -1 && (jsonFile === undefined || jsonFile.startsWith("--"))) {
  process.stderr.write("--json needs a file to write, e.g. npm run bench -- --json /tmp/bench.json\n")
  process.exit(2)
}
const wanted = jsonAt === -1 ? args : args.filter((_, i) => i !== jsonAt && i !== jsonAt + 1)
const benches = readdirSync(here)
  .filter((file) => file.endsWith(".bench.ts"))
  .filter((file) => wanted.length === 0 || wanted.some((name) => file.startsWith(name)))
  .sort()
if (benches.length === 0) {
  process.stderr.write(`no bench matches ${wanted.join(", ")}; the benches are ${readdirSync(here).filter((f) => f.endsWith(".bench.ts")).join(", ")}\n`)
  process.exit(2)
}

const goalText = (goal: unknown): string | null => {
  if (typeof goal === "number") return `>= ${goal}`
  if (typeof goal === "string" && /^(<=|>=)\s*-?\d/.test(goal)) return goal
  return null
}

const meets = (ratio: number, goal: string | null): boolean | null => {
  if (goal === null) return null
  const bound = Number(goal.slice(2))
  return goal.startsWith("<=") ? ratio <= bound : ratio >= bound
}

const isFigureName = (key: string): boolean => key.includes("Ratio") || key.startsWith("ratio") || key.endsWith("Share")

const stemOf = (key: string): string => key.replace(/(Ratio.*|Share)$/, "")

const figuresOf = (bench: string, report: Readonly<Record<string, unknown>>, path: ReadonlyArray<string> = []): Array<Figure> => {
  const found: Array<Figure> = []
  const add = (figure: string, ratio: number, goalValue: unknown) => {
    const goal = goalText(goalValue)
    found.push({ bench, figure, ratio, goal, met: meets(ratio, goal) })
  }
  for (const [key, value] of Object.entries(report)) {
    if (typeof value === "number" && key === "ratio") add(path.length === 0 ? "ratio" : path.join("."), value, report.goal)
    else if (typeof value === "number" && isFigureName(key)) {
      const stem = stemOf(key)
      add([...path, key].join("."), value, report[stem === "" ? "goal" : `${stem}Goal`])
    } else if (typeof value === "object" && value !== null && !Array.isArray(value)) {
      found.push(...figuresOf(bench, value as Record<string, unknown>, [...path, key]))
    }
  }
  return found
}

const reportsIn = (output: string): Array<Record<string, unknown>> =>
  output
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .flatMap((line) => {
      try {
        const parsed: unknown = JSON.parse(line)
        return typeof parsed === "object" && parsed !== null && typeof (parsed as Record<string, unknown>).bench === "string" ? [parsed as Record<string, unknown>] : []
      } catch {
        return []
      }
    })

/** Runs one bench, passing its output through as it comes and keeping it for the figures. */
const runBench = (file: string): Promise<Outcome> =>
  new Promise((done) => {
    const bench = file.replace(/\.bench\.ts$/, "")
    const child = spawn(process.execPath, ["--expose-gc", "--import", "tsx", join(here, file)], { stdio: ["ignore", "pipe", "inherit"] })
    let output = ""
    child.stdout.on("data", (chunk: Buffer) => {
      process.stdout.write(chunk)
      output += chunk.toString("utf8")
    })
    child.once("error", (error) => done({ bench, figures: [], failure: `did not start: ${error.message}` }))
    child.once("close", (code, signal) => {
      const figures = reportsIn(output).flatMap((report) => figuresOf(bench, report))
      const failure = code !== 0 ? `exited with ${code ?? signal}` : figures.length === 0 ? "printed no figures" : null
      done({ bench, figures, failure })
    })
  })

const ratioText = (ratio: number): string => (Math.abs(ratio) >= 0.01 || ratio === 0 ? ratio.toFixed(3) : ratio.toPrecision(3))

const outcomes: Array<Outcome> = []
for (const file of benches) {
  process.stdout.write(`\n=== ${file} ===\n`)
  const outcome = await runBench(file)
  if (outcome.failure !== null) process.stdout.write(`${file} ${outcome.failure}\n`)
  outcomes.push(outcome)
}

const rows = outcomes.flatMap((outcome) => [
  ...outcome.figures.map((f) => `| ${f.bench} | ${f.figure} | ${ratioText(f.ratio)} | ${f.goal ?? ""} | ${f.met === null ? "" : f.met ? "yes" : "no"} |`),
  ...(outcome.failure === null ? [] : [`| ${outcome.bench} | (${outcome.failure}) | | | no |`])
])
process.stdout.write(["", "=== summary ===", "| bench | figure | ratio | goal | met |", "| --- | --- | ---: | --- | --- |", ...rows, ""].join("\n"))

if (jsonFile !== undefined) {
  const byName: Record<string, { ratio: number | null; goal: string | null; met: boolean | null; failure?: string }> = {}
  for (const outcome of outcomes) {
    for (const f of outcome.figures) byName[`${f.bench}.${f.figure}`] = { ratio: f.ratio, goal: f.goal, met: f.met }
    if (outcome.failure !== null) byName[outcome.bench] = { ratio: null, goal: null, met: false, failure: outcome.failure }
  }
  writeFileSync(jsonFile, `${JSON.stringify(byName, null, 2)}\n`)
}

process.exitCode = outcomes.every((outcome) => outcome.failure === null) ? 0 : 1
