/**
 * Optimisation trials on @effect/cluster, its shards, messages and runners kept in
 * Postgres (@effect/sql-pg).
 *
 * Trials travel in batches of about a second of work (`Batches.ts`), each a message to an
 * `OptimizeTrial` entity that is one of the run's lanes: the run keeps two lanes on each
 * worker, learnt from who answers them, each sending its next batch when its last is answered.
 * Messages are persisted: the client's request is written to Postgres before it is
 * routed, and a runner that dies before replying leaves it unprocessed, so when its
 * shards move to a live runner (its advisory locks end with its connection) the
 * message is delivered again there. Each message's primary key is the run and the
 * hash of its trials' keys, so a request sent twice in one run is one message.
 *
 * A worker (`svcbot worker --cluster URL`) is a runner hosting the entity, registered under
 * the port it really listens on (a free one unless given). Its handler answers a batch's
 * trials from `optimize_results` where their keys already have results, runs the backtests of
 * the others and writes their results once by key, in one statement: a batch re-run after a
 * crash between the write and the reply writes nothing new, and every reply is the stored rows.
 *
 * The library never deletes a message or its reply, so the run deletes them (`PgResults`):
 * a batch's as soon as the run has its answers and has recorded them, and when it opens its
 * runner every answer older than `ANSWERED_RETENTION_MS`, which is what runs killed before
 * recording leave. A message no worker has answered stays until one does.
 *
 * Datasets travel by content hash: the client stores the candles once under their hash,
 * and a worker fetches a hash the first time it meets it, keeps it as a CSV in its cache
 * folder (so a restart does not fetch it again) and prepares each study once, every batch of
 * it reusing the prepared job.
 * A worker whose strategy source or data hashes differ from the study's refuses the trial
 * (`WorkerUnfit`) rather than answer for other code or other data, and hashes the strategy file
 * before importing it. Requests and answers are read in the exact form svcbot writes them
 * (TrialMessages.ts): anything that can write the cluster's tables can write a message.
 */
import { createHash } from "node:crypto"
import { existsSync, mkdirSync, renameSync, writeFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { ClusterSchema, Entity, RunnerAddress, RunnerHealth, Runners, ShardingConfig, SocketRunner, SqlMessageStorage, SqlRunnerStorage } from "@effect/cluster"
import * as SocketServer from "@effect/platform/SocketServer"
import * as NodeClusterSocket from "@effect/platform-node/NodeClusterSocket"
import * as NodeSocketServer from "@effect/platform-node/NodeSocketServer"
import { Rpc, RpcSerialization } from "@effect/rpc"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Clock, Effect, Layer, ManagedRuntime, Option, Redacted, Schema } from "effect"
import { collectForRepeatedRuns } from "../backtest/Collector.js"
import { type JobSpec, prepare, type PreparedJob, strategyFileOf } from "../backtest/Job.js"
import type { CandleSeries } from "../backtest/Candles.js"
import { sourceHashOfFile } from "../domain/Hash.js"
import { logEvent } from "../log/Logger.js"
import * as PgResults from "./PgResults.js"
import type { ResultsBackend } from "./Results.js"
import { RunnerFailed, type TrialRunner } from "./Runner.js"
import { batchSize, Lanes, TrialClock } from "./Batches.js"
import { dataHashOf, runTrial, type Study, type Trial, type TrialResult } from "./Trial.js"
import { type StudyRef, TrialsAnswer, TrialsRequest } from "./TrialMessages.js"

/** The worker cannot answer for this study: another strategy source, other data, or the study cannot be prepared there. */
export class WorkerUnfit extends Schema.TaggedError<WorkerUnfit>()("WorkerUnfit", { worker: Schema.String, problem: Schema.String }) {
  override get message(): string {
    return `worker ${this.worker}: ${this.problem}`
  }
}

/** The hash of a batch's trial keys: its request's key within the run. */
const batchKeyOf = (keys: ReadonlyArray<string>): string => createHash("sha256").update(keys.join(",")).digest("hex")

/** A batch request's primary key: one message per run and batch, so a refusal stored for one run is never another's answer. */
const requestKeyOf = (runId: number, keys: ReadonlyArray<string>): string => `${runId}/${batchKeyOf(keys)}`

const RunTrials = Rpc.make("RunTrials", {
  payload: TrialsRequest.fields,
  success: TrialsAnswer,
  error: WorkerUnfit,
  primaryKey: ({ runId, trials }) => requestKeyOf(runId, trials.map((trial) => trial.key))
})

export const TrialEntity = Entity.make("OptimizeTrial", [RunTrials]).annotateRpcs(ClusterSchema.Persisted, true)

/** A lane's entity id: its run's, so that a lane never queues behind another run's messages. */
const laneIdOf = (runId: number, lane: number): string => `${runId}-${lane}`

/**
 * The id the library stores a batch request under: its primary key behind the entity's address
 * and the tag (`Envelope.primaryKeyByAddress`). It stays well under the 255 characters beyond
 * which the library would store a digest instead.
 */
