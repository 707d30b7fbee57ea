/**
 * Optimisation trials on @effect/cluster, its shards, messages and runners kept in
 * Postgres (@effect/sql-pg).
 *
 * A trial is a message to the `OptimizeTrial` entity whose id is the trial's key.
 * Messages are persisted: the client's request is written to Postgres before it is
 * routed, and a runner that dies before replying leaves it unprocessed, so when its
 * shards move to a live runner (its advisory locks end with its connection) the
 * message is delivered again there. Each message's primary key is the run and the
 * trial key, so a request sent twice in one run is one message.
 *
 * A worker (`svcbot worker --cluster URL`) is a runner hosting the entity, registered under
 * the port it really listens on (a free one unless given). Its handler answers from
 * `optimize_results` when the key already has a result, else runs the backtest and writes
 * the result once by key: a job re-run after a crash between the write and the reply writes
 * nothing new, and every reply is the stored row.
 *
 * The library never deletes a message or its reply, so the run deletes them (`PgResults`):
 * a trial's as soon as the run has its answer and has recorded it, and when it opens its
 * runner every answer older than `ANSWERED_RETENTION_MS`, which is what runs killed before
 * recording leave. A message no worker has answered stays until one does.
 *
 * Datasets travel by content hash: the client stores the candles once under their hash,
 * and a worker fetches a hash the first time it meets it, keeps it as a CSV in its cache
 * folder (so a restart does not fetch it again) and prepares each study once.
 * A worker whose strategy source or data hashes differ from the study's refuses the trial
 * (`WorkerUnfit`) rather than answer for other code or other data, and hashes the strategy file
 * before importing it. Requests and answers are read in the exact form svcbot writes them
 * (TrialMessages.ts): anything that can write the cluster's tables can write a message.
 */
import { existsSync, mkdirSync, renameSync, writeFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { ClusterSchema, Entity, RunnerAddress, RunnerHealth, Runners, ShardingConfig, SocketRunner, SqlMessageStorage, SqlRunnerStorage } from "@effect/cluster"
import { SocketServer } from "@effect/platform"
import { NodeClusterSocket, NodeSocketServer } from "@effect/platform-node"
import { Rpc, RpcSerialization } from "@effect/rpc"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, ManagedRuntime, Option, Redacted, Schema } from "effect"
import { type JobSpec, prepare, type PreparedJob, strategyFileOf } from "../backtest/Job.js"
import type { CandleSeries } from "../backtest/Candles.js"
import { sourceHashOfFile } from "../domain/Hash.js"
import { logEvent } from "../log/Logger.js"
import * as PgResults from "./PgResults.js"
import type { ResultsBackend } from "./Results.js"
import { RunnerFailed, type TrialRunner } from "./Runner.js"
import { dataHashOf, runTrial, type Study, type TrialResult } from "./Trial.js"
import { type StudyRef, TrialAnswer, TrialRequest } from "./TrialMessages.js"

/** The worker cannot answer for this study: another strategy source, other data, or the study cannot be prepared there. */
export class WorkerUnfit extends Schema.TaggedError<WorkerUnfit>()("WorkerUnfit", { worker: Schema.String, problem: Schema.String }) {
  override get message(): string {
    return `worker ${this.worker}: ${this.problem}`
  }
}

/** A trial request's primary key: one message per run and trial, so a refusal stored for one run is never another's answer. */
const requestKeyOf = (runId: number, key: string): string => `${runId}/${key}`

const RunTrial = Rpc.make("RunTrial", {
  payload: TrialRequest.fields,
  success: TrialAnswer,
  error: WorkerUnfit,
  primaryKey: ({ runId, trial }) => requestKeyOf(runId, trial.key)
})

export const TrialEntity = Entity.make("OptimizeTrial", [RunTrial]).annotateRpcs(ClusterSchema.Persisted, true)

/**
 * The id the library stores a trial's request of run `runId` under: its primary key behind the
 * entity's address and the tag (`Envelope.primaryKeyByAddress`). With two 64-digit keys it stays
 * under the 255 characters beyond which the library would store a digest instead.
 */
const messageIdOf = (runId: number, key: string): string => `${TrialEntity.type}/${key}/${RunTrial._tag}/${requestKeyOf(runId, key)}`

/**
 * Timings for a cluster of batch workers rather than long-lived services: a dead worker's
 * runner entry expires in seconds and its unprocessed messages are polled for every second,
 * so its jobs move within about 10 s instead of the defaults' minute. Every runner and client
 * must use the same shard count, which stays the default.
 */
const LOCK_EXPIRY_SECONDS = 10

