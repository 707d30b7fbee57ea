/**
 * `svcbot worker --cluster URL`: a cluster runner that takes optimisation trials
 * from `svcbot optimize --cluster URL` runs and writes their results to the
 * cluster's Postgres. Runs until stopped; any number can run on any machines.
 */
import { hostname, networkInterfaces, tmpdir } from "node:os"
import { join } from "node:path"
import { Command, Options } from "@effect/cli"
import type { SocketServer } from "@effect/platform"
import { Effect, Either, Layer, Option } from "effect"
import { loadClusterUrl } from "../config/Load.js"
import { workerLayer } from "../optimize/Cluster.js"
import { CliError, usageError } from "./errors.js"
import { described } from "./Help.js"

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
  port: Options.integer("port").pipe(Options.withPseudoName("N"), Options.optional, Options.withDescription("the port this worker listens on for the cluster's messages; without it, a free port, which the worker registers under")),
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
    if (Option.isSome(flags.port) && (flags.port.value < 1 || flags.port.value > 65535)) return yield* Effect.fail(usageError(`--port must be from 1 to 65535; got ${flags.port.value}`))
    // node-postgres warns once, on stderr and outside the JSON log, about queries @effect/sql-pg
    // queues on one connection; a worker's stderr is its log, so that notice is left out.
    process.noDeprecation = true
    // Port 0: the system picks a free one, so that any number of workers can share a machine.
    const port = Option.getOrElse(flags.port, () => 0)
    yield* Layer.launch(workerLayer({ url, host: flags.host, port, cacheDir: flags.cache })).pipe(
      Effect.catchAll((error) =>
        Effect.fail(
          error._tag === "SocketServerError" && error.reason === "Open"
            ? cannotListen(error, flags.host, port)
            : new CliError({ message: `worker ${flags.host}:${port} stopped: ${errorText(error)}`, exitCode: 1 })
        )
      )
    )
  })
).pipe(
  Command.withDescription(
    described("Run optimisation trials for `svcbot optimize --cluster URL` runs: a cluster worker on this machine, until stopped", {
      details: [
        "Workers share the runs' trials through the cluster's Postgres; a worker that dies has its unfinished trials run again by the others. Without --port a worker listens on a free port and registers under it, so any number can run on one machine; give --port where a firewall must know it. docs/optimize.md describes the cluster."
      ],
      examples: [
        "svcbot worker --cluster postgres://svcbot@db:5432/svcbot",
        "SVC_CLUSTER_URL_FILE=/run/secrets/svc_cluster_url svcbot worker",
        "svcbot worker --cluster postgres://svcbot@10.0.0.5:5432/svcbot --host 10.0.0.7 --port 34431 --cache /var/cache/svcbot"
      ]
    })
  )
)

/** Why the worker could not start listening: a --port in use is the command line's to fix. */
const cannotListen = (error: SocketServer.SocketServerError, host: string, port: number): CliError => {
  const cause = error.cause as NodeJS.ErrnoException
  return cause.code === "EADDRINUSE"
    ? usageError(`--port ${port} is in use on ${host}; give a free --port, or leave --port out and the worker takes a free one`)
    : new CliError({ message: `worker cannot listen on ${host}:${port}: ${cause.message}`, exitCode: 1 })
}

const errorText = (error: unknown): string => {
  if (typeof error === "object" && error !== null && "message" in error && typeof error.message === "string" && error.message !== "") return error.message
  if (typeof error === "object" && error !== null && "_tag" in error) return String(error._tag)
  return String(error)
}
