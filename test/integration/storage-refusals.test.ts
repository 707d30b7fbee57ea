/**
 * `svcbot run` refuses, with exit code 2, one line naming the file, the cause and the fix, and
 * the file's bytes unchanged, a database it must not use: one another `svcbot run` holds, one
 * whose write lock another program holds, one it cannot write (mode bits for a user, a read-only
 * mount for root), a folder in its place, one on a volume with no room for its files, a damaged
 * one and one written by a newer svcbot. The evidence store and the optimiser's results store
 * are refused alike. A run killed with SIGKILL leaves no lock behind. The WAL stays bounded.
 */
import { execFileSync, spawn } from "node:child_process"
import { chmodSync, chownSync, closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, statSync, writeFileSync, writeSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it, type TestContext } from "vitest"
import { ResultsStore, ResultsUnavailable } from "../../src/optimize/Results.js"
import { openDatabase } from "../../src/store/Database.js"
import { killAll, ROOT, svcbot, waitForEvent, type Run } from "../support/daemon.js"
import { expectRefused } from "../support/refusals.js"

afterAll(killAll)

const DCA = { id: "dca-refusals", strategy: "dca", symbol: "BTCUSDT", schedule: "* * * * * *", params: { quoteQty: "50", maxQuoteTotal: "100" }, allocation: { USDT: "1000" } }

/** A paper config on the embedded venue, its database (and evidence store, when given) where the test says. */
const configFor = (dir: string, dbPath: string, evidencePath?: string): string => {
  const configPath = join(dir, "config.json")
  writeFileSync(
    configPath,
    JSON.stringify({
      mode: "paper",
      venue: { embedded: true, tape: "synthetic:42", tickMs: 200, settleMs: 20 },
      database: { path: dbPath },
      ...(evidencePath === undefined ? {} : { evidence: { path: evidencePath } }),
      strategies: [DCA]
    })
  )
  chmodSync(configPath, 0o644)
  return configPath
}

/** A migrated daemon database with a few pages of rows, closed cleanly (no -wal left). */
const migratedDatabase = (path: string, migrationsDir?: string): void => {
  const db = openDatabase({ path, ...(migrationsDir === undefined ? {} : { migrationsDir }) })
  db.exec("CREATE TABLE filler (n INTEGER PRIMARY KEY, text TEXT NOT NULL)")
  const insert = db.prepare("INSERT INTO filler (text) VALUES (?)")
  db.transaction(() => {
    for (let i = 0; i < 400; i++) insert.run(`row ${i} ${"x".repeat(200)}`)
  })()
  db.close()
}

/** Overwrites a page in the middle of the file with garbage, as a failing disk would. */
const damage = (path: string): void => {
  const pages = statSync(path).size / 4096
  const fd = openSync(path, "r+")
  writeSync(fd, Buffer.alloc(4096, 0xa5), 0, 4096, Math.floor(pages / 2) * 4096)
  closeSync(fd)
}

const newDir = (name: string): string => mkdtempSync(join(tmpdir(), `svcbot-refusals-${name}-`))

/** Runs `body` on a tmpfs mounted with `options` (needs root), unmounted after; skips the test where mounting is refused. */
const onTmpfs = async (context: TestContext, name: string, options: string, body: (mountPoint: string) => Promise<void>): Promise<void> => {
  const mountPoint = newDir(name)
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", options, "tmpfs", mountPoint], { stdio: "pipe" })
  } catch (error) {
    context.skip(`mounting a tmpfs is refused here: ${String((error as { stderr?: unknown }).stderr ?? error).trim()}`)
  }
  try {
    await body(mountPoint)
  } finally {
    execFileSync("umount", [mountPoint], { stdio: "pipe" })
  }
}

