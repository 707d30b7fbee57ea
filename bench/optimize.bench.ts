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
 * The cluster's overhead: where PostgreSQL can be started (test/support/postgres.ts), the same
 * trials go through `svcbot optimize --cluster`'s runner to two `svcbot worker` processes on
 * this machine, against two local worker threads. `clusterRatio` is cluster jobs per second over
 * the two threads', and `clusterOverheadMs` the extra wall time per job (persisting the message,
 * routing it, storing the result and the reply). Each worker first prepares the study untimed.
 *
 *   npm run bench -- optimize                        (48 trials of 20,000 candles)
 *   BENCH_CANDLES=50000 BENCH_TRIALS=48 npm run bench -- optimize
 */
import { Effect } from "effect"
import { connectCluster } from "../src/optimize/Cluster.js"
import { freeLoopbackPort, killAll, svcbot } from "../test/support/daemon.js"
import { findPostgres, startPostgres } from "../test/support/postgres.js"
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
/** Two cluster workers should keep at least four fifths of two local threads' throughput on trials this size. */
const CLUSTER_GOAL = 0.8

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
/** Two worker processes on this machine against two local threads, the same trials; undefined where no PostgreSQL can start. */
const clusterFigure = async (): Promise<{ workers: number; jobsPerSecond: number; clusterRatio: number; clusterGoal: number; clusterOverheadMs: number } | undefined> => {
  const tools = findPostgres()
  if ("missing" in tools) {
    process.stdout.write(`cluster overhead not measured: ${tools.missing}\n`)
    return undefined
  }
  const pg = await startPostgres(tools)
  try {
    const workers = await Promise.all([0, 1].map(async () => svcbot(["worker", "--cluster", pg.url, "--host", "127.0.0.1", "--port", String(await freeLoopbackPort())])))
    const session = await connectCluster(pg.url)
    try {
      const runId = await session.results.startRun({ createdAtMs: Date.now(), strategy: study.strategy, sourceHash: study.sourceHash, data: "bench", dataHash: study.dataHash, symbol: spec.symbol, settings: {} })
      const runner = await session.runner(study, job, runId)
      await runner.run(warmup(workers.length))
      const { jobsPerSecond } = await timed(runner)
      const local = scaling.threads2!.jobsPerSecond
      return { workers: workers.length, jobsPerSecond, clusterRatio: jobsPerSecond / local, clusterGoal: CLUSTER_GOAL, clusterOverheadMs: (1 / jobsPerSecond - 1 / local) * 1000 }
    } finally {
      await session.close()
      killAll()
    }
  } finally {
    pg.stop()
  }
}
const cluster = await clusterFigure()
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
    ...(cluster === undefined
      ? []
      : [
          `${`cluster, ${cluster.workers} workers`.padEnd(22)}${cluster.jobsPerSecond.toFixed(2).padStart(10)}   ${cluster.clusterRatio.toFixed(3)} of 2 threads (goal ${cluster.clusterGoal}), ${cluster.clusterOverheadMs.toFixed(1)} ms more per job`
        ]),
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
    ...scaling,
    ...(cluster === undefined ? {} : { cluster })
  })}\n`
)
