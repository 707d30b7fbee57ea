/**
 * Optimisation throughput: trials (one sma-crossover backtest each, distinct params, the
 * whole synthetic tape) per second on 1, 2 and 3 worker threads, against the same trials run
 * one after another on the main thread, all in this run. The figures are the scaling ratios:
 * worker jobs per second over main-thread jobs per second. Each runner first runs
 * `WARMUP_PER_THREAD` trials per thread untimed (module loading and the JIT's compilations:
 * every worker thread compiles the backtest afresh), and the main-thread
 * baseline is timed before and after the workers and averaged, so a change in the machine's
 * load during the run weighs on both sides.
 *
 * On a machine shared with other work the wall-clock ratios say little (more threads only
 * claim a larger share of busy cores), so each runner's CPU time per trial (every thread of
 * this process) is compared too: `cpuRatio` is the main thread's CPU seconds per trial over the
 * runner's, 1 when the worker threads cost nothing beyond the trials themselves.
 *
 *   npm run bench -- optimize                        (48 trials of 20,000 candles)
 *   BENCH_CANDLES=50000 BENCH_TRIALS=48 npm run bench -- optimize
 */
import { Effect } from "effect"
import { type JobSpec, prepare } from "../src/backtest/Job.js"
import { inProcessRunner, startWorkerRunner, type TrialRunner } from "../src/optimize/Runner.js"
import { type Trial, studyOf, trialOf } from "../src/optimize/Trial.js"
import { canonicalParams } from "../src/domain/Hash.js"

const candles = Number(process.env.BENCH_CANDLES ?? 20_000)
const trialCount = Number(process.env.BENCH_TRIALS ?? 48)
if (!Number.isSafeInteger(candles) || candles < 1000) throw new Error(`BENCH_CANDLES must be a whole number of at least 1000, got ${process.env.BENCH_CANDLES}`)
if (!Number.isSafeInteger(trialCount) || trialCount < 3) throw new Error(`BENCH_TRIALS must be a whole number of at least 3, got ${process.env.BENCH_TRIALS}`)

/** What each thread count should reach over the main thread on the two-core machine. */
const GOALS: Readonly<Record<number, number>> = { 1: 0.9, 2: 1.6, 3: 1.6 }
/** A worker thread should spend at most a tenth more CPU per trial than the main thread. */
const CPU_GOAL = 0.9

const spec: JobSpec = {
  strategy: "sma-crossover",
  data: { kind: "synthetic", seed: 42, candles },
  symbol: "BTCUSDT",
  balances: { USDT: "100000" },
  settleDelayMs: 50,
  cwd: process.cwd()
}
const job = await Effect.runPromise(prepare(spec))
const study = studyOf(job)
/** Distinct params, so that no trial is the same job as another. */
const paramsOf = (i: number) => canonicalParams({ fastPeriod: 3 + (i % 12), slowPeriod: 30 + 10 * Math.floor(i / 12), entry: "market", quoteQty: "1000" })
const trials: ReadonlyArray<Trial> = Array.from({ length: trialCount }, (_, i) => trialOf(study, paramsOf(i), study.fromMs, study.toMs))
const WARMUP_PER_THREAD = 4
const warmup = (threads: number): ReadonlyArray<Trial> =>
  Array.from({ length: threads * WARMUP_PER_THREAD }, (_, i) => trialOf(study, paramsOf(trialCount + i), study.fromMs, study.toMs))

const seconds = (fromNs: bigint): number => Number(process.hrtime.bigint() - fromNs) / 1e9

interface Timing {
  readonly jobsPerSecond: number
  readonly cpuSecondsPerJob: number
}

const timed = async (runner: TrialRunner): Promise<Timing> => {
  const started = process.hrtime.bigint()
  const cpuStarted = process.cpuUsage()
  const results = await runner.run(trials)
  const elapsed = seconds(started)
  const cpu = process.cpuUsage(cpuStarted)
  const failed = results.find((r) => r.error !== undefined)
  if (failed !== undefined) throw new Error(`a trial failed: ${failed.error}`)
  return { jobsPerSecond: trials.length / elapsed, cpuSecondsPerJob: (cpu.user + cpu.system) / 1e6 / trials.length }
}

const main = inProcessRunner(job)
await main.run(warmup(1))
const baselineBefore = await timed(main)

const scaling: Record<string, { threads: number; jobsPerSecond: number; cpuSecondsPerJob: number; startSeconds: number; ratio: number; goal: number; cpuRatio: number; cpuGoal: number }> = {}
for (const threads of [1, 2, 3]) {
  const started = process.hrtime.bigint()
  const runner = await startWorkerRunner(spec, threads)
  const startSeconds = seconds(started)
  try {
    await runner.run(warmup(threads))
    const { jobsPerSecond, cpuSecondsPerJob } = await timed(runner)
    scaling[`threads${threads}`] = { threads, jobsPerSecond, cpuSecondsPerJob, startSeconds, ratio: 0, goal: GOALS[threads]!, cpuRatio: 0, cpuGoal: CPU_GOAL }
  } finally {
    await runner.close()
  }
}
const baselineAfter = await timed(main)
const baseline = (baselineBefore.jobsPerSecond + baselineAfter.jobsPerSecond) / 2
const baselineCpu = (baselineBefore.cpuSecondsPerJob + baselineAfter.cpuSecondsPerJob) / 2
for (const figure of Object.values(scaling)) {
  figure.ratio = figure.jobsPerSecond / baseline
  figure.cpuRatio = baselineCpu / figure.cpuSecondsPerJob
}

process.stdout.write(
  [
    `optimisation throughput: ${trialCount} sma-crossover trials of ${candles} synthetic one-minute candles each`,
    `${"runner".padEnd(22)}${"jobs/s".padStart(10)}${"vs main".padStart(10)}${"goal".padStart(8)}${"CPU s/job".padStart(11)}${"vs main".padStart(10)}${"start s".padStart(10)}`,
    `${"main thread".padEnd(22)}${baseline.toFixed(2).padStart(10)}${"1.000".padStart(10)}${"".padStart(8)}${baselineCpu.toFixed(4).padStart(11)}${"1.000".padStart(10)}${"".padStart(10)}`,
    ...Object.values(scaling).map(
      (f) =>
        `${`${f.threads} worker thread${f.threads === 1 ? "" : "s"}`.padEnd(22)}${f.jobsPerSecond.toFixed(2).padStart(10)}${f.ratio.toFixed(3).padStart(10)}${f.goal.toFixed(1).padStart(8)}${f.cpuSecondsPerJob.toFixed(4).padStart(11)}${f.cpuRatio.toFixed(3).padStart(10)}${f.startSeconds.toFixed(2).padStart(10)}`
    ),
    `main thread before and after the workers: ${baselineBefore.jobsPerSecond.toFixed(2)} and ${baselineAfter.jobsPerSecond.toFixed(2)} jobs/s`,
    ""
  ].join("\n")
)
process.stdout.write(
  `${JSON.stringify({
    bench: "optimize",
    candles,
    trials: trialCount,
    mainJobsPerSecond: baseline,
    mainJobsPerSecondBefore: baselineBefore.jobsPerSecond,
    mainJobsPerSecondAfter: baselineAfter.jobsPerSecond,
    mainCpuSecondsPerJob: baselineCpu,
    ...scaling
  })}\n`
)
