/**
 * The garbage collector's setting for a process that runs backtest after backtest in one isolate
 * (optimisation trials, sweeps): V8's allocation-site pretenuring is turned off.
 *
 * Why: each run allocates its containers (the matching engine's maps, the fill log, the metrics'
 * lots) once, and they live for the whole run. When a scavenge lands mid-run V8 sees those sites'
 * objects survive and may start allocating them straight in the old generation. From then on
 * every young object such a container points to (fills, orders, their Decimals) is kept by it
 * through the remembered set after the run has ended, until a full collection: in a 20,000-candle
 * sma-crossover trial loop, each scavenge copied and promoted 3.5 MB instead of 1.4, and a trial
 * took 6.7-8 ms instead of 5.4-5.9. Whether a site gets pretenured depends on where the early
 * scavenges land, so an isolate settled at random into the fast or the slow speed and kept it.
 * A single long backtest gains nothing measurable, so the CLI's one-off runs keep V8's default.
 *
 * The flag is process-wide and read by the collector at each cycle, so setting it once before the
 * runs start covers this thread and every worker thread of the process.
 */
import { setFlagsFromString } from "node:v8"

let applied = false

export const collectForRepeatedRuns = (): void => {
  if (applied) return
  applied = true
  setFlagsFromString("--no-allocation-site-pretenuring")
}
