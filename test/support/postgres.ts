/**
 * A throwaway PostgreSQL cluster on a loopback port, for the tests and the bench
 * that need a real Postgres. It comes from the system's packages (Debian's
 * `postgresql`); the server refuses to run as root, so under root the cluster is
 * made and started as the `postgres` user. `findPostgres` says why when none can
 * be started, so callers skip with that reason instead of failing.
 */
import { execFileSync, spawnSync } from "node:child_process"
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { freeLoopbackPort } from "./daemon.js"

export interface Postgres {
  /** postgres://svcbot@127.0.0.1:PORT/svcbot */
  readonly url: string
  readonly stop: () => void
}

interface Tools {
  readonly bin: string
  /** The user the server runs as when this process is root. */
  readonly runAs?: { readonly name: string; readonly uid: number; readonly gid: number }
}

const binDir = (): string | undefined => {
  if (process.env.PG_BIN !== undefined) return process.env.PG_BIN
  const root = "/usr/lib/postgresql"
  if (!existsSync(root)) return undefined
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, "bin", "pg_ctl")))
    .sort((a, b) => Number(b) - Number(a))
  return versions[0] === undefined ? undefined : join(root, versions[0], "bin")
}

/** The server's tools, or why they cannot be used here. */
export const findPostgres = (): Tools | { readonly missing: string } => {
  const bin = binDir()
  if (bin === undefined) return { missing: "PostgreSQL is not installed (apt-get install postgresql, or set PG_BIN to its bin directory)" }
  if (process.getuid?.() !== 0) return { bin }
  const id = spawnSync("id", ["-u", "postgres"], { encoding: "utf8" })
  const gid = spawnSync("id", ["-g", "postgres"], { encoding: "utf8" })
  if (id.status !== 0 || gid.status !== 0) return { missing: "running as root and there is no postgres user to run the server as" }
  return { bin, runAs: { name: "postgres", uid: Number(id.stdout.trim()), gid: Number(gid.stdout.trim()) } }
}

/** Starts a fresh cluster with a `svcbot` superuser and database, trusting loopback connections. */
export const startPostgres = async (tools: Tools): Promise<Postgres> => {
  const dir = mkdtempSync(join(tmpdir(), "svcbot-pg-"))
  const data = join(dir, "data")
  const run = (tool: string, args: ReadonlyArray<string>): void => {
    const command = join(tools.bin, tool)
    if (tools.runAs === undefined) execFileSync(command, args, { stdio: "pipe" })
    else execFileSync("runuser", ["-u", tools.runAs.name, "--", command, ...args], { stdio: "pipe" })
  }
  if (tools.runAs !== undefined) {
    chownSync(dir, tools.runAs.uid, tools.runAs.gid)
    chmodSync(dir, 0o700)
  }
  const port = await freeLoopbackPort()
  try {
    run("initdb", ["-D", data, "-U", "svcbot", "-A", "trust", "--no-sync", "-E", "UTF8"])
    // fsync off: the cluster lives as long as one test file and is thrown away after.
    const settings = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c max_connections=200`
    run("pg_ctl", ["-D", data, "-o", settings, "-l", join(dir, "server.log"), "-w", "-t", "60", "start"])
    run("createdb", ["-h", "127.0.0.1", "-p", String(port), "-U", "svcbot", "svcbot"])
  } catch (error) {
    rmSync(dir, { recursive: true, force: true })
    const stderr = (error as { stderr?: Buffer }).stderr?.toString() ?? ""
    throw new Error(`cannot start PostgreSQL in ${dir}: ${stderr || String(error)}`)
  }
  return {
    url: `postgres://svcbot@127.0.0.1:${port}/svcbot`,
    stop: () => {
      try {
        run("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"])
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }
  }
}
