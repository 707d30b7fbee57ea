/**
 * Scale: the daemon with 4 and with 40 strategy instances on the embedded venue, one
 * minute each, half grids on BTCUSDT and half market makers on ETHUSDT. At 40 the
 * instances want more orders than the venue's order budget (50 per 10 s) lets
 * through, so the budget binds and its grants have to be shared.
 *
 * Each daemon runs in a process of its own (`runDaemon`, what `svcbot run` runs) with
 * its venue inside; the minute is timed from the moment it is trading. Figures:
 * - CPU per instance at 40 against CPU per instance at 4 (goal <= 1: what an instance
 *   costs does not grow with the number of instances);
 * - the share of instances whose first placement was accepted within 10 s of the
 *   first instance's first (goal 1);
 * - the smallest fair-share ratio at 40: for every instance, the placements it was
 *   granted against its fair share of the grants made while it had placements
 *   waiting (each grant counts 1/k to each of the k instances waiting then); goal 0.5.
 * Reported beside them: peak RSS, the event loop's p99 delay, accepted orders per
 * instance (min, median, max) and the time to each instance's first placement.
 *
 *   npx tsx bench/scale.bench.ts
 *   BENCH_SCALE_SECONDS=30 npx tsx bench/scale.bench.ts
 */
import { spawn, type ChildProcess } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { monitorEventLoopDelay } from "node:perf_hooks"
import { fileURLToPath } from "node:url"
import BetterSqlite3 from "better-sqlite3"
import { Effect, Exit, Fiber } from "effect"
import { daemonLogging } from "../src/cli/run.js"
import { loadConfig } from "../src/config/Load.js"
import { runDaemon } from "../src/daemon/Daemon.js"
import { Health } from "../src/daemon/Health.js"
import { wholeNumber } from "./Knobs.js"

const ROOT = resolve(import.meta.dirname, "..")
const SELF = fileURLToPath(import.meta.url)

const runSeconds = wholeNumber("BENCH_SCALE_SECONDS", 60, 15, 600)
const SMALL = 4
const LARGE = 40
/** How soon after the first instance's first placement every instance's first one should be accepted. */
const FIRST_PLACEMENT_WITHIN_MS = 10_000

/** What the daemon process measures of itself over the run. */
interface SelfMeasure {
  /** CPU time (user + system) from trading to the stop, in ms. */
  readonly cpuMs: number
  readonly wallMs: number
  /** The largest resident set of the process's life. */
  readonly peakRssKb: number
  readonly eventLoopP99Ms: number
  readonly eventLoopMaxMs: number
}

type Message = { readonly kind: "ready" } | ({ readonly kind: "measured" } & SelfMeasure) | { readonly kind: "stopped" } | { readonly kind: "failed"; readonly error: string }

// ---------------------------------------------------------------- the daemon process

const daemonProcess = async (configPath: string) => {
  const send = (message: Message) => process.send!(message)
  let trading: { readonly cpu: NodeJS.CpuUsage; readonly at: number } | undefined
  const loop = monitorEventLoopDelay({ resolution: 10 })
  // The log lines are not kept: one of them says the daemon is trading.
  const destination = {
    write: (line: string) => {
      if (trading === undefined && line.includes('"event":"config.loaded"')) {
        trading = { cpu: process.cpuUsage(), at: performance.now() }
        loop.enable()
        send({ kind: "ready" })
      }
    }
  }
  const program = Effect.gen(function* () {
    const config = yield* loadConfig(configPath, {})
    const health = yield* Health
    yield* runDaemon({ config, env: {}, acceptUnpromoted: false }).pipe(Effect.scoped, Effect.provide(daemonLogging(health, { destination, level: "info", pretty: false })))
  }).pipe(Effect.provide(Health.Default))
  const fiber = Effect.runFork(program)
  let stopping = false
  fiber.addObserver((exit) => {
    if (stopping) return
    send({ kind: "failed", error: Exit.isFailure(exit) ? String(exit.cause) : "the daemon ended by itself" })
    process.exitCode = 1
    process.disconnect()
  })
  process.on("message", (message: { readonly kind: string }) => {
    if (message.kind !== "stop" || trading === undefined) return
    stopping = true
    const cpu = process.cpuUsage(trading.cpu)
    loop.disable()
    send({
      kind: "measured",
      cpuMs: (cpu.user + cpu.system) / 1000,
      wallMs: performance.now() - trading.at,
      peakRssKb: process.resourceUsage().maxRSS,
      eventLoopP99Ms: loop.percentile(99) / 1e6,
      eventLoopMaxMs: loop.max / 1e6
    })
    void Effect.runPromise(Fiber.interrupt(fiber)).then(() => {
      send({ kind: "stopped" })
      process.disconnect()
    })
  })
}

