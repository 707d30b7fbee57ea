/**
 * `svcbot optimize --cluster` against a real PostgreSQL on loopback and three `svcbot worker`
 * processes, one killed with SIGKILL in the middle of the sweep: every trial is answered and its
 * result written once, no trial runs twice, the killed worker's unfinished trials are run by the
 * others, and the ranking is the local run's for the same seed; `--show` reads the run back from
 * the cluster's PostgreSQL; the run leaves no cluster message or reply behind, and a second run is
 * answered from the results. Skips, saying why, where PostgreSQL cannot start.
 */
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { addressOf, clusterDatabase, common, jsonOf, logLines, missing, startWorker, until } from "../support/cluster.js"
import { type Run, svcbot } from "../support/daemon.js"

const pg = clusterDatabase("optimize-cluster-sweep")
const { query } = pg

const clusterRows = async (): Promise<{ messages: number; replies: number }> => {
  const [row] = await query<{ messages: string; replies: string }>(
    `SELECT (SELECT count(*) FROM cluster_messages) AS messages, (SELECT count(*) FROM cluster_replies) AS replies`
  )
  return { messages: Number(row!.messages), replies: Number(row!.replies) }
}

describe.skipIf(missing !== undefined)("optimisation on a cluster", () => {
  it("three workers, one killed mid-sweep: every trial done once, results as the local run's", async () => {
    // 30 of the 48 combinations, drawn with the seed; halving sends the best third on to the whole window.
    const space = join(pg.dir, "space.json")
    writeFileSync(
      space,
      JSON.stringify({ params: { fastPeriod: { min: 2, max: 13, step: 1 }, slowPeriod: [20, 30, 45, 60], entry: "market" }, rankBy: "sharpe", search: "random", samples: 30, halving: { slices: 2, keep: 0.34 } })
    )
    const workers = await Promise.all([1, 2, 3].map((n) => startWorker(pg, String(n))))
    // A worker says it started once it has registered; three starting at once on a loaded machine take a while.
    await until("every worker started", () => workers.every((w) => logLines(w).some((l) => l.event === "worker.started")), 120_000)

    const clustered = svcbot(["optimize", ...common, "--space", space, "--cluster", pg.url, "--json"])
    const done = (w: Run) => logLines(w).flatMap((l) => (l.event === "optimize.batch-done" ? (l.jobKeys as Array<string>).map((jobKey) => ({ jobKey })) : []))
    // The victim is the first worker seen to finish a trial: which workers the run's lanes land on
    // is the cluster's choice, and a worker given none would have nothing to leave to the others.
    await until("a worker finished a trial", () => workers.some((w) => done(w).length > 0) || clustered.child.exitCode !== null, 120_000)
    const victim = workers.find((w) => done(w).length > 0)
    if (victim === undefined) throw new Error("the run ended before any worker finished a trial")
    victim.child.kill("SIGKILL")
    const doneByVictim = done(victim).length

    expect(await clustered.exit).toBe(0)
    const cluster = jsonOf(clustered)

    const local = svcbot(["optimize", ...common, "--space", space, "--threads", "0", "--db", join(pg.dir, "local.db"), "--json"])
    expect(await local.exit).toBe(0)
    const here = jsonOf(local)
    expect(cluster.ranked).toEqual(here.ranked)
    expect({ candidates: cluster.candidates, trials: cluster.trials }).toEqual({ candidates: here.candidates, trials: here.trials })
    expect(cluster.trials).toBe(30 + 11)

    // Every trial the run asked for has one stored result...
    const asked = await query<{ job_key: string }>(`SELECT job_key FROM optimize_run_trials WHERE run_id = ${cluster.runId}`)
    const stored = await query<{ job_key: string; worker: string }>(`SELECT job_key, worker FROM optimize_results`)
    expect(asked).toHaveLength(cluster.trials)
    expect(new Set(stored.map((r) => r.job_key))).toEqual(new Set(asked.map((r) => r.job_key)))

    // ...and was run once. A survivor never ran a trial that already had a result: its log has
    // each key once, exactly the keys stored under its name. The killed worker's log is cut at
    // its death (a line may die in the pipe), so its lines are only a subset of its rows.
    const survivors = workers.filter((w) => w !== victim)
    // Stopped first, so that their logs are whole: a reply can reach the run before its log line is read.
    for (const worker of survivors) worker.child.kill("SIGTERM")
    await Promise.all(survivors.map((w) => w.exit))
    for (const worker of survivors) {
      const keys = done(worker).map((l) => l.jobKey as string)
      expect(new Set(keys).size).toBe(keys.length)
      expect(new Set(keys)).toEqual(new Set(stored.filter((r) => r.worker === addressOf(worker)).map((r) => r.job_key)))
    }
    const byVictim = stored.filter((r) => r.worker === addressOf(victim)).map((r) => r.job_key)
    for (const line of done(victim)) expect(byVictim).toContain(line.jobKey)

    // The run is kept in the cluster's Postgres: --show reads it back from there.
    const page = join(pg.dir, "cluster-run.html")
    const shown = svcbot(["optimize", "--show", String(cluster.runId), "--cluster", pg.url, "--html", page, "--json"])
    expect(await shown.exit).toBe(0)
    expect(jsonOf(shown).ranked).toEqual(cluster.ranked)
    expect(readFileSync(page, "utf8")).toContain("sharpe over fastPeriod (across) and slowPeriod (up)")

    // The killed worker did some and left the rest to the others.
    expect(doneByVictim).toBeGreaterThan(0)
    expect(byVictim.length).toBeLessThan(cluster.trials)
    expect(stored.length - byVictim.length).toBeGreaterThan(0)

    // The run recorded every answer, so the cluster's own rows for it are gone: nothing else ran yet.
    expect(await clusterRows()).toEqual({ messages: 0, replies: 0 })

    // With every worker stopped, the same question is answered from the stored results alone.
    const again = svcbot(["optimize", ...common, "--space", space, "--cluster", pg.url, "--json"])
    expect(await again.exit).toBe(0)
    const second = jsonOf(again)
    expect(second.runId).not.toBe(cluster.runId)
    expect(second.ranked).toEqual(cluster.ranked)
    expect(await query(`SELECT job_key FROM optimize_results`)).toHaveLength(stored.length)
    expect(await query(`SELECT job_key FROM optimize_run_trials WHERE run_id = ${second.runId}`)).toHaveLength(cluster.trials)
    const secondPage = join(pg.dir, "cluster-run-again.html")
    const shownAgain = svcbot(["optimize", "--show", String(second.runId), "--cluster", pg.url, "--html", secondPage, "--json"])
    expect(await shownAgain.exit).toBe(0)
    expect(jsonOf(shownAgain).ranked).toEqual(cluster.ranked)
    expect(readFileSync(secondPage, "utf8")).toContain("sharpe over fastPeriod (across) and slowPeriod (up)")
  }, 300_000)
})
