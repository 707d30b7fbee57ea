/**
 * `svcbot optimize --cluster` against a real PostgreSQL on loopback and three
 * `svcbot worker` processes, one killed with SIGKILL in the middle of the sweep:
 * every trial is answered and its result written once, no trial runs twice, the
 * killed worker's unfinished trials are run by the others, and the ranking is the
 * local run's for the same seed; the run leaves no cluster message or reply behind, and a
 * second run is answered from the results; a worker whose copy of the strategy differs refuses the
 * trials instead of answering for other code; and the messages runs killed before recording
 * leave are deleted once answered a day ago, the unanswered kept for a worker; three workers
 * started without --port on one machine each take a free port, register under it and share a
 * run, and a --port in use is refused in one line naming it. Skips, saying why, where
 * PostgreSQL cannot start.
 */
import { spawn } from "node:child_process"
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { setTimeout as delay } from "node:timers/promises"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ensureSchema } from "../../src/optimize/PgResults.js"
import { freeLoopbackPort, killAll, ROOT, type Run, svcbot } from "../support/daemon.js"
import { findPostgres, type Postgres, startPostgres } from "../support/postgres.js"

const tools = findPostgres()
const missing = "missing" in tools ? tools.missing : undefined
if (missing !== undefined) console.warn(`skipping the cluster tests: ${missing}`)

let pg: Postgres
let dir: string
let space: string

beforeAll(async () => {
  if ("missing" in tools) return
  pg = await startPostgres(tools)
  dir = mkdtempSync(join(tmpdir(), "optimize-cluster-"))
  space = join(dir, "space.json")
  // 30 of the 48 combinations, drawn with the seed; halving sends the best third on to the whole window.
  writeFileSync(
    space,
    JSON.stringify({ params: { fastPeriod: { min: 2, max: 13, step: 1 }, slowPeriod: [20, 30, 45, 60], entry: "market" }, rankBy: "sharpe", search: "random", samples: 30, halving: { slices: 2, keep: 0.34 } })
  )
}, 60_000)

afterAll(() => {
  killAll()
  if ("missing" in tools) return
  pg?.stop()
  rmSync(dir, { recursive: true, force: true })
})

const onPostgres = <A, E>(effect: Effect.Effect<A, E, SqlClient.SqlClient>): Promise<A> =>
  Effect.runPromise(effect.pipe(Effect.provide(PgClient.layer({ url: Redacted.make(pg.url) }))))

const query = <A extends object>(text: string): Promise<ReadonlyArray<A>> => onPostgres(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe<A>(text)))

/** The JSON lines a process wrote to stderr (its log) so far. */
const logLines = (run: Run): Array<Record<string, unknown>> =>
  run.stderr
    .join("")
    .split("\n")
    .flatMap((line) => {
      try {
        return [JSON.parse(line) as Record<string, unknown>]
      } catch {
        return []
      }
    })

