/**
 * The optimisation tables on the cluster's Postgres, beside the cluster's own
 * (`cluster_*`): runs, trial results and datasets.
 *
 * - A trial result is keyed by its job key alone and written once (`ON CONFLICT DO
 *   NOTHING`): the key is the hash of everything the result depends on, so the row a
 *   worker wrote first is the answer for every run that asks the same question, and a
 *   job run twice (its worker killed after writing but before answering) writes nothing new.
 * - A run lists its trials in `optimize_run_trials`, so `--show RUN` reads what it asked.
 * - A dataset is stored once under its content hash; every worker fetches it once.
 * - The cluster's own message and reply rows of a trial are deleted once it is answered and
 *   the run has recorded it (below): its result row is the lasting answer.
 *
 * Everything here is an Effect needing a `SqlClient`: the cluster runs on one.
 */
import { MachineId, Snowflake } from "@effect/cluster"
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import type { Fragment } from "@effect/sql/Statement"
import { Array as Arr, Clock, Effect } from "effect"
import { type ResultRow, type RunHeader, type RunRow, storedResultOf, storedRunOf } from "./Results.js"
import type { Trial, TrialResult } from "./Trial.js"

/** A run's columns after its id: those of `optimize_runs` in a local results file (migrations/results/0001_results.sql). */
export const RUN_COLUMNS = `
  created_at_ms BIGINT NOT NULL,
  strategy TEXT NOT NULL,
  source_hash TEXT NOT NULL,
  data TEXT NOT NULL,
  data_hash TEXT NOT NULL,
  symbol TEXT NOT NULL,
  settings TEXT NOT NULL,
  outcome TEXT`

/** One lock id for the schema's creation: workers and clients starting together must not race on CREATE TABLE. */
const SCHEMA_LOCK = 7_301_993_041

export const ensureSchema: Effect.Effect<void, SqlError, SqlClient.SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.withTransaction(
    Effect.gen(function* () {
      yield* sql`SELECT pg_advisory_xact_lock(${SCHEMA_LOCK})`
      yield* sql.unsafe(`CREATE TABLE IF NOT EXISTS optimize_runs (run_id BIGSERIAL PRIMARY KEY,${RUN_COLUMNS})`)
      yield* sql`CREATE TABLE IF NOT EXISTS optimize_results (
        job_key TEXT PRIMARY KEY,
        params TEXT NOT NULL,
        from_ms BIGINT NOT NULL,
        to_ms BIGINT NOT NULL,
        metrics TEXT,
        error TEXT,
        worker TEXT NOT NULL,
        written_at TIMESTAMPTZ NOT NULL DEFAULT now()
      )`
      yield* sql`CREATE TABLE IF NOT EXISTS optimize_run_trials (
        run_id BIGINT NOT NULL REFERENCES optimize_runs(run_id),
        job_key TEXT NOT NULL,
        PRIMARY KEY (run_id, job_key)
      )`
      yield* sql`CREATE TABLE IF NOT EXISTS optimize_datasets (
        data_hash TEXT PRIMARY KEY,
        interval_ms BIGINT NOT NULL,
        csv TEXT NOT NULL
      )`
    })
  )
})

const resultOf = (row: ResultRow): TrialResult => {
  const { params: _params, fromMs: _from, toMs: _to, ...result } = storedResultOf(row)
  return result
}

/** The stored result of a job key, whichever run or worker wrote it. */
export const storedResult = (key: string) => Effect.map(storedResults([key]), (stored) => stored.get(key))

/** The stored results of these job keys (at most `MAX_BATCH`, a batch's), by key; a key without one is absent. */
export const storedResults = (keys: ReadonlyArray<string>) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    keys.length === 0 ? Effect.succeed([]) : sql<ResultRow>`SELECT * FROM optimize_results WHERE job_key IN ${sql.in(keys)}`
  ).pipe(Effect.map((rows) => new Map(rows.map((row) => [row.job_key, resultOf(row)] as const))))

/**
 * Writes the trials' results, each unless its key has one, in one statement, and answers with the
 * stored ones by key: the first writer's result wins everywhere.
 */
export const writeResults = (trials: ReadonlyArray<Trial>, results: ReadonlyArray<TrialResult>, worker: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = trials.map((trial, i) => ({
      job_key: trial.key,
      params: trial.params,
      from_ms: trial.fromMs,
      to_ms: trial.toMs,
      metrics: results[i]!.metrics === undefined ? null : JSON.stringify(results[i]!.metrics),
      error: results[i]!.error ?? null,
      worker
    }))
    const inserted = yield* sql<ResultRow>`INSERT INTO optimize_results ${sql.insert(rows)} ON CONFLICT (job_key) DO NOTHING RETURNING *`
    const stored = new Map(inserted.map((row) => [row.job_key, resultOf(row)] as const))
    // A key with no row back had another writer first, and its row is the answer.
    const others = trials.filter((trial) => !stored.has(trial.key)).map((trial) => trial.key)
    for (const [key, result] of yield* storedResults(others)) stored.set(key, result)
    return stored
  })

export const putDataset = (dataHash: string, intervalMs: number, csv: string) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) => sql`INSERT INTO optimize_datasets (data_hash, interval_ms, csv) VALUES (${dataHash}, ${intervalMs}, ${csv}) ON CONFLICT (data_hash) DO NOTHING`
  ).pipe(Effect.asVoid)

