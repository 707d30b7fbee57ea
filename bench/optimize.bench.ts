/**
 * Optimisation throughput: trials (one sma-crossover backtest each, distinct params, the
 * whole synthetic tape) per second on worker threads and on a cluster, against the same trials
 * on the main thread, all in this run. Each runner first runs `WARMUP_PER_THREAD` trials per
 * thread untimed (module loading and the JIT's compilations: every worker thread compiles the
 * backtest afresh).
 *
 * - `threads1`, `threads3`: one and three worker threads over the main thread, each timed
 *   once beside the main thread's mean of a timing before and after them.
 * - `twoThreadsVsMainRatio`: two worker threads over the main thread, the median of
 *   `BENCH_ROUNDS` rounds each timing the main thread then the two threads: a change in the
 *   machine's load weighs on both sides of a round. The main thread only hands trials out and
 *   takes results in while the two threads run, so the goal is most of two cores.
 * - `clusterVsThreadsRatio`: where PostgreSQL can be started (test/support/postgres.ts), two
 *   `svcbot worker` processes on this machine fed by `svcbot optimize --cluster`'s runner,
 *   over two local worker threads, the median of `BENCH_ROUNDS` rounds of
 *   `BENCH_CLUSTER_TRIALS` fresh trials each (a trial already stored would be answered without
 *   running; by default as many as the main thread runs in 8 s): several seconds of work a worker, so that batches of about a second's work shrink
 *   towards the end as a real run's do. `clusterOverheadMs` is the extra wall time per trial.
 *
 * On a machine shared with other work the wall-clock ratios say little (more threads only
 * claim a larger share of busy cores), so the CPU time per trial is compared too: `cpuRatio` is
 * the main thread's CPU seconds per trial over the runner's (every thread of this process), and
 * `clusterCpuRatio` the two threads' over the cluster's (the workers, this process and the
 * PostgreSQL server, read from /proc): 1 when a runner costs nothing beyond the trials.
 *
 *   npm run bench -- optimize                        (96 trials of 20,000 candles a timing, 5 rounds)
 *   BENCH_CANDLES=50000 BENCH_TRIALS=96 BENCH_CLUSTER_TRIALS=2000 BENCH_ROUNDS=5 npm run bench -- optimize
 */
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { Effect } from "effect"
import { connectCluster } from "../src/optimize/Cluster.js"
import { freeLoopbackPort, killAll, svcbot } from "../test/support/daemon.js"
import { findPostgres, startPostgres } from "../test/support/postgres.js"
import { type JobSpec, prepare } from "../src/backtest/Job.js"
import { inProcessRunner, startWorkerRunner, type TrialRunner } from "../src/optimize/Runner.js"
import { type Trial, studyOf, trialOf } from "../src/optimize/Trial.js"
import { canonicalParams } from "../src/domain/Hash.js"
import { wholeNumber } from "./Knobs.js"

const candles = wholeNumber("BENCH_CANDLES", 20_000, 1000)
const trialCount = wholeNumber("BENCH_TRIALS", 96, 3)
/** A cluster round's work when BENCH_CLUSTER_TRIALS is not given: four seconds of the main thread's trial time a worker. */
const CLUSTER_ROUND_SECONDS = 8
const rounds = wholeNumber("BENCH_ROUNDS", 5, 1)

/** What one and three threads should reach over the main thread on the two-core machine. */
const GOALS: Readonly<Record<number, number>> = { 1: 0.9, 3: 1.6 }
/** Two threads should use most of the two cores: the main thread does not compete for one. */
const TWO_THREADS_GOAL = 1.6
/** A worker thread should spend at most a tenth more CPU per trial than the main thread. */
const CPU_GOAL = 0.9
/** Two cluster workers should keep at least four fifths of two local threads' throughput on trials this size. */
const CLUSTER_GOAL = 0.8
/** ... and spend at most a tenth more CPU per trial, the messages and the database included. */
const CLUSTER_CPU_GOAL = 0.9

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
/**
 * Distinct params for each i, so that no trial is the same job as another. The periods come round
 * again every `PERIODS_CYCLE` trials with another quote amount, so that the fresh trials of a
 * cluster round cost what the timed ones do: with periods growing without end, a cluster round's
 * trials cost a quarter of the timed ones, and a round sized as 8 s of the main thread's trials
 * gave each worker a little over a second of work, one or two batches.
 */
const PERIODS_CYCLE = 96
const paramsOf = (i: number) =>
  canonicalParams({
    fastPeriod: 3 + (i % 12),
    slowPeriod: 30 + 10 * Math.floor((i % PERIODS_CYCLE) / 12),
    entry: "market",
    quoteQty: String(1000 + Math.floor(i / PERIODS_CYCLE))
  })
