/**
 * Waiting before a timed section until the process is idle. What ran before it (building a
 * tape, opening and migrating an engine's database, the other side of a comparison) leaves work
 * on V8's own threads: the collector sweeping and marking, the compiler optimising. Timed at
 * once, a section pays for that work, which is no part of what it measures. The wait blocks the
 * event loop in slices of IDLE_SLICE_MS until one slice in which the process used under a tenth
 * of the slice's CPU time (at most SETTLE_MAX_MS): then only V8's threads could have run, and
 * they are done.
 */
const IDLE_SLICE_MS = 50
const SETTLE_MAX_MS = 3000
const pause = new Int32Array(new SharedArrayBuffer(4))

export const awaitIdle = (): void => {
  const deadline = Date.now() + SETTLE_MAX_MS
  while (Date.now() < deadline) {
    const slice = process.cpuUsage()
    Atomics.wait(pause, 0, 0, IDLE_SLICE_MS)
    const used = process.cpuUsage(slice)
    if ((used.user + used.system) / 1000 < IDLE_SLICE_MS / 10) return
  }
}

/**
 * A full collection, then `awaitIdle`: the garbage of what ran before is not charged to the timed
 * section. Needs --expose-gc, which `npm run bench` passes.
 * - A plain major collection, not the last-resort kind: that one shrinks the young generation to
 *   save memory, so the backtest run after it started with a few megabytes of it and paid 45 to 53
 *   scavenges instead of 5, a quarter of its time, which no backtest outside the bench pays.
 * - `gc()` returns while the collector's threads still sweep the half-gigabyte tape heap, for a few
 *   hundred milliseconds: timed at once, the bare loop read the tape at a third of its speed.
 * - It drops code V8 optimised for objects that died, so what runs after it runs cold: the
 *   backtest bench times its runs back to back for that reason, and a daemon's steady work is
 *   settled by `awaitIdle` alone.
 */
export const settleHeap = (): void => {
  ;(globalThis as { gc?: (options: { type: "major"; execution: "sync" }) => void }).gc?.({ type: "major", execution: "sync" })
  awaitIdle()
}
