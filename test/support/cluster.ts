/**
 * What the `svcbot optimize --cluster` test files share: each starts its own throwaway
 * PostgreSQL (so the files run side by side, none seeing another's runs or results), reads the
 * JSON log lines of the workers and runs it spawns, and starts workers on a free loopback port.
 *
 *   const pg = clusterDatabase("optimize-cluster-sweep")
 *   describe.skipIf(missing !== undefined)("...", () => { ... await pg.query(`SELECT ...`) ... })
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { afterAll, beforeAll } from "vitest"
import { freeLoopbackPort, killAll, pollUntil, type Run, svcbot } from "./daemon.js"
import { findPostgres, type Postgres, startPostgres } from "./postgres.js"

const tools = findPostgres()

/** Why no PostgreSQL can be started here, or undefined where one can: the files skip, saying it. */
export const missing = "missing" in tools ? tools.missing : undefined

export interface ClusterDatabase {
  /** The PostgreSQL's URL, set once the file's beforeAll has started it. */
  readonly url: string
  /** A temporary folder for the file's caches, spaces and pages. */
  readonly dir: string
  readonly onPostgres: <A, E>(effect: Effect.Effect<A, E, SqlClient.SqlClient>) => Promise<A>
  readonly query: <A extends object>(text: string) => Promise<ReadonlyArray<A>>
}

/**
 * Starts a PostgreSQL and a temporary folder before the calling file's tests; after them kills
 * every svcbot the file started, stops the server and removes both.
 */
export const clusterDatabase = (name: string): ClusterDatabase => {
  if (missing !== undefined) console.warn(`skipping ${name}: ${missing}`)
  let pg: Postgres | undefined
  let dir = ""
  beforeAll(async () => {
    if ("missing" in tools) return
    pg = await startPostgres(tools)
    dir = mkdtempSync(join(tmpdir(), `${name}-`))
  }, 60_000)
  afterAll(() => {
    killAll()
    pg?.stop()
    if (dir !== "") rmSync(dir, { recursive: true, force: true })
  })
  const onPostgres = <A, E>(effect: Effect.Effect<A, E, SqlClient.SqlClient>): Promise<A> =>
    Effect.runPromise(effect.pipe(Effect.provide(PgClient.layer({ url: Redacted.make(pg!.url) }))))
  return {
    get url() {
      return pg!.url
    },
    get dir() {
      return dir
    },
    onPostgres,
    query: <A extends object>(text: string) => onPostgres(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe<A>(text)))
  }
}

/** The arguments every sweep of the sma-crossover strategy on the seeded synthetic data shares. */
export const common = ["--strategy", "sma-crossover", "--synthetic", "11:60000", "--params", '{"quoteQty": "1000"}', "--seed", "5"]

/** The JSON lines a process wrote to stderr (its log) so far. */
export const logLines = (run: Run): Array<Record<string, unknown>> =>
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

export const until = (what: string, holds: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> =>
  pollUntil(async () => ((await holds()) ? true : undefined), timeoutMs, what).then(() => undefined)

/** The one JSON document a `--json` run printed on stdout. */
export const jsonOf = (run: Run): Record<string, any> => JSON.parse(run.lines.find((line) => line.startsWith("{"))!)

/** The host:port a worker registered under, once it has logged worker.started. */
export const addressOf = (worker: Run): string | undefined => logLines(worker).find((l) => l.event === "worker.started")?.address as string | undefined

/** A `svcbot worker` on a free loopback port, with a cache folder of its own named `cache-<name>`. */
export const startWorker = async (pg: ClusterDatabase, name: string): Promise<Run> => {
  const port = await freeLoopbackPort()
  return svcbot(["worker", "--cluster", pg.url, "--host", "127.0.0.1", "--port", String(port), "--cache", join(pg.dir, `cache-${name}`)])
}
