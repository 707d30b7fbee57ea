/**
 * `svcbot worker --cluster URL`: a cluster runner that takes optimisation trials
 * from `svcbot optimize --cluster URL` runs and writes their results to the
 * cluster's Postgres. Runs until stopped; any number can run on any machines.
 */
import { hostname, networkInterfaces, tmpdir } from "node:os"
import { join } from "node:path"
import { Command, Options } from "@effect/cli"
import { Effect, Either, Layer, Option } from "effect"
import { loadClusterUrl } from "../config/Load.js"
import { logEvent } from "../log/Logger.js"
import { maskedUrl, workerLayer } from "../optimize/Cluster.js"
import { CliError, usageError } from "./errors.js"
import { described } from "./Help.js"

const DEFAULT_PORT = 34431

/**
 * Where others reach this machine when --host is not given: its first external IPv4 address.
 * A container's host name is its id, which other containers cannot resolve; its address they can.
 */
const defaultHost = (): string => {
  for (const addresses of Object.values(networkInterfaces())) {
    for (const address of addresses ?? []) if (address.family === "IPv4" && !address.internal) return address.address
  }
  return hostname()
}

const options = {
  cluster: Options.text("cluster").pipe(Options.withPseudoName("URL"), Options.optional, Options.withDescription("the cluster's Postgres, e.g. postgres://svcbot@db:5432/svcbot (the same URL as the optimize run's --cluster); without it, SVC_CLUSTER_URL, or the file SVC_CLUSTER_URL_FILE names (a Docker secret), so that the password is on no command line")),
  host: Options.text("host").pipe(Options.withPseudoName("HOST"), Options.withDefault(defaultHost()), Options.withDescription("the name or address other workers and optimize runs reach this worker at; without it, this machine's first external IPv4 address")),
  port: Options.integer("port").pipe(Options.withPseudoName("N"), Options.withDefault(DEFAULT_PORT), Options.withDescription("the port this worker listens on for the cluster's messages")),
  cache: Options.text("cache").pipe(Options.withPseudoName("DIR"), Options.withDefault(join(tmpdir(), "svcbot-datasets")), Options.withDescription("where datasets fetched from the cluster are kept, one CSV per content hash"))
}

export const workerCommand = Command.make("worker", options, (flags) =>
  Effect.gen(function* () {
    const cluster = yield* Either.match(loadClusterUrl(flags.cluster), { onLeft: (e) => Effect.fail(usageError(e.message)), onRight: Effect.succeed })
    if (Option.isNone(cluster)) {
      return yield* Effect.fail(usageError("give the cluster's Postgres as --cluster URL, or in SVC_CLUSTER_URL, or in the file SVC_CLUSTER_URL_FILE names"))
    }
    const url = cluster.value
    if (!/^postgres(ql)?:\/\//.test(url)) {
      return yield* Effect.fail(usageError(`--cluster takes the cluster's Postgres URL, e.g. postgres://svcbot@db:5432/svcbot; got "${url.slice(0, 40)}"`))
    }
    if (flags.port < 1 || flags.port > 65535) return yield* Effect.fail(usageError(`--port must be from 1 to 65535; got ${flags.port}`))
    // node-postgres warns once, on stderr and outside the JSON log, about queries @effect/sql-pg
    // queues on one connection; a worker's stderr is its log, so that notice is left out.
    process.noDeprecation = true
    yield* logEvent("worker.started", { cluster: maskedUrl(url), address: `${flags.host}:${flags.port}`, cache: flags.cache })
    yield* Layer.launch(workerLayer({ url, host: flags.host, port: flags.port, cacheDir: flags.cache })).pipe(
      Effect.catchAll((error) => Effect.fail(new CliError({ message: `worker ${flags.host}:${flags.port} stopped: ${errorText(error)}`, exitCode: 1 })))
    )
  })
).pipe(
  Command.withDescription(
    described("Run optimisation trials for `svcbot optimize --cluster URL` runs: a cluster worker on this machine, until stopped", {
      details: [
        "Workers share the runs' trials through the cluster's Postgres; a worker that dies has its unfinished trials run again by the others. docs/optimize.md describes the cluster."
      ],
      examples: [
        "svcbot worker --cluster postgres://svcbot@db:5432/svcbot",
        "SVC_CLUSTER_URL_FILE=/run/secrets/svc_cluster_url svcbot worker",
        "svcbot worker --cluster postgres://svcbot@10.0.0.5:5432/svcbot --host 10.0.0.7 --port 34431 --cache /var/cache/svcbot"
      ]
    })
  )
)

const errorText = (error: unknown): string => {
  if (typeof error === "object" && error !== null && "message" in error && typeof error.message === "string" && error.message !== "") return error.message
  if (typeof error === "object" && error !== null && "_tag" in error) return String(error._tag)
  return String(error)
}