describe("svcbot run on a database it must not use", () => {
  it("a second run on the same file is refused naming the other svcbot; after a SIGKILL the file starts again", async () => {
    const dir = newDir("second")
    const dbPath = join(dir, "data", "svcbot.db")
    const configPath = configFor(dir, dbPath)
    const first = svcbot(["run", "--config", configPath])
    await waitForEvent(first, "config.loaded", 60_000)
    const second = svcbot(["run", "--config", configPath])
    const line = await expectRefused(second, dbPath, /in use by another svcbot process/)
    console.log(`second run: ${line}`)
    expect(first.child.exitCode).toBeNull()

    first.child.kill("SIGKILL")
    await first.exit
    expect(existsSync(`${dbPath}.lock`)).toBe(true)
    const third = svcbot(["run", "--config", configPath])
    await waitForEvent(third, "config.loaded", 60_000)
    third.child.kill("SIGTERM")
    expect(await third.exit).toBe(0)
  })

  it("a file the user may not write is refused (as root the run is made as nobody: mode bits do not stop root)", async (context) => {
    const asRoot = process.getuid?.() === 0
    if (asRoot) {
      // nobody must be able to run this node on this checkout: not so where either sits in a
      // folder only root may enter (a checkout under /root, a node unpacked in a 0700 temp dir).
      try {
        execFileSync(process.execPath, ["-e", "require('node:fs').accessSync(process.argv[1])", join(ROOT, "bin/svcbot.js")], { uid: 65534, gid: 65534, stdio: "pipe" })
      } catch (error) {
        context.skip(`the user nobody cannot run ${process.execPath} on ${ROOT} (${(error as NodeJS.ErrnoException).code ?? String((error as { stderr?: unknown }).stderr ?? error).trim().split("\n")[0]}), so the mode bits cannot be tried as another user`)
      }
    }
    const dir = newDir("mode")
    const dbPath = join(dir, "svcbot.db")
    migratedDatabase(dbPath)
    const before = readFileSync(dbPath)
    const configPath = configFor(dir, dbPath)
    chmodSync(dbPath, 0o444)
    if (asRoot) {
      chmodSync(dir, 0o755)
      chownSync(dir, 65534, 65534)
      chownSync(dbPath, 65534, 65534)
    }
    const child = spawn(process.execPath, [join(ROOT, "bin/svcbot.js"), "run", "--config", configPath], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? "", HOME: dir },
      stdio: ["ignore", "pipe", "pipe"],
      ...(asRoot ? { uid: 65534, gid: 65534 } : {})
    })
    const stderr: Array<string> = []
    child.stderr.on("data", (chunk: Buffer) => stderr.push(chunk.toString("utf8")))
    child.stdout.resume()
    const run: Run = { child, lines: [], stderr, exit: new Promise((done) => child.on("exit", (code) => done(code))) }
    const line = await expectRefused(run, dbPath, /is read-only for this user/)
    console.log(`mode 0444: ${line}`)
    expect(readFileSync(dbPath).equals(before)).toBe(true)
  })

  it("a file on a read-only mount is refused", async (context) => {
    await onTmpfs(context, "mount", "size=16m", async (mountPoint) => {
      const dbPath = join(mountPoint, "svcbot.db")
      migratedDatabase(dbPath)
      const before = readFileSync(dbPath)
      execFileSync("mount", ["-o", "remount,ro", mountPoint], { stdio: "pipe" })
      const run = svcbot(["run", "--config", configFor(newDir("mount-config"), dbPath)])
      const line = await expectRefused(run, dbPath, /is on a read-only file system/)
      console.log(`read-only mount: ${line}`)
      expect(readFileSync(dbPath).equals(before)).toBe(true)
    })
  })

  it("a file another program holds the write lock of is refused naming it, unchanged", async () => {
    const dir = newDir("locked")
    const dbPath = join(dir, "svcbot.db")
    // An operator's shell that made the file and left a transaction open on it.
    const holder = spawn(
      process.execPath,
      ["-e", `const db = new (require("better-sqlite3"))(${JSON.stringify(dbPath)}); db.exec("BEGIN IMMEDIATE"); process.stdout.write("locked\\n"); setTimeout(() => {}, 60_000)`],
      { cwd: ROOT, stdio: ["ignore", "pipe", "inherit"] }
    )
    try {
      await new Promise<void>((done) => holder.stdout!.once("data", () => done()))
      const before = readFileSync(dbPath)
      await expectRefused(svcbot(["run", "--config", configFor(dir, dbPath)]), dbPath, /is locked by another process.*stop the process that holds it/)
      expect(readFileSync(dbPath).equals(before), "the file after the refused start").toBe(true)
    } finally {
      holder.kill()
    }
  }, 60_000)

  it("a folder where the file should be is refused, naming a file to use in it", async () => {
    const dir = newDir("folder")
    const dbPath = join(dir, "svcbot.db")
    mkdirSync(dbPath)
    const line = await expectRefused(svcbot(["run", "--config", configFor(dir, dbPath)]), dbPath, /is a folder, not a file: point the config's database\.path at a file, e\.g\. .*svcbot\.db\/svcbot\.db$/)
    console.log(`a folder: ${line}`)
  })

  it("a volume with no room for new files (inodes) is refused, naming it", async (context) => {
    // Three inodes: the mount's root and two files, where a database needs four.
    await onTmpfs(context, "inodes", "size=16m,nr_inodes=3", async (mountPoint) => {
      const dbPath = join(mountPoint, "svcbot.db")
      const line = await expectRefused(svcbot(["run", "--config", configFor(newDir("inodes-config"), dbPath)]), dbPath, /is on a volume with no room for new files \(2 of its 3 inodes free, 4 needed .*\): delete files on that volume \(`df -i` shows its inodes\)/)
      console.log(`no inodes: ${line}`)
      expect(existsSync(dbPath)).toBe(false)
    })
  })

  it("a file with damaged pages is refused, unchanged", async () => {
    const dir = newDir("damaged")
    const dbPath = join(dir, "svcbot.db")
    migratedDatabase(dbPath)
    damage(dbPath)
    const before = readFileSync(dbPath)
    const line = await expectRefused(svcbot(["run", "--config", configFor(dir, dbPath)]), dbPath, /is damaged .*restore the file from a backup/)
    console.log(`damaged: ${line}`)
    expect(readFileSync(dbPath).equals(before)).toBe(true)
  })

  it("a file carrying a migration this build does not ship is refused, unchanged", async () => {
    const dir = newDir("newer")
    const dbPath = join(dir, "svcbot.db")
    migratedDatabase(dbPath)
    const db = openDatabase({ path: dbPath })
    db.prepare("INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'from_the_future', 0)").run()
    db.close()
    const before = readFileSync(dbPath)
    const line = await expectRefused(svcbot(["run", "--config", configFor(dir, dbPath)]), dbPath, /newer than this svcbot knows/)
    console.log(`newer: ${line}`)
    expect(readFileSync(dbPath).equals(before)).toBe(true)
  })

  it("a damaged evidence store of its own is refused before the daemon's database is touched", async () => {
    const dir = newDir("evidence")
    const dbPath = join(dir, "svcbot.db")
    const evidencePath = join(dir, "evidence.db")
    migratedDatabase(evidencePath)
    damage(evidencePath)
    const before = readFileSync(evidencePath)
    const line = await expectRefused(svcbot(["run", "--config", configFor(dir, dbPath, evidencePath)]), evidencePath, /is damaged/)
    console.log(`evidence store: ${line}`)
    expect(readFileSync(evidencePath).equals(before)).toBe(true)
    expect(existsSync(dbPath)).toBe(false)
  })
})