export const hasDataset = (dataHash: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT 1 FROM optimize_datasets WHERE data_hash = ${dataHash}`).pipe(Effect.map((rows) => rows.length > 0))

export const getDataset = (dataHash: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ csv: string }>`SELECT csv FROM optimize_datasets WHERE data_hash = ${dataHash}`).pipe(
    Effect.map((rows) => rows[0]?.csv)
  )

export const startRun = (header: RunHeader) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) => sql<{ run_id: string }>`INSERT INTO optimize_runs (created_at_ms, strategy, source_hash, data, data_hash, symbol, settings)
      VALUES (${header.createdAtMs}, ${header.strategy}, ${header.sourceHash}, ${header.data}, ${header.dataHash}, ${header.symbol}, ${JSON.stringify(header.settings)})
      RETURNING run_id`
  ).pipe(Effect.map((rows) => Number(rows[0]!.run_id)))

export const finishRun = (runId: number, outcome: unknown) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql`UPDATE optimize_runs SET outcome = ${JSON.stringify(outcome)} WHERE run_id = ${runId}`).pipe(Effect.asVoid)

export const storedRun = (runId: number) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) => sql<RunRow>`SELECT * FROM optimize_runs WHERE run_id = ${runId}`
  ).pipe(Effect.map((rows) => (rows[0] === undefined ? undefined : storedRunOf(rows[0]))))

export const runIds = Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ run_id: string }>`SELECT run_id FROM optimize_runs ORDER BY run_id DESC`).pipe(
  Effect.map((rows) => rows.map((r) => Number(r.run_id)))
)

export const runResults = (runId: number) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) => sql<ResultRow>`SELECT r.* FROM optimize_results r JOIN optimize_run_trials t ON t.job_key = r.job_key
      WHERE t.run_id = ${runId} ORDER BY r.from_ms, r.to_ms, r.params`
  ).pipe(Effect.map((rows) => rows.map(storedResultOf)))

/** Links a run to the trials it asked for (their results are written by the workers). */
export const linkTrials = (runId: number, keys: ReadonlyArray<string>) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    keys.length === 0
      ? Effect.void
      : sql`INSERT INTO optimize_run_trials ${sql.insert(keys.map((job_key) => ({ run_id: runId, job_key })))} ON CONFLICT DO NOTHING`.pipe(Effect.asVoid)
  )

/** Workers whose runner entry is fresh: registered with the cluster and heard from within the lock expiry. */
export const liveWorkers = (expirySeconds: number) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) => sql<{ n: string }>`SELECT count(*) AS n FROM cluster_runners WHERE healthy AND last_heartbeat > now() - make_interval(secs => ${expirySeconds})`
  ).pipe(Effect.map((rows) => Number(rows[0]?.n ?? 0)))

/**
 * Deletes the cluster's answered requests that `which` picks (over `m`, the request, and `r`, its
 * final reply), with their replies and any interrupt sent for them (every row sharing their
 * `request_id`). @effect/cluster's SqlMessageStorage keeps each persisted request in
 * `cluster_messages` and its replies in `cluster_replies` and deletes none. "Answered" is the
 * library's own mark, set in the transaction that stores the reply: `processed` and a final
 * (`WithExit`, kind 0) reply. A request without one is never touched: a worker has still to run
 * it, and its run may be waiting for the answer.
 */
const deleteAnswered = (which: (sql: SqlClient.SqlClient) => Fragment) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) => sql`WITH answered AS (
        SELECT m.request_id FROM cluster_messages m JOIN cluster_replies r ON r.request_id = m.request_id AND r.kind = 0
        WHERE m.kind = 0 AND m.processed AND ${which(sql)}
      ), replies AS (
        DELETE FROM cluster_replies WHERE request_id IN (SELECT request_id FROM answered)
      )
      DELETE FROM cluster_messages WHERE request_id IN (SELECT request_id FROM answered)`
  ).pipe(Effect.asVoid)

/** Bounds the statement's parameters well under Postgres's 65,535 however large a rung is. */
const PRUNE_CHUNK = 1000

/** Deletes the answered requests with these message ids (the library's, from each request's primary key). */
export const pruneAnsweredMessages = (messageIds: ReadonlyArray<string>) =>
  Effect.forEach(Arr.chunksOf(messageIds, PRUNE_CHUNK), (chunk) => deleteAnswered((sql) => sql`m.message_id IN ${sql.in(chunk)}`), { discard: true })

/**
 * Deletes the requests answered more than `retentionMs` ago, whichever run sent them: those of a
 * run killed before it recorded its answers (the workers still answer every request it had
 * sent). A reply's id is a Snowflake carrying the time it was made, so requests answered before
 * the cutoff are those whose reply id is below the cutoff's smallest Snowflake. A live run reads
 * each answer within a poll (100 ms), so a retention of hours spares any run not paused for that long.
 */
export const pruneAnsweredBefore = (retentionMs: number) =>
  Effect.flatMap(Clock.currentTimeMillis, (nowMs) => {
    const cutoff = Snowflake.make({ timestamp: nowMs - retentionMs, machineId: MachineId.make(0), sequence: 0 })
    return deleteAnswered((sql) => sql`r.id < ${String(cutoff)}`)
  })