// ---------------------------------------------------------------- the conductor

const nextMessage = (child: ChildProcess, kind: Message["kind"], timeoutMs: number): Promise<Message> =>
  new Promise((done, fail) => {
    const timer = setTimeout(() => finish(() => fail(new Error(`the daemon sent no ${kind} within ${timeoutMs} ms`))), timeoutMs)
    const onMessage = (message: Message) => {
      if (message.kind === "failed") finish(() => fail(new Error(`the daemon failed: ${message.error}`)))
      else if (message.kind === kind) finish(() => done(message))
    }
    const onExit = (code: number | null) => finish(() => fail(new Error(`the daemon exited with ${code} before ${kind}`)))
    const finish = (then: () => void) => {
      clearTimeout(timer)
      child.off("message", onMessage)
      child.off("exit", onExit)
      then()
    }
    child.on("message", onMessage)
    child.on("exit", onExit)
  })

/** The instances of a run: half grids on BTCUSDT, half market makers on ETHUSDT, each with a small allocation. */
const instancesOf = (count: number) =>
  Array.from({ length: count }, (_, i) =>
    i % 2 === 0
      ? {
          id: `grid-${i / 2 + 1}`,
          strategy: "grid",
          symbol: "BTCUSDT",
          pollMs: 1000,
          params: { lowerPrice: "59000", upperPrice: "61000", levels: 11, orderQty: "0.002", retryAfterMs: 30000 },
          allocation: { USDT: "2000", BTC: "0.04" }
        }
      : {
          id: `mm-${(i + 1) / 2}`,
          strategy: "market-maker",
          symbol: "ETHUSDT",
          pollMs: 1000,
          params: { halfSpreadBps: 15, orderQty: "0.05", maxInventory: "0.5", skewBps: 20, requoteBps: 5 },
          allocation: { USDT: "1000", ETH: "0.5" }
        }
  )

interface OrderTimes {
  readonly strategyId: string
  /** Local ms the placement was journaled: from then it waits for the budget. */
  readonly createdAt: number
  readonly acceptedAt: number | null
  /** Until when it waited for the budget: its acceptance, or the end of one that ended unsent (withdrawn, cancelled before it went). */
  readonly waitedUntil: number
}

interface Run extends SelfMeasure {
  readonly instances: number
  readonly orders: ReadonlyArray<OrderTimes>
  /** Local ms the run's minute ended. */
  readonly endAt: number
}

