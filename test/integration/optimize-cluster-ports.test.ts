/**
 * The ports of `svcbot worker`: three workers started without --port on one machine each take a
 * free port, register in the cluster under it and share a run; a worker given a --port in use is
 * refused in one line naming it. Against a real PostgreSQL on loopback; skips, saying why, where
 * PostgreSQL cannot start.
 */
import { writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { addressOf, clusterDatabase, jsonOf, missing, until } from "../support/cluster.js"
import { svcbot } from "../support/daemon.js"

const pg = clusterDatabase("optimize-cluster-ports")
const { query } = pg

describe.skipIf(missing !== undefined)("optimisation on a cluster", () => {
  it("three workers without --port on one machine each take a free port, register under it, stay up and share a run", async () => {
    const workers = [1, 2, 3].map((n) => svcbot(["worker", "--cluster", pg.url, "--host", "127.0.0.1", "--cache", join(pg.dir, `cache-free-${n}`)]))
    const registered = async () => {
      // The library makes its tables as the first runner starts: until then no worker is registered.
      const rows = await query<{ address: string }>(`SELECT address FROM cluster_runners WHERE healthy AND last_heartbeat > now() - interval '10 seconds'`).catch(() => [])
      return workers.filter((w) => rows.some((r) => r.address === addressOf(w)))
    }
    await until("every worker registered or one stopped", async () => workers.some((w) => w.child.exitCode !== null) || (await registered()).length === 3, 120_000)
    for (const worker of workers) expect(worker.child.exitCode, worker.stderr.join("")).toBeNull()
    const addresses = workers.map((w) => addressOf(w)!)
    expect(new Set(addresses).size).toBe(3)
    for (const address of addresses) expect(address).toMatch(/^127\.0\.0\.1:[1-9]\d*$/)

    // The database is new to this file, so no trial is answered from stored results: every one is sent to the workers.
    const grid = join(pg.dir, "free-port-space.json")
    writeFileSync(grid, JSON.stringify({ params: { fastPeriod: [2, 3, 4, 5, 6, 7], slowPeriod: [30, 40, 50, 60], entry: "market" }, rankBy: "sharpe" }))
    const run = svcbot(["optimize", "--strategy", "sma-crossover", "--synthetic", "12:20000", "--params", '{"quoteQty": "1000"}', "--space", grid, "--cluster", pg.url, "--json"])
    expect(await run.exit, run.stderr.join("")).toBe(0)
    const outcome = jsonOf(run)
    expect(outcome.trials).toBe(24)
    const writers = await query<{ worker: string }>(
      `SELECT DISTINCT r.worker FROM optimize_results r JOIN optimize_run_trials t ON t.job_key = r.job_key WHERE t.run_id = ${outcome.runId}`
    )
    expect(writers.length).toBeGreaterThan(0)
    for (const { worker } of writers) expect(addresses).toContain(worker)
    for (const worker of workers) expect(worker.child.exitCode, worker.stderr.join("")).toBeNull()
    for (const worker of workers) worker.child.kill("SIGTERM")
    await Promise.all(workers.map((w) => w.exit))
  }, 300_000)

  it("a worker given a --port that is in use exits 2 with one line naming --port", async () => {
    const taken = createServer()
    const port = await new Promise<number>((done) => taken.listen(0, "127.0.0.1", () => done((taken.address() as { port: number }).port)))
    try {
      const worker = svcbot(["worker", "--cluster", pg.url, "--host", "127.0.0.1", "--port", String(port), "--cache", join(pg.dir, "cache-taken")])
      expect(await worker.exit).toBe(2)
      const lines = worker.stderr.join("").trim().split("\n")
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatch(new RegExp(`^svcbot: --port ${port} is in use on 127\\.0\\.0\\.1`))
    } finally {
      taken.close()
    }
  }, 60_000)
})