const clusterTimings = {
  shardLockRefreshInterval: "2 seconds",
  shardLockExpiration: `${LOCK_EXPIRY_SECONDS} seconds`,
  refreshAssignmentsInterval: "1 second",
  entityMessagePollInterval: "1 second",
  entityReplyPollInterval: "100 millis",
  entityMaxIdleTime: "30 seconds",
  runnerHealthCheckInterval: "5 seconds"
} as const

const pgLayer = (url: string) => PgClient.layer({ url: Redacted.make(url), maxConnections: 8 })

/**
 * The lock id under which one process at a time builds the cluster's storages (`clusterStorages`).
 * Not the results schema's: that one is taken in a transaction on another connection of the same
 * process, which would wait forever behind this one's session lock.
 */
const STORAGES_LOCK = 7_301_993_042

/**
 * The cluster's message and runner storages, built by one process at a time. The library makes
 * its tables as it builds them and does not expect a peer doing the same at that instant: it
 * creates its migrations table with a plain CREATE TABLE once a lookup found none, so of workers
 * and runs starting together on a fresh database all but one can fail ("duplicate key value
 * violates unique constraint pg_type_typname_nsp_index"), which it makes a defect that ends the
 * process (its CREATE TABLE IF NOT EXISTS of the runners table can fail alike). A session advisory
 * lock, held on a connection of its own while they are built and released after, has every later
 * process find the tables made; a lost connection ends its lock.
 */
const clusterStorages = Layer.scopedContext(
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const storagesScope = yield* Effect.scope
    return yield* Effect.scoped(
      Effect.gen(function* () {
        const connection = yield* sql.reserve
        yield* Effect.acquireRelease(connection.executeRaw("SELECT pg_advisory_lock($1)", [STORAGES_LOCK]), () =>
          Effect.ignore(connection.executeRaw("SELECT pg_advisory_unlock($1)", [STORAGES_LOCK]))
        )
        return yield* Layer.buildWithScope(Layer.merge(Layer.orDie(SqlMessageStorage.layer), Layer.orDie(SqlRunnerStorage.layer)), storagesScope)
      })
    )
  })
)

/** The URL with its password hidden, for messages and log lines. */
export const maskedUrl = (url: string): string => {
  try {
    const parsed = new URL(url)
    if (parsed.password !== "") parsed.password = "***"
    return parsed.toString()
  } catch {
    return "(an unparsable URL)"
  }
}

/** The candles as the backtester's CSV: a worker parses them exactly as a --data file. */
const csvOf = (series: CandleSeries): string => {
  const lines = ["open_time_ms,open,high,low,close,volume"]
  for (const c of series.candles) lines.push(`${c.openTimeMs},${c.open.toFixed()},${c.high.toFixed()},${c.low.toFixed()},${c.close.toFixed()},${c.volume.toFixed()}`)
  return `${lines.join("\n")}\n`
}

const studyRefOf = (study: Study): StudyRef => ({
  strategy: study.spec.strategy,
  sourceHash: study.sourceHash,
  dataHash: study.dataHash,
  symbol: study.spec.symbol,
  balances: study.spec.balances,
  ...(study.spec.fees === undefined ? {} : { fees: study.spec.fees }),
  settleDelayMs: study.spec.settleDelayMs,
  ...(study.spec.schedule === undefined ? {} : { schedule: study.spec.schedule })
})

export interface WorkerOptions {
  readonly url: string
  /** Where other runners and clients reach this worker; it listens there too. */
  readonly host: string
  /** The port it listens on; 0 takes a free one, and the worker registers under the port it got. */
  readonly port: number
  /** Where fetched datasets are kept as CSV files, by hash. */
  readonly cacheDir: string
}

/**
 * Checks the study's strategy file against its source hash, then fetches its candles (once per
 * hash, then from the cache folder) and prepares its job, checking the data's hash. The file is
 * hashed before it is imported: a worker runs no code but the code the run was started with.
 */