const runDaemonWith = async (instances: number): Promise<Run> => {
  const dir = mkdtempSync(join(tmpdir(), "svcbot-scale-"))
  const dbPath = join(dir, "daemon.db")
  const configPath = join(dir, "config.json")
  const defaults = JSON.parse(readFileSync(join(ROOT, "config/default.json"), "utf8")) as Record<string, unknown>
  writeFileSync(configPath, JSON.stringify({ ...defaults, database: { path: dbPath }, strategies: instancesOf(instances) }))
  const child = spawn(process.execPath, ["--import", "tsx", SELF, "--role", "daemon", configPath], { cwd: ROOT, stdio: ["ignore", "inherit", "inherit", "ipc"] })
  try {
    await nextMessage(child, "ready", 120_000)
    await new Promise((done) => setTimeout(done, runSeconds * 1000))
    const endAt = Date.now()
    const measured = nextMessage(child, "measured", 30_000)
    const stopped = nextMessage(child, "stopped", 60_000)
    child.send({ kind: "stop" })
    const self = (await measured) as Extract<Message, { kind: "measured" }>
    await stopped
    const db = new BetterSqlite3(dbPath, { readonly: true })
    const orders = db
      .prepare(
        `SELECT strategy_id AS strategyId, created_at AS createdAt, accepted_at AS acceptedAt,
                COALESCE(accepted_at, CASE WHEN state IN ('intent', 'submitting') THEN ? ELSE updated_at END) AS waitedUntil
         FROM orders WHERE strategy_id IS NOT NULL AND created_at <= ?`
      )
      .all(endAt, endAt) as Array<OrderTimes>
    db.close()
    return { instances, orders, endAt, cpuMs: self.cpuMs, wallMs: self.wallMs, peakRssKb: self.peakRssKb, eventLoopP99Ms: self.eventLoopP99Ms, eventLoopMaxMs: self.eventLoopMaxMs }
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
    rmSync(dir, { recursive: true, force: true })
  }
}

const median = (values: ReadonlyArray<number>): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

/** Accepted placements per instance, over the run's minute. */
const acceptedPer = (run: Run): Map<string, number> => {
  const counts = new Map(instancesOf(run.instances).map((s): [string, number] => [s.id, 0]))
  for (const o of run.orders) if (o.acceptedAt !== null && o.acceptedAt <= run.endAt) counts.set(o.strategyId, (counts.get(o.strategyId) ?? 0) + 1)
  return counts
}

/** Each instance's first accepted placement, in ms after the first instance's first (undefined: none within the run). */
const firstPlacements = (run: Run): Map<string, number | undefined> => {
  const first = new Map<string, number>()
  for (const o of run.orders) {
    if (o.acceptedAt === null || o.acceptedAt > run.endAt) continue
    first.set(o.strategyId, Math.min(first.get(o.strategyId) ?? Number.POSITIVE_INFINITY, o.acceptedAt))
  }
  const earliest = Math.min(...first.values())
  return new Map(instancesOf(run.instances).map((s): [string, number | undefined] => [s.id, first.has(s.id) ? first.get(s.id)! - earliest : undefined]))
}

/**
 * Per instance, its grants against its fair share of the grants made while it had a
 * placement waiting (journaled and not yet accepted): a grant made while k instances
 * waited counts 1/k to each. Only instances whose fair share reached one grant are rated.
 */
const fairShares = (run: Run): Map<string, { readonly granted: number; readonly fair: number }> => {
  const grants = run.orders.filter((o) => o.acceptedAt !== null && o.acceptedAt <= run.endAt).sort((a, b) => a.acceptedAt! - b.acceptedAt!)
  const shares = new Map<string, { granted: number; fair: number }>()
  for (const grant of grants) {
    const t = grant.acceptedAt!
    const waiting = new Set<string>()
    for (const o of run.orders) if (o.createdAt <= t && o.waitedUntil >= t) waiting.add(o.strategyId)
    for (const id of waiting) {
      const share = shares.get(id) ?? { granted: 0, fair: 0 }
      share.fair += 1 / waiting.size
      if (id === grant.strategyId) share.granted += 1
      shares.set(id, share)
    }
  }
  return new Map([...shares].filter(([, s]) => s.fair >= 1))
}

