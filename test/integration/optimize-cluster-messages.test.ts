/**
 * The cluster messages `svcbot optimize --cluster` runs killed before recording leave behind: a
 * later run deletes those answered a day ago, with their replies, and keeps those answered minutes
 * ago (a live run may still await them) and the unanswered, which a worker started later still
 * answers. Against a real PostgreSQL on loopback; skips, saying why, where PostgreSQL cannot start.
 */
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { ensureSchema } from "../../src/optimize/PgResults.js"
import { clusterDatabase, common, jsonOf, missing, startWorker, until } from "../support/cluster.js"
import { svcbot } from "../support/daemon.js"

const pg = clusterDatabase("optimize-cluster-messages")
const { onPostgres, query } = pg

describe.skipIf(missing !== undefined)("optimisation on a cluster", () => {
  it("a run killed before recording leaves its messages; a later run deletes them once answered a day ago, never the unanswered", async () => {
    // The run ids are read before the first run on this database.
    await onPostgres(ensureSchema)
    const smallSpace = (name: string, fastPeriods: ReadonlyArray<number>) => {
      const path = join(pg.dir, `${name}.json`)
      writeFileSync(path, JSON.stringify({ params: { fastPeriod: fastPeriods, slowPeriod: [25], entry: "market" }, rankBy: "sharpe" }))
      return path
    }
    // Two trials each: a run whose trials' time is not known yet sends them one a batch, on two lanes when no worker is live.
    const answeredSpace = smallSpace("answered-space", [3, 4])
    const waitingSpace = smallSpace("waiting-space", [6, 7])
    const lastRunId = async () => Number((await query<{ id: string | null }>(`SELECT max(run_id) AS id FROM optimize_runs`))[0]!.id ?? 0)
    // The library stores a request under ENTITY/ID/TAG/PRIMARY-KEY, and a batch's primary key is RUN/HASH.
    const messagesOf = (runId: number) => query<{ processed: boolean }>(`SELECT processed FROM cluster_messages WHERE message_id LIKE 'OptimizeTrial/%/RunTrials/${runId}/%'`)
    /** Starts a run with no worker running and kills it once its `trials` messages are stored. */
    const killedRun = async (path: string, trials: number): Promise<number> => {
      const before = await lastRunId()
      const run = svcbot(["optimize", ...common, "--space", path, "--cluster", pg.url])
      await until(`the run's ${trials} messages are stored`, async () => (await lastRunId()) > before && (await messagesOf(before + 1)).length === trials, 60_000)
      run.child.kill("SIGKILL")
      await run.exit
      return before + 1
    }
    /** A run of the answered space: every result is stored, so it needs no worker, and opening its runner prunes. */
    const rerun = async () => {
      const run = svcbot(["optimize", ...common, "--space", answeredSpace, "--cluster", pg.url, "--json"])
      expect(await run.exit).toBe(0)
      return jsonOf(run)
    }

    // Run A's two messages are answered by a worker after A was killed; run B's two wait for one.
    const answered = await killedRun(answeredSpace, 2)
    const worker = await startWorker(pg, "answering")
    await until("the worker answered run A", async () => (await messagesOf(answered)).filter((m) => m.processed).length === 2, 60_000)
    worker.child.kill("SIGTERM")
    await worker.exit
    const waiting = await killedRun(waitingSpace, 2)
    const replies = async () => Number((await query<{ n: string }>(`SELECT count(*) AS n FROM cluster_replies`))[0]!.n)
    const repliesBefore = await replies()
    expect(repliesBefore).toBeGreaterThanOrEqual(2)

    // Answered minutes ago: kept, in case a live run still awaits them.
    const first = await rerun()
    expect(first.trials).toBe(2)
    expect(await messagesOf(answered)).toHaveLength(2)
    expect(await replies()).toBe(repliesBefore)

    // Every message and reply made a day and an hour earlier: a Snowflake id carries its time in its upper bits.
    const shift = `((25 * 3600 * 1000)::bigint << 22)`
    await query(`UPDATE cluster_messages SET id = id - ${shift}, request_id = request_id - ${shift}, last_reply_id = last_reply_id - ${shift}`)
    await query(`UPDATE cluster_replies SET id = id - ${shift}, request_id = request_id - ${shift}`)
    const later = await rerun()
    expect(later.ranked).toEqual(first.ranked)
    expect(await messagesOf(answered)).toHaveLength(0)
    expect(await replies()).toBe(0)
    expect((await messagesOf(waiting)).map((m) => m.processed)).toEqual([false, false])

    // The unanswered ones are still delivered: a worker started now answers run B's trials.
    const late = await startWorker(pg, "late")
    const waitingKeys = async () => Number((await query<{ n: string }>(`SELECT count(*) AS n FROM optimize_results WHERE params LIKE '%"slowPeriod":25%' AND (params LIKE '%"fastPeriod":6,%' OR params LIKE '%"fastPeriod":7,%')`))[0]!.n)
    await until("the late worker answered run B", async () => (await waitingKeys()) === 2, 60_000)
    late.child.kill("SIGTERM")
    await late.exit
  }, 240_000)
})