const messageIdOf = (entityId: string, requestKey: string): string => `${TrialEntity.type}/${entityId}/${RunTrials._tag}/${requestKey}`

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
  // This process runs trials on its own thread, one after another.
  collectForRepeatedRuns()
  // Shared by every lane of this worker: one load per study however many of its batches arrive
  // at once, the first caller's load serving the rest.
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
    RunTrials: ({ payload: { runId, study, trials } }) =>
      Effect.gen(function* () {
        const stored = yield* PgResults.storedResults(trials.map((trial) => trial.key))
        const missing = [...new Map(trials.filter((trial) => !stored.has(trial.key)).map((trial) => [trial.key, trial] as const)).values()]
        let ms = 0
        if (missing.length > 0) {
          const job = yield* studyJob(study)
          const startedNs = yield* Clock.currentTimeNanos
          const results = missing.map((trial) => runTrial(job, trial))
          ms = Number((yield* Clock.currentTimeNanos) - startedNs) / 1e6
          // Logged after the write, a worker killed logs nothing it did not store; and the two are one
          // step, as the library interrupts a handler whose shard moves away: a log names every row written.
          yield* Effect.uninterruptible(
            Effect.gen(function* () {
              for (const [key, result] of yield* PgResults.writeResults(missing, results, worker)) stored.set(key, result)
              // One line a batch: a line a trial, hundreds a second, was a fiftieth of a worker's time.
              const errors = results.filter((result) => result.error !== undefined).map((result) => ({ jobKey: result.key, error: result.error }))
              yield* logEvent("optimize.batch-done", { worker, runId, ran: results.length, ms: Math.round(ms), jobKeys: results.map((result) => result.key), ...(errors.length === 0 ? {} : { errors }) })
            })
          )
        }
        return { worker, ran: missing.length, ms, results: trials.map((trial) => stored.get(trial.key)!) }
      }).pipe(
        // A lost database connection is not the batch's answer: the message stays unprocessed and is delivered again.
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

interface BatchSender {
  readonly send: (lane: number, trials: ReadonlyArray<Trial>) => Promise<TrialsAnswer>
  readonly clock: TrialClock
  readonly lanes: Lanes
  /** How many workers are registered and alive. */
  readonly live: () => Promise<number>
}

/**
 * Runs the trials in batches over the lanes (`Batches.ts`): each lane sends its next batch when
 * its last is answered, until every trial is sent; a lane whose worker has its share of lanes
 * stops, and probes open while a live worker may lack its lanes. Fails with the first failure.
 */
const runBatches = async (trials: ReadonlyArray<Trial>, { send, clock, lanes, live }: BatchSender): Promise<ReadonlyArray<TrialResult>> => {
  if (trials.length === 0) return []
  const workers = await live()
  const results = new Map<string, TrialResult>()
  const asked = new Set(trials.map((trial) => trial.key)).size
  const active = new Set<number>()
  let next = 0
  return new Promise((resolve, reject) => {
    let failed = false
    const lane = async (number: number): Promise<void> => {
      active.add(number)
      try {
        while (next < trials.length && !failed) {
          const batch = trials.slice(next, next + batchSize(clock.msPerTrial, trials.length - next, active.size))
          next += batch.length
          const answer = await send(number, batch)
          if (answer.results.length !== batch.length || answer.results.some((result, i) => result.key !== batch[i]!.key)) {
            throw new RunnerFailed({ message: `worker ${answer.worker} answered a batch with results for other trials` })
          }
          clock.observe(answer.ran, answer.ms)
          for (const result of answer.results) results.set(result.key, result)
          if (results.size === asked) return resolve(trials.map((trial) => results.get(trial.key)!))
          if (!lanes.answered(number, answer.worker)) break
        }
      } catch (cause) {
        failed = true
        reject(cause)
      } finally {
        active.delete(number)
        if (next < trials.length && !failed) for (const opened of lanes.topUp(active, workers)) void lane(opened)
      }
    }
    for (const number of lanes.start(workers)) void lane(number)
  })
}

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
  /** The message ids of the batches answered and not yet recorded. */
  const answered: Array<string> = []
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
    // The workers wrote the results; the run records which trials it asked for, and then the
    // messages and replies of the batches answered so far are spent: the result rows answer any later asking.
    record: (runId, trials) => {
      const spent = answered.splice(0)
      return run(PgResults.linkTrials(runId, trials.map((t) => t.key)).pipe(Effect.zipRight(PgResults.pruneAnsweredMessages(spent))))
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
      // Kept across the run's batches of trials: the trial time and where each lane goes hold for all of them.
      const clock = new TrialClock()
      const lanes = new Lanes()
      const send = (lane: number, trials: ReadonlyArray<Trial>) => {
        const entityId = laneIdOf(runId, lane)
        return run(
          Effect.flatMap(TrialEntity.client, (client) => client(entityId).RunTrials({ runId, study: ref, trials })).pipe(
            Effect.tap(() => Effect.sync(() => answered.push(messageIdOf(entityId, requestKeyOf(runId, trials.map((trial) => trial.key))))))
          )
        )
      }
      return {
        run: (trials) =>
          runBatches(trials, { send, clock, lanes, live: () => run(PgResults.liveWorkers(LOCK_EXPIRY_SECONDS)) }).catch((cause: unknown) => {
            throw cause instanceof RunnerFailed ? cause : new RunnerFailed({ message: cause instanceof Error ? cause.message : String(cause) })
          }),
        close: () => Promise.resolve()
      }
    },
    workers: () => run(PgResults.liveWorkers(LOCK_EXPIRY_SECONDS)),
    close: () => runtime.dispose()
  }
}