const conduct = async () => {
  const small = await runDaemonWith(SMALL)
  const large = await runDaemonWith(LARGE)
  const cpuPerInstance = (run: Run) => run.cpuMs / run.wallMs / run.instances
  const accepted = [...acceptedPer(large).values()]
  const firsts = [...firstPlacements(large).values()]
  const placedWithin = firsts.filter((ms) => ms !== undefined && ms <= FIRST_PLACEMENT_WITHIN_MS).length
  const lastFirstMs = firsts.some((ms) => ms === undefined) ? null : Math.max(...(firsts as Array<number>))
  const shares = [...fairShares(large).entries()].map(([id, s]) => ({ id, granted: s.granted, fair: s.fair, ratio: s.granted / s.fair }))
  const worst = shares.reduce((a, b) => (b.ratio < a.ratio ? b : a))
  const mib = (kb: number) => (kb / 1024).toFixed(1)
  const row = (run: Run) => {
    const counts = [...acceptedPer(run).values()]
    return `${String(run.instances).padStart(10)}${((run.cpuMs / run.wallMs) * 100).toFixed(1).padStart(8)}${((cpuPerInstance(run) * 100).toFixed(2)).padStart(14)}${mib(run.peakRssKb).padStart(10)}` +
      `${run.eventLoopP99Ms.toFixed(1).padStart(9)}${counts.reduce((a, b) => a + b, 0).toString().padStart(9)}${`${Math.min(...counts)}/${median(counts)}/${Math.max(...counts)}`.padStart(16)}`
  }
  process.stdout.write(
    [
      `scale: the daemon on the embedded venue (50 orders per 10 s) for ${runSeconds} s, half grids and half market makers`,
      `${"instances".padStart(10)}${"CPU %".padStart(8)}${"CPU %/inst".padStart(14)}${"peak MiB".padStart(10)}${"p99 ms".padStart(9)}${"orders".padStart(9)}${"min/med/max".padStart(16)}`,
      row(small),
      row(large),
      `at ${LARGE}: first placements, s after the first instance's first: ` +
        firsts.map((ms) => (ms === undefined ? "none" : (ms / 1000).toFixed(1))).sort((a, b) => Number(a) - Number(b)).join(" "),
      `at ${LARGE}: ${placedWithin} of ${LARGE} instances placed within ${FIRST_PLACEMENT_WITHIN_MS / 1000} s; smallest share of the fair share ${worst.ratio.toFixed(2)}` +
        ` (${worst.id}: ${worst.granted} granted, fair ${worst.fair.toFixed(1)})`,
      ""
    ].join("\n")
  )
  const runFigures = (run: Run) => ({
    cpuPercent: Number(((run.cpuMs / run.wallMs) * 100).toFixed(2)),
    peakRssMiB: Number(mib(run.peakRssKb)),
    eventLoopP99Ms: Number(run.eventLoopP99Ms.toFixed(2)),
    eventLoopMaxMs: Number(run.eventLoopMaxMs.toFixed(2)),
    ordersAccepted: [...acceptedPer(run).values()].reduce((a, b) => a + b, 0)
  })
  process.stdout.write(
    `${JSON.stringify({
      bench: "scale",
      seconds: runSeconds,
      small: { instances: SMALL, ...runFigures(small) },
      large: {
        instances: LARGE,
        ...runFigures(large),
        ordersPerInstance: { min: Math.min(...accepted), median: median(accepted), max: Math.max(...accepted) },
        firstPlacementMs: { max: lastFirstMs, median: median(firsts.map((ms) => ms ?? Number.POSITIVE_INFINITY)) }
      },
      cpuPerInstanceRatio40to4: cpuPerInstance(large) / cpuPerInstance(small),
      cpuPerInstanceGoal: "<= 1",
      peakRssRatio40to4: large.peakRssKb / small.peakRssKb,
      placedWithin10sShare: placedWithin / LARGE,
      placedWithin10sGoal: 1,
      fairShareRatioMin: worst.ratio,
      fairShareGoal: 0.5
    })}\n`
  )
}

const role = process.argv.indexOf("--role")
if (role === -1) await conduct()
else await daemonProcess(process.argv[role + 2]!)
