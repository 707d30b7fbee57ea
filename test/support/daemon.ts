/**
 * `svcbot` as a child process, the way a user runs it, with its JSON log lines
 * collected as they arrive; and reads of its SQLite file.
 *
 *   const run = svcbot(["run", "--config", configPath], { SVC_API_KEY: venue.keyId, SVC_API_SECRET: venue.secret })
 *   await waitForEvent(run, "config.loaded", 60_000)
 *   run.child.kill("SIGTERM"); expect(await run.exit).toBe(0)
 */
import BetterSqlite3 from "better-sqlite3"
import { spawn, type ChildProcess } from "node:child_process"
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { setTimeout as delay } from "node:timers/promises"

export const ROOT = resolve(import.meta.dirname, "../..")

export interface PaperSetup {
  readonly dir: string
  readonly configPath: string
  readonly dbPath: string
}

/**
 * A paper-mode config against an external test venue, in a fresh directory with its own
 * database; `rest` adds or overrides fields (a `venue` given here is merged into the URL's).
 */
export const paperConfig = (prefix: string, venueUrl: string, rest: Record<string, unknown>): PaperSetup => {
  const dir = mkdtempSync(join(tmpdir(), `svcbot-${prefix}-`))
  const dbPath = join(dir, "svcbot.db")
  const configPath = join(dir, "config.json")
  const { venue, ...others } = rest as { venue?: Record<string, unknown> }
  writeFileSync(configPath, JSON.stringify({ mode: "paper", venue: { embedded: false, baseUrl: venueUrl, ...venue }, database: { path: dbPath }, ...others }))
  return { dir, configPath, dbPath }
}

export interface Run {
  readonly child: ChildProcess
  /** Complete stdout lines so far. */
  readonly lines: Array<string>
  readonly stderr: Array<string>
  readonly exit: Promise<number | null>
}

const started: Array<ChildProcess> = []

/** Kills what is still running (afterAll of a test file). */
export const killAll = (): void => {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
}

export const svcbot = (args: ReadonlyArray<string>, env: Record<string, string> = {}): Run => {
  const child = spawn(process.execPath, [join(ROOT, "bin/svcbot.js"), ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  started.push(child)
  const lines: Array<string> = []
  const stderr: Array<string> = []
  let pending = ""
  child.stdout!.on("data", (chunk: Buffer) => {
    pending += chunk.toString("utf8")
    const parts = pending.split("\n")
    pending = parts.pop() ?? ""
    lines.push(...parts.filter((line) => line !== ""))
  })
  child.stderr!.on("data", (chunk: Buffer) => stderr.push(chunk.toString("utf8")))
  const exit = new Promise<number | null>((done) => child.on("exit", (code) => done(code)))
  return { child, lines, stderr, exit }
}

/** The JSON log lines so far (other stdout lines are skipped). */
export const events = (run: Run): Array<Record<string, unknown>> =>
  run.lines.flatMap((line) => {
    try {
      return [JSON.parse(line) as Record<string, unknown>]
    } catch {
      return []
    }
  })

/** Polls until the daemon logged `event` (and `match` holds for it), or fails naming what it saw last. */
export const waitForEvent = async (run: Run, event: string, deadlineMs: number, match: (e: Record<string, unknown>) => boolean = () => true): Promise<Record<string, unknown>> => {
  const until = Date.now() + deadlineMs
  for (;;) {
    const found = events(run).find((e) => e.event === event && match(e))
    if (found !== undefined) return found
    if (run.child.exitCode !== null) throw new Error(`svcbot exited (${run.child.exitCode}) before logging ${event}: ${run.stderr.join("")}`)
    if (Date.now() > until) throw new Error(`timed out waiting for ${event}; last lines:\n${run.lines.slice(-5).join("\n")}`)
    await delay(50)
  }
}

/** Polls `probe` every `everyMs` until it returns a value other than undefined, or fails after `timeoutMs`. */
export const pollUntil = async <A>(probe: () => Promise<A | undefined>, timeoutMs: number, what: string, everyMs = 25): Promise<A> => {
  const until = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await delay(everyMs)
  }
}

/** A process's peak resident set so far in MB, from the kernel (Linux): what the process needed at its worst. */
export const peakRssMb = (pid: number): number => {
  const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmHWM:"))
  return Number(/(\d+)/.exec(line ?? "")?.[1] ?? Number.NaN) / 1024
}

/** One read-only query against the daemon's SQLite file. */
export const query = <T>(dbPath: string, sql: string, ...params: ReadonlyArray<unknown>): Array<T> => {
  const db = new BetterSqlite3(dbPath, { readonly: true, fileMustExist: true })
  try {
    return db.prepare(sql).all(...params) as Array<T>
  } finally {
    db.close()
  }
}

/** A loopback port nothing listens on right now (for the daemon's health server). */
export const freeLoopbackPort = (): Promise<number> =>
  new Promise((done, fail) => {
    const server = createServer()
    server.once("error", fail)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => (typeof address === "object" && address !== null ? done(address.port) : fail(new Error("no port"))))
    })
  })

/** One `GET /healthz`: its status and body, or undefined while nothing answers. */
export const healthz = async (url: string): Promise<{ status: number; body: string } | undefined> => {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(2000) })
    return { status: response.status, body: await response.text() }
  } catch {
    return undefined
  }
}
