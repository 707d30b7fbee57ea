/**
 * The image built from this checkout and docker-compose projects started from the repo's own
 * docker-compose.yml, the way a user runs them. Each test file runs its own compose project (its
 * own containers, network and volumes, removed afterwards), so files never share state.
 *
 * Docker Hub may be out of reach: the Dockerfile's base image must then be on the machine already
 * (CI builds a stand-in with ../shared/tools/stand-in-base-image.sh); the suite skips, saying so,
 * when Docker or the base image is missing.
 */
import BetterSqlite3 from "better-sqlite3"
import { spawn, spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { setTimeout as delay } from "node:timers/promises"
import { parse as parseJson } from "../../src/domain/Json.js"
import { defaultDialect } from "../../src/svc/Dialect.js"
import { signRequest } from "../../src/svc/Signer.js"
import { devTradeKey } from "../../src/venue/Accounts.js"
import { freeLoopbackPort, ROOT } from "../support/daemon.js"

export interface Command {
  readonly status: number | null
  readonly stdout: string
  readonly stderr: string
}

const runSync = (command: string, args: ReadonlyArray<string>, env: Record<string, string> = {}, timeoutMs = 120_000): Command => {
  const result = spawnSync(command, args, { cwd: ROOT, encoding: "utf8", timeout: timeoutMs, env: { ...process.env, ...env }, maxBuffer: 64 * 1024 * 1024 })
  return { status: result.status, stdout: result.stdout ?? "", stderr: (result.stderr ?? "") + (result.error === undefined ? "" : String(result.error)) }
}

/** A long command (a build, `up`) run without blocking the test's event loop. */
const runAsync = (command: string, args: ReadonlyArray<string>, env: Record<string, string>, timeoutMs: number): Promise<Command> =>
  new Promise((done) => {
    const child = spawn(command, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs)
    child.on("close", (status) => {
      clearTimeout(timer)
      done({ status, stdout, stderr })
    })
  })

export const baseImage = (): string => {
  const from = /^FROM\s+(\S+)/m.exec(readFileSync(join(ROOT, "Dockerfile"), "utf8"))?.[1]
  if (from === undefined) throw new Error("the Dockerfile has no FROM")
  return from
}

/** Why the container suite cannot run here, or undefined when it can. */
export const unavailable = ((): string | undefined => {
  if (runSync("docker", ["info", "--format", "{{.ServerVersion}}"], {}, 20_000).status !== 0) return "no Docker engine answers (start dockerd)"
  if (runSync("docker", ["image", "inspect", baseImage()], {}, 20_000).status !== 0) {
    return `the base image ${baseImage()} is not on this machine (docker pull it, or build a stand-in with ../shared/tools/stand-in-base-image.sh ${baseImage()})`
  }
  if (composeTool() === undefined) return "neither `docker compose` nor `docker-compose` is installed"
  return undefined
})()

/** `docker compose` where the plugin is installed, else the standalone `docker-compose` (Debian's package). */
export function composeTool(): ReadonlyArray<string> | undefined {
  if (runSync("docker", ["compose", "version"], {}, 20_000).status === 0) return ["docker", "compose"]
  if (runSync("docker-compose", ["version"], {}, 20_000).status === 0) return ["docker-compose"]
  return undefined
}

/** The tag compose's `image: svcbot:${SVCBOT_TAG}` takes in these tests. */
export const IMAGE_TAG = "container-test"

/**
 * Builds svcbot:container-test from the checkout with the classic builder (it needs no frontend
 * image). Layers are cached, so the files after the first rebuild in seconds.
 */
export const buildImage = async (): Promise<number> => {
  const started = Date.now()
  const result = await runAsync("docker", ["build", "-q", "-t", `svcbot:${IMAGE_TAG}`, "."], { DOCKER_BUILDKIT: "0" }, 900_000)
  if (result.status !== 0) throw new Error(`docker build failed (${result.status}):\n${result.stderr.slice(-4000)}`)
  return (Date.now() - started) / 1000
}

export interface Project {
  readonly name: string
  readonly venuePort: number
  /** A compose command in this project; `files` adds override files after docker-compose.yml. */
  compose(args: ReadonlyArray<string>, timeoutMs?: number): Promise<Command>
  /** The id of a service's (first) container, or undefined when it has none. */
  container(service: string): Promise<string | undefined>
  inspect(service: string): Promise<ContainerState>
  /** Removes the project's containers, networks and volumes. */
  down(): Promise<void>
}

export interface ContainerState {
  readonly user: string
  readonly readOnlyRootfs: boolean
  readonly capDrop: ReadonlyArray<string>
  readonly securityOpt: ReadonlyArray<string>
  /** Host paths bind-mounted into the container. */
  readonly binds: ReadonlyArray<string>
  readonly status: string
  readonly health: string | undefined
  /** The last health probes Docker ran, with what each printed (svcbot's check prints the reasons it is not ready). */
  readonly probes: ReadonlyArray<string>
  readonly restarts: number
  readonly exitCode: number
}

export const project = async (suffix: string, options: { readonly env?: Record<string, string>; readonly files?: ReadonlyArray<string> } = {}): Promise<Project> => {
  const tool = composeTool()!
  const name = `svcbot-${suffix}-${process.pid}`
  const venuePort = await freeLoopbackPort()
  const env = { SVCBOT_TAG: IMAGE_TAG, SVCBOT_VENUE_PORT: String(venuePort), ...options.env }
  const files = ["docker-compose.yml", ...(options.files ?? [])].flatMap((file) => ["-f", file])
  const compose: Project["compose"] = (args, timeoutMs = 300_000) =>
    runAsync(tool[0]!, [...tool.slice(1), ...files, "-p", name, ...args], env, timeoutMs)
  const container: Project["container"] = async (service) => {
    const ids = await compose(["ps", "-a", "-q", service])
    return ids.stdout.split("\n").find((line) => line.trim() !== "")?.trim()
  }
  return {
    name,
    venuePort,
    compose,
    container,
    inspect: async (service) => {
      const id = await container(service)
      if (id === undefined) throw new Error(`${name}: service ${service} has no container`)
      const answer = runSync("docker", ["inspect", id])
      const [found] = JSON.parse(answer.stdout) as [{
        State: { Status: string; ExitCode: number; Health?: { Status: string; Log?: Array<{ ExitCode: number; Output: string }> } }
        RestartCount: number
        Config: { User: string }
        HostConfig: { ReadonlyRootfs: boolean; CapDrop: Array<string> | null; SecurityOpt: Array<string> | null }
        Mounts: Array<{ Type: string; Source: string }>
      }]
      return {
        user: found.Config.User,
        readOnlyRootfs: found.HostConfig.ReadonlyRootfs,
        capDrop: found.HostConfig.CapDrop ?? [],
        securityOpt: found.HostConfig.SecurityOpt ?? [],
        binds: found.Mounts.filter((m) => m.Type === "bind").map((m) => m.Source),
        status: found.State.Status,
        health: found.State.Health?.Status,
        probes: (found.State.Health?.Log ?? []).slice(-3).map((probe) => `exit ${probe.ExitCode}: ${probe.Output.trim()}`),
        restarts: found.RestartCount,
        exitCode: found.State.ExitCode
      }
    },
    down: async () => {
      await compose(["--profile", "data", "--profile", "live", "--profile", "cluster", "down", "-v", "--remove-orphans", "-t", "5"])
    }
  }
}

/** Polls a service until Docker calls it healthy, failing with its health log when the bound passes. */
export const untilHealthy = async (p: Project, service: string, timeoutMs: number): Promise<number> => {
  const started = Date.now()
  for (;;) {
    const state = await p.inspect(service).catch(() => undefined)
    if (state?.health === "healthy") return (Date.now() - started) / 1000
    if (Date.now() - started > timeoutMs) {
      const logs = await p.compose(["logs", "--tail", "30", service])
      throw new Error(`${service} not healthy after ${timeoutMs} ms (state ${JSON.stringify(state)}):\n${logs.stdout.slice(-4000)}`)
    }
    await delay(1000)
  }
}

/** A signed request to the published venue port with the development trade key the compose bot uses. */
export const venueRead = async (p: Project, target: string): Promise<any> => {
  const signed = signRequest(devTradeKey.keyId, devTradeKey.secret, { method: "GET", target, timestamp: Date.now(), recvWindow: defaultDialect.recvWindowMs })
  const response = await fetch(`http://127.0.0.1:${p.venuePort}${target}`, { headers: signed.headers, signal: AbortSignal.timeout(10_000) })
  const text = await response.text()
  if (!response.ok) throw new Error(`GET ${target} answered ${response.status}: ${text}`)
  return parseJson(text)
}

export interface VenueOrder {
  readonly clientOrderId: string
  readonly symbol: string
  readonly side: string
  readonly limitPrice: unknown
}

export const openOrders = async (p: Project): Promise<ReadonlyArray<VenueOrder>> => (await venueRead(p, "/api/spot/open-orders")) as ReadonlyArray<VenueOrder>

/** Every fill of the development account, following `nextCursor`. */
export const venueFillIds = async (p: Project): Promise<Array<string>> => {
  const ids: Array<string> = []
  let cursor: string | null = null
  do {
    const page = (await venueRead(p, `/api/spot/fills?limit=500${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`)) as { fills: Array<{ fillId: string }>; nextCursor: string | null }
    ids.push(...page.fills.map((f) => String(f.fillId)))
    cursor = page.nextCursor
  } while (cursor !== null)
  return ids.sort()
}

/** Resting orders that repeat another's symbol, side and price: a grid places one per level, so any is a duplicate. */
export const duplicateLevels = (orders: ReadonlyArray<VenueOrder>): number => {
  const seen = new Set<string>()
  let duplicates = 0
  for (const order of orders) {
    const level = `${order.symbol} ${order.side} ${String(order.limitPrice)}`
    if (seen.has(level)) duplicates += 1
    seen.add(level)
  }
  return duplicates
}

/** A temporary folder for override files and mounted configs. */
export const scratch = (prefix: string): string => mkdtempSync(join(tmpdir(), `svcbot-${prefix}-`))

export const writeJson = (path: string, value: unknown): string => {
  writeFileSync(path, JSON.stringify(value, null, 2))
  return path
}

/** The compose log lines of a service parsed as the daemon's JSON events. */
export const serviceEvents = async (p: Project, service: string): Promise<Array<Record<string, unknown>>> => {
  const logs = await p.compose(["logs", "--no-color", service])
  return logs.stdout.split("\n").flatMap((line) => {
    const start = line.indexOf("{")
    if (start < 0) return []
    try {
      return [JSON.parse(line.slice(start)) as Record<string, unknown>]
    } catch {
      return []
    }
  })
}

/**
 * The fill ids in a service's ledger, read from a copy of its data volume (`docker cp` works on a
 * stopped container too, and a copy keeps the test from holding the daemon's database open).
 */
export const ledgerFillIds = async (p: Project, service: string): Promise<Array<string>> => {
  const id = await p.container(service)
  if (id === undefined) throw new Error(`${p.name}: service ${service} has no container`)
  const into = scratch("ledger")
  const copied = runSync("docker", ["cp", `${id}:/app/data/.`, into])
  if (copied.status !== 0) throw new Error(`docker cp of ${service}'s /app/data failed: ${copied.stderr}`)
  const db = new BetterSqlite3(join(into, "svcbot.db"), { fileMustExist: true })
  try {
    return (db.prepare("SELECT fill_id AS id FROM fills ORDER BY fill_id").all() as Array<{ id: string }>).map((row) => String(row.id)).sort()
  } finally {
    db.close()
  }
}
