/**
 * kill -9 of the real daemon: `svcbot run` trades against a svc-venue that loses
 * the answer to 30% of accepted placements, and is killed with SIGKILL at random
 * points after it has started placing, then restarted on the same database. A
 * last run stops cleanly (cancel on stop, final fill sync). Then the venue's own
 * order list must hold at most one order per journaled intent and none the
 * journal does not know, the ledger must equal the venue's fills row for row, and
 * the balances must agree.
 */
import { spawn, type ChildProcess } from "node:child_process"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { startVenue } from "../support/venue.js"
import { report, verify } from "./verify.js"

const ROOT = resolve(import.meta.dirname, "../..")
const KILLS = 3

const children: Array<ChildProcess> = []
const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** Seeded, so a failing run can be repeated from the seed it prints. */
const lcg = (seed: number) => {
  let state = seed >>> 0
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0
    return state / 2 ** 32
  }
}

const startDaemon = (configPath: string, env: Record<string, string>, args: ReadonlyArray<string> = []) => {
  const child = spawn(process.execPath, [join(ROOT, "bin/svcbot.js"), "run", "--config", configPath, ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  children.push(child)
  let accepted = 0
  let stderr = ""
  child.stdout!.on("data", (chunk: Buffer) => {
    accepted += chunk.toString("utf8").split('"order.accepted"').length - 1
  })
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
  const exit = new Promise<number | null>((done) => child.on("exit", (code) => done(code)))
  return { child, exit, accepted: () => accepted, stderr: () => stderr }
}

const waitFor = async (what: string, condition: () => boolean, deadlineMs: number) => {
  const until = Date.now() + deadlineMs
  while (!condition()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`)
    await new Promise((done) => setTimeout(done, 50))
  }
}

describe("chaos: kill -9 of svcbot run", () => {
  it("random SIGKILLs and restarts of the daemon lose nothing and duplicate nothing", async () => {
    const venue = await startVenue({ tape: { kind: "synthetic", seed: 7 }, tickMs: 200, faults: { dropAcceptedRatio: 0.3, seed: 5 } })
    cleanups.push(() => venue.close())
    const dir = mkdtempSync(join(tmpdir(), "svcbot-kill9-"))
    const configPath = join(dir, "config.json")
    writeFileSync(
      configPath,
      JSON.stringify({
        mode: "paper",
        venue: { embedded: false, baseUrl: venue.url },
        database: { path: join(dir, "svcbot.db") },
        engine: { cancelOnStop: true, reconcileIntervalMs: 2000 },
        strategies: [
          { id: "grid", strategy: "grid", symbol: "BTCUSDT", pollMs: 500, params: { lowerPrice: "59000", upperPrice: "61000", levels: 11, orderQty: "0.002", retryAfterMs: 2000 } },
          { id: "mm", strategy: "market-maker", symbol: "ETHUSDT", pollMs: 500, params: { halfSpreadBps: 15, orderQty: "0.05", maxInventory: "0.5", skewBps: 20, requoteBps: 5 } }
        ]
      })
    )
    const env = { SVC_API_KEY: venue.keyId, SVC_API_SECRET: venue.secret }
    const seed = Date.now() % 100_000
    const random = lcg(seed)

    for (let kill = 0; kill < KILLS; kill += 1) {
      const daemon = startDaemon(configPath, env)
      // Kill once it is placing: after the first acceptances, plus a random part of a second.
      await waitFor("the daemon's first placements", () => daemon.accepted() >= 1 + Math.floor(random() * 4), 60_000)
      await new Promise((done) => setTimeout(done, Math.floor(random() * 800)))
      daemon.child.kill("SIGKILL")
      await daemon.exit
    }
    const last = startDaemon(configPath, env, ["--for", "8s"])
    expect(await last.exit, last.stderr()).toBe(0)

    const verdict = await verify(venue, join(dir, "svcbot.db"))
    console.log(`${report("kill -9 of svcbot run", verdict)}; kills ${KILLS}, seed ${seed}`)
    expect(verdict.venueOrders).toBeGreaterThan(0)
    expect(verdict.duplicates).toBe(0)
    expect(verdict.intentsWithTwoOrders).toBe(0)
    expect(verdict.fillMismatches).toBe(0)
    expect(verdict.ledgerFills).toBe(verdict.venueFills)
    expect(verdict.balanceMismatches).toEqual([])
  }, 300_000)
})
