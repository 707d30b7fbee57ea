/**
 * The garbage collector's setting for a process that runs backtest after backtest in one isolate
 * (optimisation trials, sweeps): V8's allocation-site pretenuring is turned off.
 *
 * Why: V8 starts allocating an object or array literal straight in the old generation once most of
 * its objects are seen to survive scavenges, and a run makes records that live from their moment
 * to the run's end (its fills, holdings, the metrics' lots). Allocated old, such a record is not
 * known dead when its run ends, so the young objects it points to (Decimals, orders) survive
 * every scavenge until a full collection, and are copied and promoted. In a loop of 20,000-candle
 * sma-crossover trials, each scavenge promoted 3.5 MB where it promotes 1.4 without pretenuring,
 * and two threads side by side took 7.8-8.5 ms a trial instead of 6.7-7.4 (docs/optimize.md).
 * Which sites get pretenured depends on where the first scavenges land in a run, so an isolate
 * settled at random into the fast or the slow speed and kept it. One long backtest gains nothing
 * measurable, so the CLI's single runs keep V8's default.
 *
 * The flag is process-wide and the collector reads it at every cycle: set once before the runs
 * start, it covers this thread and every worker thread of the process.
 */
import { setFlagsFromString } from "node:v8"

/** Setting the flag again is harmless: each runner sets it as it starts, whichever started first. */
export const collectForRepeatedRuns = (): void => setFlagsFromString("--no-allocation-site-pretenuring")
