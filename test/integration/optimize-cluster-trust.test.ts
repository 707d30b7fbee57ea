/**
 * A `svcbot worker` on a real PostgreSQL trusts nothing a cluster message says. The messages
 * come from a client that writes whatever it is given (the trial entity with no checks on its
 * payload), as anything holding the database's URL could: a dataset hash of `../escape` is
 * refused whole, though the dataset is stored under that hash, and nothing is written outside
 * the worker's cache folder; a strategy file whose source hash is not the message's is refused
 * before it is imported (the file writes a marker when imported, which a control message with
 * the right hash shows). The worker and an optimize run are given the cluster's URL in a file
 * (`SVC_CLUSTER_URL_FILE`, as compose gives it from a Docker secret), never on their command line.
 * Skips, saying why, where PostgreSQL cannot start.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { setTimeout as delay } from "node:timers/promises"
import { ClusterSchema, Entity } from "@effect/cluster"
import { NodeClusterSocket } from "@effect/platform-node"
import { Rpc } from "@effect/rpc"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Cause, Effect, Either, Exit, Layer, Redacted, Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { parseCsv } from "../../src/backtest/Candles.js"
import { sourceHash } from "../../src/domain/Hash.js"
import { WorkerUnfit } from "../../src/optimize/Cluster.js"
import { dataHashOf } from "../../src/optimize/Trial.js"
import { freeLoopbackPort, killAll, type Run, svcbot } from "../support/daemon.js"
import { findPostgres, type Postgres, startPostgres } from "../support/postgres.js"

const tools = findPostgres()
const missing = "missing" in tools ? tools.missing : undefined
if (missing !== undefined) console.warn(`skipping the cluster trust tests: ${missing}`)

/** The trial entity as a careless or hostile sender sees it: any strings and numbers go. */
const LaxRunTrials = Rpc.make("RunTrials", {
  payload: {
    runId: Schema.Number,
    study: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
    trials: Schema.Array(Schema.Struct({ key: Schema.String, params: Schema.String, fromMs: Schema.Number, toMs: Schema.Number }))
  },
  success: Schema.Unknown,
  error: WorkerUnfit,
  primaryKey: ({ runId, trials }) => `${runId}/${trials.map((trial) => trial.key).join(",")}`
})
const LaxTrialEntity = Entity.make("OptimizeTrial", [LaxRunTrials]).annotateRpcs(ClusterSchema.Persisted, true)

const CSV = ["open_time_ms,open,high,low,close,volume", ...Array.from({ length: 50 }, (_, i) => `${1_704_067_200_000 + i * 60_000},100,101,99,100,1`)].join("\n") + "\n"
const DATA_HASH = dataHashOf(Either.getOrThrow(parseCsv(CSV, { source: "test" })))

let pg: Postgres
let dir: string
let worker: Run
/** The file holding the cluster's URL, as a Docker secret would. */
let urlFile: string

const onPostgres = <A, E>(effect: Effect.Effect<A, E, SqlClient.SqlClient>): Promise<A> =>
  Effect.runPromise(effect.pipe(Effect.provide(PgClient.layer({ url: Redacted.make(pg.url) }))))