const until = async (what: string, holds: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> => {
  const end = Date.now() + timeoutMs
  while (!(await holds())) {
    if (Date.now() > end) throw new Error(`timed out waiting until ${what}`)
    await delay(25)
  }
}

const clusterRows = async (): Promise<{ messages: number; replies: number }> => {
  const [row] = await query<{ messages: string; replies: string }>(
    `SELECT (SELECT count(*) FROM cluster_messages) AS messages, (SELECT count(*) FROM cluster_replies) AS replies`
  )
  return { messages: Number(row!.messages), replies: Number(row!.replies) }
}

const common = ["--strategy", "sma-crossover", "--synthetic", "11:60000", "--params", '{"quoteQty": "1000"}', "--seed", "5"]

const jsonOf = (run: Run): Record<string, any> => JSON.parse(run.lines.find((line) => line.startsWith("{"))!)

describe.skipIf(missing !== undefined)("optimisation on a cluster", () => {
  it("three workers, one killed mid-sweep: every trial done once, results as the local run's", async () => {
    const workers = await Promise.all(
      [1, 2, 3].map(async (n) => {
        const port = await freeLoopbackPort()
        return svcbot(["worker", "--cluster", pg.url, "--host", "127.0.0.1", "--port", String(port), "--cache", join(dir, `cache-${n}`)])
      })
    )
    // A worker says it started once it has registered; three starting at once on a loaded machine take a while.
    await until("every worker started", () => workers.every((w) => logLines(w).some((l) => l.event === "worker.started")), 120_000)

    const clustered = svcbot(["optimize", ...common, "--space", space, "--cluster", pg.url, "--json"])
    const done = (w: Run) => logLines(w).filter((l) => l.event === "optimize.trial-done")
    const victim = workers[1]!
    await until("the second worker finished a trial", () => done(victim).length > 0 || clustered.child.exitCode !== null, 120_000)
    victim.child.kill("SIGKILL")
    const doneByVictim = done(victim).length

    expect(await clustered.exit).toBe(0)
    const cluster = jsonOf(clustered)

    const local = svcbot(["optimize", ...common, "--space", space, "--threads", "0", "--db", join(dir, "local.db"), "--json"])
    expect(await local.exit).toBe(0)
    const here = jsonOf(local)
    expect(cluster.ranked).toEqual(here.ranked)
    expect({ candidates: cluster.candidates, trials: cluster.trials }).toEqual({ candidates: here.candidates, trials: here.trials })
    expect(cluster.trials).toBe(30 + 11)

    // Every trial the run asked for has one stored result...
    const asked = await query<{ job_key: string }>(`SELECT job_key FROM optimize_run_trials WHERE run_id = ${cluster.runId}`)
    const stored = await query<{ job_key: string; worker: string }>(`SELECT job_key, worker FROM optimize_results`)
    expect(asked).toHaveLength(cluster.trials)
    expect(new Set(stored.map((r) => r.job_key))).toEqual(new Set(asked.map((r) => r.job_key)))

    // ...and was run once. A survivor never ran a trial that already had a result: its log has
    // each key once, exactly the keys stored under its name. The killed worker's log is cut at
    // its death (a line may die in the pipe), so its lines are only a subset of its rows.
    const addressOf = (w: Run) => logLines(w).find((l) => l.event === "worker.started")!.address as string
    const survivors = workers.filter((w) => w !== victim)
    // Stopped first, so that their logs are whole: a reply can reach the run before its log line is read.
    for (const worker of survivors) worker.child.kill("SIGTERM")
    await Promise.all(survivors.map((w) => w.exit))
    for (const worker of survivors) {
      const keys = done(worker).map((l) => l.jobKey as string)
      expect(new Set(keys).size).toBe(keys.length)
      expect(new Set(keys)).toEqual(new Set(stored.filter((r) => r.worker === addressOf(worker)).map((r) => r.job_key)))
    }
    const byVictim = stored.filter((r) => r.worker === addressOf(victim)).map((r) => r.job_key)
    for (const line of done(victim)) expect(byVictim).toContain(line.jobKey)

    // The run is kept in the cluster's Postgres: --show reads it back from there.
    const page = join(dir, "cluster-run.html")
    const shown = svcbot(["optimize", "--show", String(cluster.runId), "--cluster", pg.url, "--html", page, "--json"])
    expect(await shown.exit).toBe(0)
    expect(jsonOf(shown).ranked).toEqual(cluster.ranked)
    expect(readFileSync(page, "utf8")).toContain("sharpe over fastPeriod (across) and slowPeriod (up)")

    // The killed worker did some and left the rest to the others.
    expect(doneByVictim).toBeGreaterThan(0)
    expect(byVictim.length).toBeLessThan(cluster.trials)
    expect(stored.length - byVictim.length).toBeGreaterThan(0)

    // The run recorded every answer, so the cluster's own rows for it are gone: nothing else ran yet.
    expect(await clusterRows()).toEqual({ messages: 0, replies: 0 })

    // With every worker stopped, the same question is answered from the stored results alone.
    const again = svcbot(["optimize", ...common, "--space", space, "--cluster", pg.url, "--json"])
    expect(await again.exit).toBe(0)
    const second = jsonOf(again)
    expect(second.runId).not.toBe(cluster.runId)
    expect(second.ranked).toEqual(cluster.ranked)
    expect(await query(`SELECT job_key FROM optimize_results`)).toHaveLength(stored.length)
    expect(await query(`SELECT job_key FROM optimize_run_trials WHERE run_id = ${second.runId}`)).toHaveLength(cluster.trials)
    const secondPage = join(dir, "cluster-run-again.html")
    const shownAgain = svcbot(["optimize", "--show", String(second.runId), "--cluster", pg.url, "--html", secondPage, "--json"])
    expect(await shownAgain.exit).toBe(0)
    expect(jsonOf(shownAgain).ranked).toEqual(cluster.ranked)
    expect(readFileSync(secondPage, "utf8")).toContain("sharpe over fastPeriod (across) and slowPeriod (up)")
  }, 300_000)

  it("a worker with another copy of the strategy refuses its trials: the run ends naming the worker and the fix", async () => {
    killAll()
    // The same relative plugin path names the example for the run and an edited copy for the worker.
    const elsewhere = join(dir, "elsewhere")
    mkdirSync(join(elsewhere, "examples/strategies"), { recursive: true })
    const plugin = "examples/strategies/breakout.ts"
    writeFileSync(join(elsewhere, plugin), `${readFileSync(join(ROOT, plugin), "utf8")}\n// edited on this worker\n`)
    copyFileSync(join(ROOT, "examples/strategies/tsconfig.json"), join(elsewhere, "examples/strategies/tsconfig.json"))
    const port = await freeLoopbackPort()
    const stderr: Array<string> = []
    const worker = spawn(process.execPath, [join(ROOT, "bin/svcbot.js"), "worker", "--cluster", pg.url, "--host", "127.0.0.1", "--port", String(port), "--cache", join(dir, "cache-elsewhere")], {
      cwd: elsewhere,
      env: { PATH: process.env.PATH ?? "" },
      stdio: ["ignore", "ignore", "pipe"]
    })
    worker.stderr!.on("data", (chunk: Buffer) => stderr.push(chunk.toString("utf8")))
    try {
      const breakoutSpace = join(dir, "breakout-space.json")
      writeFileSync(breakoutSpace, JSON.stringify({ params: { lookback: [10, 20], quoteQty: "100" }, rankBy: "profit" }))
      const refused = svcbot(["optimize", "--strategy", plugin, "--synthetic", "3:3000", "--space", breakoutSpace, "--cluster", pg.url])
      expect(await refused.exit).toBe(1)
      const message = refused.stderr.join("").trim().split("\n").pop()
      expect(message).toMatch(new RegExp(`^svcbot: worker 127\\.0\\.0\\.1:${port}: its strategy ${plugin} \\(.+breakout\\.ts, source hash [0-9a-f]{12}\\) is not the one the run was started with \\([0-9a-f]{12}\\); run the same strategy files on every worker$`))
      expect(await query(`SELECT 1 FROM optimize_results WHERE params LIKE '%lookback%'`)).toHaveLength(0)
    } finally {
      worker.kill("SIGKILL")
    }
  }, 120_000)

  it("a run killed before recording leaves its messages; a later run deletes them once answered a day ago, never the unanswered", async () => {
    killAll()
    // The run ids are read before the first run of this test, which may be the file's first.
    await onPostgres(ensureSchema)
    const smallSpace = (name: string, fastPeriods: ReadonlyArray<number>) => {
      const path = join(dir, `${name}.json`)
      writeFileSync(path, JSON.stringify({ params: { fastPeriod: fastPeriods, slowPeriod: [25], entry: "market" }, rankBy: "sharpe" }))
      return path
    }
    const answeredSpace = smallSpace("answered-space", [3, 4, 5])
    const waitingSpace = smallSpace("waiting-space", [6, 7])
    const lastRunId = async () => Number((await query<{ id: string | null }>(`SELECT max(run_id) AS id FROM optimize_runs`))[0]!.id ?? 0)
    // The library stores a request under ENTITY/ID/TAG/PRIMARY-KEY, and a trial's primary key is RUN/KEY.
    const messagesOf = (runId: number) => query<{ processed: boolean }>(`SELECT processed FROM cluster_messages WHERE message_id LIKE 'OptimizeTrial/%/RunTrial/${runId}/%'`)
    /** Starts a run with no worker running and kills it once its `trials` messages are stored. */
    const killedRun = async (path: string, trials: number): Promise<number> => {
      const before = await lastRunId()
      const run = svcbot(["optimize", ...common, "--space", path, "--cluster", pg.url])
      await until(`the run's ${trials} messages are stored`, async () => (await lastRunId()) > before && (await messagesOf(before + 1)).length === trials, 60_000)
      run.child.kill("SIGKILL")
      await run.exit
      return before + 1
    }
    const startWorker = async (name: string) => {
      const port = await freeLoopbackPort()
      return svcbot(["worker", "--cluster", pg.url, "--host", "127.0.0.1", "--port", String(port), "--cache", join(dir, `cache-${name}`)])
    }
    /** A run of the answered space: every result is stored, so it needs no worker, and opening its runner prunes. */
    const rerun = async () => {
      const run = svcbot(["optimize", ...common, "--space", answeredSpace, "--cluster", pg.url, "--json"])
      expect(await run.exit).toBe(0)
      return jsonOf(run)
    }

    // Run A's three messages are answered by a worker after A was killed; run B's two wait for one.
    const answered = await killedRun(answeredSpace, 3)
    const worker = await startWorker("answering")
    await until("the worker answered run A", async () => (await messagesOf(answered)).filter((m) => m.processed).length === 3, 60_000)
    worker.child.kill("SIGTERM")
    await worker.exit
    const waiting = await killedRun(waitingSpace, 2)
    const replies = async () => Number((await query<{ n: string }>(`SELECT count(*) AS n FROM cluster_replies`))[0]!.n)
    const repliesBefore = await replies()
    expect(repliesBefore).toBeGreaterThanOrEqual(3)

    // Answered minutes ago: kept, in case a live run still awaits them.
    const first = await rerun()
    expect(first.trials).toBe(3)
    expect(await messagesOf(answered)).toHaveLength(3)
    expect(await replies()).toBe(repliesBefore)

    // Every message and reply made a day and an hour earlier: a Snowflake id carries its time in its upper bits.
    const shift = `((25 * 3600 * 1000)::bigint << 22)`
    await query(`UPDATE cluster_messages SET id = id - ${shift}, request_id = request_id - ${shift}, last_reply_id = last_reply_id - ${shift}`)
    await query(`UPDATE cluster_replies SET id = id - ${shift}, request_id = request_id - ${shift}`)
    const later = await rerun()
    expect(later.ranked).toEqual(first.ranked)
    expect(await messagesOf(answered)).toHaveLength(0)
    expect(await replies()).toBe(0)
    expect((await messagesOf(waiting)).map((m) => m.processed)).toEqual([false, false])

    // The unanswered ones are still delivered: a worker started now answers run B's trials.
    const late = await startWorker("late")
    const waitingKeys = async () => Number((await query<{ n: string }>(`SELECT count(*) AS n FROM optimize_results WHERE params LIKE '%"slowPeriod":25%' AND (params LIKE '%"fastPeriod":6,%' OR params LIKE '%"fastPeriod":7,%')`))[0]!.n)
    await until("the late worker answered run B", async () => (await waitingKeys()) === 2, 60_000)
    late.child.kill("SIGTERM")
    await late.exit
  }, 240_000)

  it("three workers without --port on one machine each take a free port, register under it, stay up and share a run", async () => {
    killAll()
    const workers = [1, 2, 3].map((n) => svcbot(["worker", "--cluster", pg.url, "--host", "127.0.0.1", "--cache", join(dir, `cache-free-${n}`)]))
    const addressOf = (w: Run) => logLines(w).find((l) => l.event === "worker.started")?.address as string | undefined
    const registered = async () => {
      // The library makes its tables as the first runner starts: until then no worker is registered.
      const rows = await query<{ address: string }>(`SELECT address FROM cluster_runners WHERE healthy AND last_heartbeat > now() - interval '10 seconds'`).catch(() => [])
      return workers.filter((w) => rows.some((r) => r.address === addressOf(w)))
    }
    await until("every worker registered or one stopped", async () => workers.some((w) => w.child.exitCode !== null) || (await registered()).length === 3, 120_000)
    for (const worker of workers) expect(worker.child.exitCode, worker.stderr.join("")).toBeNull()
    const addresses = workers.map((w) => addressOf(w)!)
    expect(new Set(addresses).size).toBe(3)
    for (const address of addresses) expect(address).toMatch(/^127\.0\.0\.1:[1-9]\d*$/)

    // Data no earlier run used, so that every trial is sent to the workers rather than answered from stored results.
    const grid = join(dir, "free-port-space.json")
    writeFileSync(grid, JSON.stringify({ params: { fastPeriod: [2, 3, 4, 5, 6, 7], slowPeriod: [30, 40, 50, 60], entry: "market" }, rankBy: "sharpe" }))
    const run = svcbot(["optimize", "--strategy", "sma-crossover", "--synthetic", "12:20000", "--params", '{"quoteQty": "1000"}', "--space", grid, "--cluster", pg.url, "--json"])
    expect(await run.exit, run.stderr.join("")).toBe(0)
    const outcome = jsonOf(run)
    expect(outcome.trials).toBe(24)
    const writers = await query<{ worker: string }>(
      `SELECT DISTINCT r.worker FROM optimize_results r JOIN optimize_run_trials t ON t.job_key = r.job_key WHERE t.run_id = ${outcome.runId}`
    )
    expect(writers.length).toBeGreaterThan(0)
    for (const { worker } of writers) expect(addresses).toContain(worker)
    for (const worker of workers) expect(worker.child.exitCode, worker.stderr.join("")).toBeNull()
    for (const worker of workers) worker.child.kill("SIGTERM")
    await Promise.all(workers.map((w) => w.exit))
  }, 300_000)

  it("a worker given a --port that is in use exits 2 with one line naming --port", async () => {
    const taken = createServer()
    const port = await new Promise<number>((done) => taken.listen(0, "127.0.0.1", () => done((taken.address() as { port: number }).port)))
    try {
      const worker = svcbot(["worker", "--cluster", pg.url, "--host", "127.0.0.1", "--port", String(port), "--cache", join(dir, "cache-taken")])
      expect(await worker.exit).toBe(2)
      const lines = worker.stderr.join("").trim().split("\n")
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatch(new RegExp(`^svcbot: --port ${port} is in use on 127\\.0\\.0\\.1`))
    } finally {
      taken.close()
    }
  }, 60_000)
})
