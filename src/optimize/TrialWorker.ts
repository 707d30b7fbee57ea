/**
 * A worker thread of the local trial runner: prepares the job once (strategy
 * module and candles), then runs each trial it is sent and answers with its result.
 */
import { parentPort, workerData } from "node:worker_threads"
import { Effect, Either } from "effect"
import { type JobSpec, prepare } from "../backtest/Job.js"
import type { WorkerAnswer } from "./Runner.js"
import { runTrial, type Trial } from "./Trial.js"

const port = parentPort!
const answer = (message: WorkerAnswer): void => port.postMessage(message)

const prepared = await Effect.runPromise(Effect.either(prepare(workerData as JobSpec)))
if (Either.isLeft(prepared)) {
  answer({ type: "failed", message: prepared.left.message })
} else {
  const job = prepared.right
  port.on("message", ({ slot, trial }: { readonly slot: number; readonly trial: Trial }) => answer({ type: "result", slot, result: runTrial(job, trial) }))
  answer({ type: "ready" })
}