describe("the optimiser's results store", () => {
  const RESULTS_MIGRATIONS = join(ROOT, "migrations", "results")

  it("refuses a damaged file, unchanged, as a refusal naming it", () => {
    const path = join(newDir("results"), "results.db")
    migratedDatabase(path, RESULTS_MIGRATIONS)
    damage(path)
    const before = readFileSync(path)
    let refusal: unknown
    try {
      ResultsStore.open(path).close()
    } catch (error) {
      refusal = error
    }
    expect(refusal).toBeInstanceOf(ResultsUnavailable)
    expect((refusal as ResultsUnavailable).refused).toBe(true)
    expect((refusal as ResultsUnavailable).message).toMatch(new RegExp(`^the database ${path} is damaged`))
    expect(readFileSync(path).equals(before)).toBe(true)
  })

  it("svcbot optimize on a damaged results file exits 2 in one line, the file unchanged", async () => {
    const dir = newDir("results-cli")
    const path = join(dir, "results.db")
    migratedDatabase(path, RESULTS_MIGRATIONS)
    damage(path)
    const before = readFileSync(path)
    const space = join(dir, "space.json")
    writeFileSync(space, JSON.stringify({ params: { fastPeriod: [3, 6], slowPeriod: [13] }, rankBy: "profit" }))
    const optimize = svcbot(["optimize", "--strategy", "sma-crossover", "--synthetic", "7:300", "--params", '{"quoteQty": "1000"}', "--space", space, "--threads", "0", "--db", path])
    await expectRefused(optimize, path, /is damaged/)
    expect(readFileSync(path).equals(before)).toBe(true)
  })

  it("refuses one written by a newer svcbot", () => {
    const path = join(newDir("results-newer"), "results.db")
    const store = ResultsStore.open(path)
    store.close()
    const db = openDatabase({ path, migrationsDir: RESULTS_MIGRATIONS })
    db.prepare("INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'from_the_future', 0)").run()
    db.close()
    expect(() => ResultsStore.open(path)).toThrow(/newer than this svcbot knows/)
  })
})

describe("the write-ahead log", () => {
  it("is cut back after checkpoints however much was written through it", () => {
    const dir = newDir("wal")
    mkdirSync(dir, { recursive: true })
    const path = join(dir, "svcbot.db")
    const db = openDatabase({ path })
    db.exec("CREATE TABLE filler (n INTEGER PRIMARY KEY, text TEXT NOT NULL)")
    // One transaction of 40 MB grows the WAL past any limit while it lasts; the commits after it
    // checkpoint and start the WAL again from the front, cut back to journal_size_limit.
    const insert = db.prepare("INSERT INTO filler (text) VALUES (?)")
    db.transaction(() => {
      for (let i = 0; i < 10_000; i++) insert.run("x".repeat(4000))
    })()
    const peak = statSync(`${path}-wal`).size
    for (let i = 0; i < 3000; i++) insert.run("y".repeat(100))
    const after = statSync(`${path}-wal`).size
    db.close()
    console.log(`WAL: ${(peak / 1e6).toFixed(1)} MB after the large transaction, ${(after / 1e6).toFixed(1)} MB after the small commits`)
    expect(peak).toBeGreaterThan(30e6)
    expect(after).toBeLessThanOrEqual(8 * 1024 * 1024)
  })
})
