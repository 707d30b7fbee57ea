/**
 * A sweep worker thread: prepares the job once (strategy module and candles),
 * then runs each combination it is sent and answers with its metrics.
 */
import { parentPort, workerData } from "node:worker_threads"
import { Effect, Either } from "effect"
import { parse } from "../domain/Json.js"
import { type JobSpec, prepare, runPrepared } from "./Job.js"
import { metricsToJson } from "./Metrics.js"
import type { WorkerMessage } from "./Sweep.js"

const port = parentPort!
const post = (message: WorkerMessage): void => port.postMessage(message)

const prepared = await Effect.runPromise(Effect.either(prepare(workerData as JobSpec)))
if (Either.isLeft(prepared)) {
  post({ type: "failed", message: prepared.left.message })
} else {
  const job = prepared.right
  port.on("message", ({ index, params }: { readonly index: number; readonly params: string }) => {
    const outcome = runPrepared(job, parse(params))
    post({
      type: "result",
      result: Either.isRight(outcome)
        ? { index, params, metrics: metricsToJson(outcome.right.metrics) }
        : { index, params, error: outcome.left.message }
    })
  })
  post({ type: "ready" })
}