/** `count` trials from the `from`th params on. */
const trialsFrom = (from: number, count: number): ReadonlyArray<Trial> =>
  Array.from({ length: count }, (_, i) => trialOf(study, paramsOf(from + i), study.fromMs, study.toMs))
const trials = trialsFrom(0, trialCount)
/**
 * Half a timing's trials a thread: four left a fresh thread's code still being compiled through
 * its timing (the first round of two threads ran at 1.05-1.16 of the main thread, the later ones
 * at 1.6-1.8), and one thread timed once read as 0.66-0.79 of the main thread.
 */
const WARMUP_PER_THREAD = 48
/** Params past every timed trial's. */
let unused = trialCount
const fresh = (count: number): ReadonlyArray<Trial> => {
  const drawn = trialsFrom(unused, count)
  unused += count
  return drawn
}
const warmup = (threads: number): ReadonlyArray<Trial> => fresh(threads * WARMUP_PER_THREAD)

const seconds = (fromNs: bigint): number => Number(process.hrtime.bigint() - fromNs) / 1e9
const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

interface Timing {
  readonly jobsPerSecond: number
  readonly cpuSecondsPerJob: number
}

/** Runs the trials on the runner; CPU is this process's, plus what `otherCpuSeconds` reads of other processes. */
const timed = async (runner: TrialRunner, batch: ReadonlyArray<Trial> = trials, otherCpuSeconds: () => number = () => 0): Promise<Timing> => {
  const started = process.hrtime.bigint()
  const cpuStarted = process.cpuUsage()
  const otherStarted = otherCpuSeconds()
  const results = await runner.run(batch)
  const elapsed = seconds(started)
  const cpu = process.cpuUsage(cpuStarted)
  const other = otherCpuSeconds() - otherStarted
  const failed = results.find((r) => r.error !== undefined)
  if (failed !== undefined) throw new Error(`a trial failed: ${failed.error}`)
  return { jobsPerSecond: batch.length / elapsed, cpuSecondsPerJob: ((cpu.user + cpu.system) / 1e6 + other) / batch.length }
}

const main = inProcessRunner(job)
await main.run(warmup(1))
const baselineBefore = await timed(main)
/** Sized by work rather than by count: a trial's time changes with the backtester, a second of work a batch does not. */
const clusterTrialCount = process.env.BENCH_CLUSTER_TRIALS === undefined
  ? Math.min(5000, Math.max(trialCount, Math.ceil(CLUSTER_ROUND_SECONDS * baselineBefore.jobsPerSecond)))
  : wholeNumber("BENCH_CLUSTER_TRIALS", 0, 3)

interface Scaling {
  readonly threads: number
  readonly jobsPerSecond: number
  readonly cpuSecondsPerJob: number
  readonly startSeconds: number
  ratio: number
  readonly goal: number
  cpuRatio: number
  readonly cpuGoal: number
}
const scaling: Record<string, Scaling> = {}
for (const threads of [1, 3]) {
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

/** The CPU seconds a process has used, from /proc (utime and stime, and with `reaped` those of its children it waited for). */
const TICKS_PER_SECOND = 100
const processCpuSeconds = (pid: number, reaped = false): number => {
  try {
    // Fields after the command's closing parenthesis: state is the 3rd field, utime the 14th.
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /s, "").split(" ")
    const ticks = Number(fields[11]) + Number(fields[12]) + (reaped ? Number(fields[13]) + Number(fields[14]) : 0)
    return ticks / TICKS_PER_SECOND
  } catch {
    return 0
  }
}
/** The PostgreSQL server listening on `port`: its postmaster, found by its command line, and every process it started. */
const postgresCpuSeconds = (port: number): (() => number) => {
  const pids = existsSync("/proc") ? readdirSync("/proc").filter((name) => /^\d+$/.test(name)).map(Number) : []
  const postmaster = pids.find((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").includes(` -p ${port} `)
    } catch {
      return false
    }
  })
  if (postmaster === undefined) return () => 0
  return () => {
    let total = processCpuSeconds(postmaster, true)
    for (const name of readdirSync("/proc")) {
      if (!/^\d+$/.test(name)) continue
      try {
        if (readFileSync(`/proc/${name}/stat`, "utf8").replace(/^.*\) /s, "").split(" ")[1] === String(postmaster)) total += processCpuSeconds(Number(name))
      } catch {
        // The process ended between the listing and the read: its time is in the postmaster's reaped time.
      }
    }
    return total
  }
}