const loadStudy = (study: StudyRef, worker: string, cacheDir: string) =>
  Effect.gen(function* () {
    const unfit = (problem: string) => new WorkerUnfit({ worker, problem })
    const path = join(cacheDir, `${study.dataHash}.csv`)
    const spec: JobSpec = {
      strategy: study.strategy,
      data: { kind: "csv", path },
      symbol: study.symbol,
      balances: study.balances,
      ...(study.fees === undefined ? {} : { fees: study.fees }),
      settleDelayMs: study.settleDelayMs,
      ...(study.schedule === undefined ? {} : { schedule: study.schedule }),
      cwd: process.cwd()
    }
    const sourcePath = yield* strategyFileOf(spec).pipe(Effect.mapError((e) => unfit(e.message)))
    const sourceHash = sourceHashOfFile(sourcePath)
    if (sourceHash !== study.sourceHash) {
      return yield* Effect.fail(
        unfit(`its strategy ${study.strategy} (${sourcePath}, source hash ${sourceHash.slice(0, 12)}) is not the one the run was started with (${study.sourceHash.slice(0, 12)}); run the same strategy files on every worker`)
      )
    }
    if (!existsSync(path)) {
      const csv = yield* PgResults.getDataset(study.dataHash).pipe(Effect.orDie)
      if (csv === undefined) return yield* Effect.fail(unfit(`dataset ${study.dataHash} is not in the cluster's database`))
      mkdirSync(cacheDir, { recursive: true })
      // Written aside and renamed: a worker killed mid-write never leaves a half file under the hash.
      writeFileSync(`${path}.${process.pid}.tmp`, csv)
      renameSync(`${path}.${process.pid}.tmp`, path)
    }
    const job = yield* prepare(spec).pipe(Effect.mapError((e) => unfit(e.message)))
    const dataHash = dataHashOf(job.series)
    if (dataHash !== study.dataHash) return yield* Effect.fail(unfit(`dataset ${study.dataHash} read back with hash ${dataHash}; delete ${path} and retry`))
    yield* logEvent("optimize.study-loaded", { worker, strategy: study.strategy, dataHash: study.dataHash, candles: job.series.candles.length })
    return job
  })

const trialHandlers = (worker: string, cacheDir: string) => {
  // Shared by every entity of this worker (each trial key is an entity of its own): one load per
  // study however many of its trials arrive at once, the first caller's load serving the rest.
  const studies = new Map<string, Effect.Effect<PreparedJob, WorkerUnfit, SqlClient.SqlClient>>()
  const studyJob = (study: StudyRef) => {
    const key = JSON.stringify(study)
    let load = studies.get(key)
    if (load === undefined) {
      load = Effect.runSync(Effect.cached(loadStudy(study, worker, cacheDir)))
      studies.set(key, load)
    }
    return load
  }
  return TrialEntity.toLayer({
      RunTrial: ({ payload: { runId, study, trial } }) =>
        Effect.gen(function* () {
          const known = yield* PgResults.storedResult(trial.key)
          if (known !== undefined) return known
          const job = yield* studyJob(study)
          const result = runTrial(job, trial)
          const stored = yield* PgResults.writeResult(trial, result, worker)
          yield* logEvent("optimize.trial-done", { worker, runId, jobKey: trial.key, ...(result.error === undefined ? {} : { error: result.error }) })
          return stored
        }).pipe(
          // A lost database connection is not the trial's answer: the message stays unprocessed and is delivered again.
          Effect.catchTag("SqlError", (error) => Effect.die(error))
        )
  })
}

/**
 * A runner composed as `NodeClusterSocket.layer` composes it (socket transport, SQL storage, ping
 * health checks, msgpack), but on a server already listening: that layer listens on the address
 * it advertises, so it cannot advertise a port the system picked, and workers sharing a machine
 * would all take its one default port.
 */
const runnerOn = (server: SocketServer.SocketServer["Type"], address: RunnerAddress.RunnerAddress) =>
  SocketRunner.layer.pipe(
    Layer.provide([Layer.succeed(SocketServer.SocketServer, server), NodeClusterSocket.layerClientProtocol]),
    Layer.provide(RunnerHealth.layerPing.pipe(Layer.provide(Runners.layerRpc), Layer.provide(NodeClusterSocket.layerClientProtocol))),
    Layer.provideMerge(clusterStorages),
    Layer.provide(ShardingConfig.layerFromEnv({ ...clusterTimings, runnerAddress: Option.some(address) })),
    Layer.provide(RpcSerialization.layerMsgPack)
  )

/**
 * A worker: a cluster runner hosting the trial entity until the process is stopped. It listens
 * first and registers under the port it got, which is also the name its results are written under.
 */
export const workerLayer = (options: WorkerOptions) =>
  Layer.unwrapScoped(
    Effect.gen(function* () {
      const server = yield* NodeSocketServer.make({ host: options.host, port: options.port })
      // Listening on a host and port always gives a TCP address.
      const { port } = server.address as SocketServer.TcpAddress
      const worker = `${options.host}:${port}`
      return trialHandlers(worker, resolve(options.cacheDir)).pipe(
        Layer.provide(runnerOn(server, RunnerAddress.make(options.host, port))),
        Layer.tap(() => logEvent("worker.started", { cluster: maskedUrl(options.url), address: worker, cache: options.cacheDir }))
      )
    })
  ).pipe(
    Layer.provide(Layer.effectDiscard(PgResults.ensureSchema)),
    Layer.provideMerge(pgLayer(options.url))
  )