const until = async (what: string, holds: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> => {
  const end = Date.now() + timeoutMs
  while (!(await holds())) {
    if (Date.now() > end) throw new Error(`timed out waiting until ${what}`)
    await delay(50)
  }
}

beforeAll(async () => {
  if ("missing" in tools) return
  pg = await startPostgres(tools)
  dir = mkdtempSync(join(tmpdir(), "optimize-cluster-trust-"))
  urlFile = join(mkdtempSync(join(tmpdir(), "optimize-cluster-secret-")), "cluster_url")
  writeFileSync(urlFile, `${pg.url}\n`)
  const port = await freeLoopbackPort()
  worker = svcbot(["worker", "--host", "127.0.0.1", "--port", String(port), "--cache", join(dir, "cache")], { SVC_CLUSTER_URL_FILE: urlFile })
  await until("the worker registered", async () => {
    const rows = await onPostgres(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT 1 FROM cluster_runners WHERE healthy`)).catch(() => [])
    return rows.length > 0 || worker.child.exitCode !== null
  }, 60_000)
  expect(worker.child.exitCode, worker.stderr.join("")).toBeNull()
  // The datasets a worker would fetch: the real one under its hash, and the same under a hash that climbs out of the cache.
  await onPostgres(
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql`INSERT INTO optimize_datasets (data_hash, interval_ms, csv) VALUES (${DATA_HASH}, 60000, ${CSV}), (${"../escape"}, 60000, ${CSV})`
    )
  )
}, 120_000)

afterAll(() => {
  killAll()
  if ("missing" in tools) return
  pg?.stop()
  rmSync(dir, { recursive: true, force: true })
})

let runId = 0
/** Sends a batch of one trial as written, and waits for the worker's answer. */
const send = (study: Record<string, unknown>, key: string) =>
  Effect.gen(function* () {
    const client = yield* LaxTrialEntity.client
    return yield* client(key).RunTrials({ runId: ++runId, study, trials: [{ key, params: "{}", fromMs: 1_704_067_200_000, toMs: 1_704_070_200_000 }] })
  }).pipe(
    Effect.timeout("60 seconds"),
    Effect.exit,
    Effect.provide(
      NodeClusterSocket.layer({ clientOnly: true, storage: "sql", shardingConfig: { entityReplyPollInterval: "100 millis", refreshAssignmentsInterval: "1 second" } }).pipe(
        Layer.provideMerge(PgClient.layer({ url: Redacted.make(pg.url) }))
      )
    ),
    Effect.scoped,
    Effect.runPromise
  )

const study = (fields: Record<string, unknown>) => ({ strategy: "sma-crossover", sourceHash: "0".repeat(64), dataHash: DATA_HASH, symbol: "BTCUSDT", balances: { USDT: "1000" }, settleDelayMs: 50, ...fields })

const failureText = (exit: Exit.Exit<unknown, unknown>): string => (Exit.isFailure(exit) ? Cause.pretty(exit.cause) : `succeeded: ${JSON.stringify(exit.value)}`)

describe.skipIf(missing !== undefined)("a cluster worker and the messages it is sent", () => {
  it("refuses a dataset hash of ../escape whole, and writes nothing outside its cache folder", async () => {
    const exit = await send(study({ dataHash: "../escape" }), "1".repeat(64))
    expect(failureText(exit)).toContain("MalformedMessage")
    expect(existsSync(join(dir, "escape.csv"))).toBe(false)
    expect(readdirSync(dir).sort()).toEqual(existsSync(join(dir, "cache")) ? ["cache"] : [])
    if (existsSync(join(dir, "cache"))) expect(readdirSync(join(dir, "cache"))).toEqual([])
    expect(worker.child.exitCode).toBeNull()
  }, 90_000)

  it("hashes a strategy file before importing it: another file's source hash is refused and the file never runs", async () => {
    const plugins = join(dir, "plugins")
    mkdirSync(plugins)
    const marker = join(dir, "imported")
    const plugin = join(plugins, "marker.mjs")
    const source = `import { writeFileSync } from "node:fs"\nwriteFileSync(${JSON.stringify(marker)}, "imported")\n`
    writeFileSync(plugin, source)

    const refused = await send(study({ strategy: plugin, sourceHash: "0".repeat(64) }), "2".repeat(64))
    expect(failureText(refused)).toMatch(/WorkerUnfit.*its strategy .*marker\.mjs .*is not the one the run was started with/s)
    expect(existsSync(marker), "the plugin was imported").toBe(false)

    // The control: with the file's own source hash the worker does import it (and finds no strategy in it).
    const control = await send(study({ strategy: plugin, sourceHash: sourceHash(source) }), "3".repeat(64))
    expect(failureText(control)).toMatch(/WorkerUnfit.*exports no strategy/s)
    expect(existsSync(marker)).toBe(true)
  }, 90_000)

  it("an optimize run given the cluster's URL only in SVC_CLUSTER_URL_FILE runs its trials on the cluster", async () => {
    const space = join(dir, "space.json")
    writeFileSync(space, JSON.stringify({ params: { fastPeriod: [3, 5], slowPeriod: [20], entry: "market", quoteQty: "100" }, rankBy: "profit" }))
    const run = svcbot(["optimize", "--strategy", "sma-crossover", "--synthetic", "5:3000", "--space", space, "--json"], { SVC_CLUSTER_URL_FILE: urlFile })
    expect(await run.exit, run.stderr.join("")).toBe(0)
    const outcome = JSON.parse(run.lines.find((line) => line.startsWith("{"))!) as { runId: number; trials: number }
    expect(outcome.trials).toBe(2)
    const written = await onPostgres(
      Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ worker: string }>`SELECT r.worker FROM optimize_results r JOIN optimize_run_trials t ON t.job_key = r.job_key WHERE t.run_id = ${outcome.runId}`)
    )
    expect(written.map((row) => row.worker)).toEqual([expect.stringMatching(/^127\.0\.0\.1:\d+$/), expect.stringMatching(/^127\.0\.0\.1:\d+$/)])
  }, 120_000)
})