const twoThreadsStarted = process.hrtime.bigint()
const twoThreads = await startWorkerRunner(spec, 2)
const twoThreadsStartSeconds = seconds(twoThreadsStarted)

interface Cluster {
  readonly workers: number
  readonly trials: number
  readonly jobsPerSecond: number
  readonly threadsJobsPerSecond: number
  readonly clusterOverheadMs: number
  readonly cpuSecondsPerJob: number
  readonly threadsCpuSecondsPerJob: number
  readonly clusterCpuRatio: number
  readonly clusterCpuGoal: number
  readonly roundRatios: ReadonlyArray<number>
  /** The cluster's CPU milliseconds per trial by where they were spent (medians of the rounds). */
  readonly cpuMsPerJob: { readonly workers: number; readonly runner: number; readonly postgres: number }
}

/** One cluster round's CPU milliseconds per trial: the two worker processes, this process (the run's runner), the PostgreSQL server. */
interface CpuParts {
  readonly workersMs: number
  readonly runnerMs: number
  readonly postgresMs: number
}

try {
  await twoThreads.run(warmup(2))
  const twoThreadsRounds: Array<{ main: Timing; threads: Timing }> = []
  for (let round = 0; round < rounds; round++) twoThreadsRounds.push({ main: await timed(main), threads: await timed(twoThreads) })

  /** Two worker processes on this machine against the two local threads, the same trials each round; undefined where no PostgreSQL can start. */
  const clusterFigure = async (): Promise<Cluster | undefined> => {
    const tools = findPostgres()
    if ("missing" in tools) {
      process.stdout.write(`cluster not measured: ${tools.missing}\n`)
      return undefined
    }
    const pg = await startPostgres(tools)
    try {
      const workers = await Promise.all([0, 1].map(async () => svcbot(["worker", "--cluster", pg.url, "--host", "127.0.0.1", "--port", String(await freeLoopbackPort())])))
      const session = await connectCluster(pg.url)
      try {
        const postgresCpu = postgresCpuSeconds(Number(new URL(pg.url).port))
        const workersCpu = () => workers.reduce((sum, worker) => sum + processCpuSeconds(worker.child.pid!), 0)
        const otherCpu = () => postgresCpu() + workersCpu()
        const runId = await session.results.startRun({ createdAtMs: Date.now(), strategy: study.strategy, sourceHash: study.sourceHash, data: "bench", dataHash: study.dataHash, symbol: spec.symbol, settings: {} })
        const runner = await session.runner(study, job, runId)
        // Untimed: each worker prepares the study, the run learns the trial time and where its lanes go.
        await runner.run(warmup(workers.length))
        await runner.run(fresh(trialCount))
        const measured: Array<{ threads: Timing; cluster: Timing; parts: CpuParts }> = []
        for (let round = 0; round < rounds; round++) {
          const batch = fresh(clusterTrialCount)
          const threads = await timed(twoThreads, batch)
          const before = { workers: workersCpu(), postgres: postgresCpu() }
          const cluster = await timed(runner, batch, otherCpu)
          const workersMs = ((workersCpu() - before.workers) / batch.length) * 1000
          const postgresMs = ((postgresCpu() - before.postgres) / batch.length) * 1000
          measured.push({ threads, cluster, parts: { workersMs, postgresMs, runnerMs: cluster.cpuSecondsPerJob * 1000 - workersMs - postgresMs } })
        }
        const roundRatios = measured.map((m) => m.cluster.jobsPerSecond / m.threads.jobsPerSecond)
        const middle = measured[roundRatios.indexOf(median(roundRatios))] ?? measured[0]!
        const cpuSecondsPerJob = median(measured.map((m) => m.cluster.cpuSecondsPerJob))
        const cpuMsPerJob = {
          workers: median(measured.map((m) => m.parts.workersMs)),
          runner: median(measured.map((m) => m.parts.runnerMs)),
          postgres: median(measured.map((m) => m.parts.postgresMs))
        }
        const threadsCpuSecondsPerJob = median(measured.map((m) => m.threads.cpuSecondsPerJob))
        return {
          workers: workers.length,
          trials: clusterTrialCount,
          jobsPerSecond: middle.cluster.jobsPerSecond,
          threadsJobsPerSecond: middle.threads.jobsPerSecond,
          clusterOverheadMs: (1 / middle.cluster.jobsPerSecond - 1 / middle.threads.jobsPerSecond) * 1000,
          cpuSecondsPerJob,
          threadsCpuSecondsPerJob,
          clusterCpuRatio: threadsCpuSecondsPerJob / cpuSecondsPerJob,
          clusterCpuGoal: CLUSTER_CPU_GOAL,
          roundRatios,
          cpuMsPerJob
        }
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
  const twoThreadsRatios = twoThreadsRounds.map((r) => r.threads.jobsPerSecond / r.main.jobsPerSecond)
  const twoThreadsVsMainRatio = median(twoThreadsRatios)
  const twoThreadsMiddle = twoThreadsRounds[twoThreadsRatios.indexOf(twoThreadsVsMainRatio)] ?? twoThreadsRounds[0]!
  const twoThreadsCpuRatio = median(twoThreadsRounds.map((r) => r.main.cpuSecondsPerJob / r.threads.cpuSecondsPerJob))
  const clusterVsThreadsRatio = cluster === undefined ? undefined : median(cluster.roundRatios)

  const row = (name: string, jobsPerSecond: number, ratio: string, goal: string, cpu: number, cpuRatio: string, start: string) =>
    `${name.padEnd(24)}${jobsPerSecond.toFixed(2).padStart(10)}${ratio.padStart(10)}${goal.padStart(8)}${cpu.toFixed(4).padStart(11)}${cpuRatio.padStart(10)}${start.padStart(10)}`
  const threadsRow = (f: Scaling) => row(`${f.threads} worker thread${f.threads === 1 ? "" : "s"}`, f.jobsPerSecond, f.ratio.toFixed(3), f.goal.toFixed(1), f.cpuSecondsPerJob, f.cpuRatio.toFixed(3), f.startSeconds.toFixed(2))
  process.stdout.write(
    [
      `optimisation throughput: sma-crossover trials of ${candles} synthetic one-minute candles each, ${trialCount} a timing (${clusterTrialCount} a cluster round), ${rounds} rounds`,
      `${"runner".padEnd(24)}${"jobs/s".padStart(10)}${"vs main".padStart(10)}${"goal".padStart(8)}${"CPU s/job".padStart(11)}${"vs main".padStart(10)}${"start s".padStart(10)}`,
      row("main thread", baseline, "1.000", "", baselineCpu, "1.000", ""),
      threadsRow(scaling.threads1!),
      row("2 worker threads", twoThreadsMiddle.threads.jobsPerSecond, twoThreadsVsMainRatio.toFixed(3), TWO_THREADS_GOAL.toFixed(1), twoThreadsMiddle.threads.cpuSecondsPerJob, twoThreadsCpuRatio.toFixed(3), twoThreadsStartSeconds.toFixed(2)),
      threadsRow(scaling.threads3!),
      `2 threads over main, round by round: ${twoThreadsRatios.map((r) => r.toFixed(3)).join(", ")}`,
      ...(cluster === undefined || clusterVsThreadsRatio === undefined
        ? []
        : [
            `cluster, ${cluster.workers} workers: ${cluster.jobsPerSecond.toFixed(2)} jobs/s against ${cluster.threadsJobsPerSecond.toFixed(2)} on 2 threads, ${clusterVsThreadsRatio.toFixed(3)} of them (goal ${CLUSTER_GOAL}; rounds ${cluster.roundRatios.map((r) => r.toFixed(3)).join(", ")}), ${cluster.clusterOverheadMs.toFixed(1)} ms more per job`,
            `cluster CPU per job (workers, this process, PostgreSQL): ${cluster.cpuSecondsPerJob.toFixed(4)} s against ${cluster.threadsCpuSecondsPerJob.toFixed(4)} on 2 threads, ${cluster.clusterCpuRatio.toFixed(3)} (goal ${CLUSTER_CPU_GOAL}); ` +
              `by part ${cluster.cpuMsPerJob.workers.toFixed(2)} ms in the workers, ${cluster.cpuMsPerJob.runner.toFixed(2)} in this process, ${cluster.cpuMsPerJob.postgres.toFixed(2)} in PostgreSQL`
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
      rounds,
      mainJobsPerSecond: baseline,
      mainJobsPerSecondBefore: baselineBefore.jobsPerSecond,
      mainJobsPerSecondAfter: baselineAfter.jobsPerSecond,
      mainCpuSecondsPerJob: baselineCpu,
      ...scaling,
      twoThreadsVsMainRatio,
      twoThreadsVsMainGoal: TWO_THREADS_GOAL,
      twoThreads: { jobsPerSecond: twoThreadsMiddle.threads.jobsPerSecond, startSeconds: twoThreadsStartSeconds, roundRatios: twoThreadsRatios, cpuRatio: twoThreadsCpuRatio, cpuGoal: CPU_GOAL },
      ...(cluster === undefined ? {} : { clusterVsThreadsRatio, clusterVsThreadsGoal: CLUSTER_GOAL, cluster })
    })}\n`
  )
} finally {
  await twoThreads.close()
}
