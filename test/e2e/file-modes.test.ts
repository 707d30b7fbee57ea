/**
 * The files svcbot keeps at rest are its owner's alone: `svcbot run` (the daemon's database
 * with its -wal and -shm files, and the promotion evidence store) and `svcbot optimize` (the
 * results store) create each file 0600 and each folder they create 0700, and leave the mode
 * of a folder that was there before as it was. Every file and folder is printed with its mode.
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, relative } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { ResultsStore } from "../../src/optimize/Results.js"
import { killAll, pollUntil, svcbot, waitForEvent } from "../support/daemon.js"

afterAll(killAll)

const modeOf = (path: string): string => (statSync(path).mode & 0o777).toString(8).padStart(4, "0")

/** Every file and folder under `root` (not `root` itself), with its mode; printed for the record. */
const modesUnder = (root: string): Record<string, string> => {
  const out: Record<string, string> = {}
  const walk = (folder: string): void => {
    for (const entry of readdirSync(folder, { withFileTypes: true })) {
      const path = join(folder, entry.name)
      out[`${relative(root, path)}${entry.isDirectory() ? "/" : ""}`] = modeOf(path)
      if (entry.isDirectory()) walk(path)
    }
  }
  walk(root)
  console.log(Object.entries(out).map(([path, mode]) => `${mode} ${path}`).join("\n"))
  return out
}

describe("files svcbot creates", () => {
  it("svcbot run: the database, its -wal and -shm, and the evidence store are 0600, in folders it creates 0700", async () => {
    const root = mkdtempSync(join(tmpdir(), "svcbot-modes-"))
    // A folder the user made, readable by others: svcbot creates inside it and leaves its mode alone.
    const shared = join(root, "shared")
    mkdirSync(shared)
    chmodSync(shared, 0o755)
    const configPath = join(root, "config.json")
    writeFileSync(
      configPath,
      JSON.stringify({
        mode: "paper",
        venue: { embedded: true, tape: "synthetic:42", tickMs: 200, settleMs: 20 },
        database: { path: join(shared, "data", "svcbot.db") },
        evidence: { path: join(shared, "evidence", "ledger", "evidence.db") },
        strategies: [{ id: "dca-modes", strategy: "dca", symbol: "BTCUSDT", schedule: "* * * * * *", params: { quoteQty: "50", maxQuoteTotal: "100" }, allocation: { USDT: "1000" } }]
      })
    )
    const run = svcbot(["run", "--config", configPath])
    await waitForEvent(run, "config.loaded", 60_000)
    // SQLite makes the -wal and -shm files at the first write and removes them at a clean close: looked at while running.
    const files = ["data/svcbot.db", "data/svcbot.db-wal", "data/svcbot.db-shm", "evidence/ledger/evidence.db", "evidence/ledger/evidence.db-wal", "evidence/ledger/evidence.db-shm"]
    await pollUntil(async () => (files.every((file) => existsSync(join(shared, file))) ? true : undefined), 30_000, files.join(", "), 100)

    const modes = modesUnder(shared)
    expect(modeOf(shared)).toBe("0755")
    expect(modes).toMatchObject({ "data/": "0700", "evidence/": "0700", "evidence/ledger/": "0700", ...Object.fromEntries(files.map((file) => [file, "0600"])) })
    for (const [path, mode] of Object.entries(modes)) expect(mode, path).toBe(path.endsWith("/") ? "0700" : "0600")
    run.child.kill("SIGTERM")
    expect(await run.exit, run.stderr.join("")).toBe(0)
  }, 120_000)

  it("svcbot optimize: the results store is 0600, in a folder it creates 0700", async () => {
    const root = mkdtempSync(join(tmpdir(), "svcbot-modes-"))
    const space = join(root, "space.json")
    writeFileSync(space, JSON.stringify({ params: { fastPeriod: [3, 5], slowPeriod: [20], entry: "market", quoteQty: "100" }, rankBy: "profit" }))
    const results = join(root, "runs", "optimize.db")
    const optimize = svcbot(["optimize", "--strategy", "sma-crossover", "--synthetic", "7:2000", "--space", space, "--threads", "0", "--db", results])
    expect(await optimize.exit, optimize.stderr.join("")).toBe(0)

    const modes = modesUnder(root)
    expect(modes).toMatchObject({ "runs/": "0700", "runs/optimize.db": "0600" })
    for (const [path, mode] of Object.entries(modes)) if (path.startsWith("runs/") && !path.endsWith("/")) expect(mode, path).toBe("0600")

    // Its -wal and -shm, while a run has it open.
    const store = ResultsStore.open(results)
    try {
      // A read of a WAL database makes them.
      expect(store.runIds()).toHaveLength(1)
      expect(modesUnder(join(root, "runs"))).toEqual({ "optimize.db": "0600", "optimize.db-wal": "0600", "optimize.db-shm": "0600" })
    } finally {
      store.close()
    }
  }, 120_000)
})
