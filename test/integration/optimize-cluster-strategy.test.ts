/**
 * A `svcbot worker` whose copy of the strategy differs from the run's refuses the trials instead
 * of answering for other code: the run ends in one line naming the worker and the fix, and no
 * result of it is stored. Against a real PostgreSQL on loopback; skips, saying why, where
 * PostgreSQL cannot start.
 */
import { spawn } from "node:child_process"
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { clusterDatabase, missing } from "../support/cluster.js"
import { freeLoopbackPort, ROOT, svcbot } from "../support/daemon.js"

const pg = clusterDatabase("optimize-cluster-strategy")
const { query } = pg

describe.skipIf(missing !== undefined)("optimisation on a cluster", () => {
  it("a worker with another copy of the strategy refuses its trials: the run ends naming the worker and the fix", async () => {
    // The same relative plugin path names the example for the run and an edited copy for the worker.
    const elsewhere = join(pg.dir, "elsewhere")
    mkdirSync(join(elsewhere, "examples/strategies"), { recursive: true })
    const plugin = "examples/strategies/breakout.ts"
    writeFileSync(join(elsewhere, plugin), `${readFileSync(join(ROOT, plugin), "utf8")}\n// edited on this worker\n`)
    copyFileSync(join(ROOT, "examples/strategies/tsconfig.json"), join(elsewhere, "examples/strategies/tsconfig.json"))
    const port = await freeLoopbackPort()
    const stderr: Array<string> = []
    const worker = spawn(process.execPath, [join(ROOT, "bin/svcbot.js"), "worker", "--cluster", pg.url, "--host", "127.0.0.1", "--port", String(port), "--cache", join(pg.dir, "cache-elsewhere")], {
      cwd: elsewhere,
      env: { PATH: process.env.PATH ?? "" },
      stdio: ["ignore", "ignore", "pipe"]
    })
    worker.stderr!.on("data", (chunk: Buffer) => stderr.push(chunk.toString("utf8")))
    try {
      const breakoutSpace = join(pg.dir, "breakout-space.json")
      writeFileSync(breakoutSpace, JSON.stringify({ params: { lookback: [10, 20], quoteQty: "100" }, rankBy: "profit" }))
      const refused = svcbot(["optimize", "--strategy", plugin, "--synthetic", "3:3000", "--space", breakoutSpace, "--cluster", pg.url])
      expect(await refused.exit).toBe(1)
      const message = refused.stderr.join("").trim().split("\n").pop()
      expect(message).toMatch(new RegExp(`^svcbot: worker 127\\.0\\.0\\.1:${port}: its strategy ${plugin} \\(.+breakout\\.ts, source hash [0-9a-f]{12}\\) is not the one the run was started with \\([0-9a-f]{12}\\); run the same strategy files on every worker$`))
      expect(await query(`SELECT 1 FROM optimize_results WHERE params LIKE '%lookback%'`)).toHaveLength(0)
    } finally {
      worker.kill("SIGKILL")
    }
  }, 120_000)
})
