/**
 * Where trials run. The search hands a runner a batch of trials and gets their
 * results back in the same order; it never sees threads. Two local runners: this
 * thread (`inProcessRunner`), and a pool of worker threads that each prepare the
 * job once (`startWorkerRunner`). The cluster's runner (`Cluster.ts`) answers the
 * same interface, and `recordedRunner` puts the results store in front of any of them.
 */
import type { Worker } from "node:worker_threads"
import { Data } from "effect"
import type { JobSpec, PreparedJob } from "../backtest/Job.js"
import type { ResultsBackend } from "./Results.js"
import { runTrial, type Trial, type TrialResult } from "./Trial.js"
import { collectForRepeatedRuns } from "../backtest/Collector.js"
import { startModuleWorker } from "../domain/ModuleWorker.js"

export interface TrialRunner {
  /** Runs every trial; the results come in the order of the trials. */
  readonly run: (trials: ReadonlyArray<Trial>) => Promise<ReadonlyArray<TrialResult>>
  readonly close: () => Promise<void>
}

/** A message from a trial worker. */
export type WorkerAnswer =
  | { readonly type: "ready" }
  | { readonly type: "failed"; readonly message: string }
  | { readonly type: "result"; readonly slot: number; readonly result: TrialResult }

export class RunnerFailed extends Data.TaggedError("RunnerFailed")<{ readonly message: string }> {}

/** Runs trials one after another on this thread. */
export const inProcessRunner = (job: PreparedJob): TrialRunner => {
  collectForRepeatedRuns()
  return {
    run: (trials) => Promise.resolve(trials.map((trial) => runTrial(job, trial))),
    close: () => Promise.resolve()
  }
}

interface Batch {
  readonly trials: ReadonlyArray<Trial>
  readonly results: Array<TrialResult>
  next: number
  done: number
  readonly resolve: (results: ReadonlyArray<TrialResult>) => void
  readonly reject: (error: Error) => void
}

/** Trials in flight per worker thread: the next waits in its queue while it runs one, so it never idles while this thread answers. */
const QUEUED_PER_THREAD = 2

/**
 * Starts `threads` workers and waits until each has prepared the job; fails with the job's
 * own problem (an unknown strategy, unreadable data) when they cannot. One batch runs at a time.
 */
export const startWorkerRunner = (spec: JobSpec, threads: number): Promise<TrialRunner> =>
  new Promise((resolveStart, rejectStart) => {
    // Each thread runs trial after trial; the flag covers every thread of the process.
    collectForRepeatedRuns()
    const workers: Array<Worker> = []
    let ready = 0
    let started = false
    let broken: Error | undefined
    let batch: Batch | undefined
    const fail = (error: Error) => {
      if (broken !== undefined) return
      broken = error
      for (const worker of workers) void worker.terminate()
      if (!started) rejectStart(error)
      batch?.reject(error)
      batch = undefined
    }
    const queued = new Map<Worker, number>()
    /**
     * Tops the worker's queue up; near the batch's end to one trial: a trial queued behind
     * another while a worker idles would hold the batch up.
     */
    const feed = (worker: Worker) => {
      for (;;) {
        const current = batch
        if (current === undefined || current.next >= current.trials.length) return
        const depth = current.trials.length - current.next >= workers.length ? QUEUED_PER_THREAD : 1
        if ((queued.get(worker) ?? 0) >= depth) return
        const slot = current.next++
        queued.set(worker, (queued.get(worker) ?? 0) + 1)
        worker.postMessage({ slot, trial: current.trials[slot] })
      }
    }
    const runner: TrialRunner = {
      run: (trials) =>
        new Promise((resolve, reject) => {
          if (broken !== undefined) return reject(broken)
          if (batch !== undefined) return reject(new RunnerFailed({ message: "a batch is already running on this runner" }))
          if (trials.length === 0) return resolve([])
          batch = { trials, results: new Array<TrialResult>(trials.length), next: 0, done: 0, resolve, reject }
          for (const worker of workers) feed(worker)
        }),
      close: async () => {
        broken ??= new RunnerFailed({ message: "the runner is closed" })
        await Promise.all(workers.map((worker) => worker.terminate()))
      }
    }
    for (let w = 0; w < Math.max(1, threads); w++) {
      const worker = startModuleWorker(import.meta.url, "TrialWorker", spec)
      workers.push(worker)
      worker.on("message", (message: WorkerAnswer) => {
        if (message.type === "failed") return fail(new RunnerFailed({ message: message.message }))
        if (message.type === "ready") {
          if (++ready === workers.length) {
            started = true
            resolveStart(runner)
          }
          return
        }
        queued.set(worker, queued.get(worker)! - 1)
        const current = batch
        if (current === undefined) return
        current.results[message.slot] = message.result
        if (++current.done === current.trials.length) {
          batch = undefined
          current.resolve(current.results)
        } else feed(worker)
      })
      worker.on("error", (error) => fail(error))
      worker.on("exit", (code) => {
        if (code !== 0) fail(new RunnerFailed({ message: `a trial worker exited with code ${code}` }))
      })
    }
  })

/**
 * The results store in front of a runner: a trial whose key already has a result in this run
 * is read back instead of run, a key met twice in one batch runs once, and each new result is
 * written once (a second write of a key is ignored), so re-running a run's trial writes nothing twice.
 */
export const recordedRunner = (runner: TrialRunner, store: ResultsBackend, runId: number): TrialRunner => ({
  run: async (trials) => {
    const known = new Map<string, TrialResult>()
    for (const trial of trials) {
      const stored = await store.result(runId, trial.key)
      if (stored !== undefined) known.set(trial.key, stored)
    }
    const missing = new Map<string, Trial>()
    for (const trial of trials) if (!known.has(trial.key) && !missing.has(trial.key)) missing.set(trial.key, trial)
    const fresh = await runner.run([...missing.values()])
    await store.record(runId, [...missing.values()], fresh)
    for (const result of fresh) known.set(result.key, result)
    return trials.map((trial) => known.get(trial.key)!)
  },
  close: runner.close
})