const clientLayer = (url: string) =>
  // The library's client composition, with the storages it would build unguarded built one process at a time.
  NodeClusterSocket.layer({ clientOnly: true, storage: "byo", shardingConfig: clusterTimings }).pipe(
    Layer.provide(clusterStorages.pipe(Layer.provide(ShardingConfig.layerFromEnv(clusterTimings)))),
    Layer.provideMerge(Layer.effectDiscard(PgResults.ensureSchema)),
    Layer.provideMerge(pgLayer(url))
  )

/** What an optimisation run uses of the cluster: its results tables and a runner sending trials to the workers. */
export interface ClusterSession {
  readonly results: ResultsBackend
  /** Stores the study's dataset (once per hash) and returns a runner for its trials in run `runId`. */
  readonly runner: (study: Study, job: PreparedJob, runId: number) => Promise<TrialRunner>
  /** How many workers are registered and alive right now. */
  readonly workers: () => Promise<number>
  readonly close: () => Promise<void>
}

/** How many trial requests are in flight at once: enough to keep every worker's mailbox fed. */
const IN_FLIGHT = 64

/**
 * How long an answered message is kept when no run recorded it: a live run reads its answers
 * within a reply poll, so only a run paused (not killed) for a day could miss one it still awaits.
 */
const ANSWERED_RETENTION_MS = 24 * 60 * 60 * 1000

export const connectCluster = async (url: string): Promise<ClusterSession> => {
  const runtime = ManagedRuntime.make(clientLayer(url))
  const run = <A, E>(effect: Effect.Effect<A, E, Layer.Layer.Success<ReturnType<typeof clientLayer>>>): Promise<A> => runtime.runPromise(effect)
  try {
    await runtime.runtime()
  } catch (cause) {
    await runtime.dispose()
    throw new RunnerFailed({ message: `cannot reach the cluster's database ${maskedUrl(url)}: ${cause instanceof Error ? cause.message : String(cause)}` })
  }
  const results: ResultsBackend = {
    where: maskedUrl(url),
    startRun: (header) => run(PgResults.startRun(header)),
    finishRun: (runId, outcome) => run(PgResults.finishRun(runId, outcome)),
    run: (runId) => run(PgResults.storedRun(runId)),
    runIds: () => run(PgResults.runIds),
    // Keyed by content alone: a result any run stored answers for this one, and this run lists it
    // among its trials as if it had run it, so that --show finds it there.
    result: (runId, key) =>
      run(PgResults.storedResult(key).pipe(Effect.tap((stored) => (stored === undefined ? Effect.void : PgResults.linkTrials(runId, [key]))))),
    results: (runId) => run(PgResults.runResults(runId)),
    // The workers wrote the results; the run records which trials it asked for, and then their
    // messages and replies are spent: the result rows answer any later asking.
    record: (runId, trials) => {
      const keys = trials.map((t) => t.key)
      return run(PgResults.linkTrials(runId, keys).pipe(Effect.zipRight(PgResults.pruneAnsweredMessages(keys.map((key) => messageIdOf(runId, key))))))
    },
    // The session owns the connection: `close` below ends it.
    close: () => undefined
  }
  return {
    results,
    runner: async (study, job, runId) => {
      await run(
        Effect.gen(function* () {
          if (!(yield* PgResults.hasDataset(study.dataHash))) yield* PgResults.putDataset(study.dataHash, study.intervalMs, csvOf(job.series))
          yield* PgResults.pruneAnsweredBefore(ANSWERED_RETENTION_MS)
        })
      )
      const ref = studyRefOf(study)
      return {
        run: (trials) =>
          run(
            Effect.gen(function* () {
              const client = yield* TrialEntity.client
              return yield* Effect.forEach(trials, (trial): Effect.Effect<TrialResult, unknown> => client(trial.key).RunTrial({ runId, study: ref, trial }), { concurrency: IN_FLIGHT })
            })
          ).catch((cause: unknown) => {
            throw new RunnerFailed({ message: cause instanceof Error ? cause.message : String(cause) })
          }),
        close: () => Promise.resolve()
      }
    },
    workers: () => run(PgResults.liveWorkers(LOCK_EXPIRY_SECONDS)),
    close: () => runtime.dispose()
  }
}
