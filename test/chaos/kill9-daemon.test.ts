/**
 * kill -9 of the real daemon: `svcbot run` trades against a svc-venue that loses
 * the answer to 30% of accepted placements, and is killed with SIGKILL at random
 * points after it has started placing, then restarted on the same database. A
 * last run stops cleanly (cancel on stop, final fill sync). Then the venue's own
 * order list must hold at most one order per journaled intent and none the
 * journal does not know, the ledger must equal the venue's fills row for row, and
 * the balances must agree.
 */
import { afterEach, describe, expect, it } from "vitest"
import { chaosSeed, seededRandom } from "../support/seed.js"
import { killAll, paperConfig, pollUntil, svcbot } from "../support/daemon.js"
import { startVenue } from "../support/venue.js"
import { CHAOS_STRATEGIES, expectNothingLostOrDuplicated, report, verify } from "./verify.js"

const KILLS = 3

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  killAll()
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const accepted = (lines: ReadonlyArray<string>): number => lines.filter((line) => line.includes('"order.accepted"')).length

describe("chaos: kill -9 of svcbot run", () => {
  it("random SIGKILLs and restarts of the daemon lose nothing and duplicate nothing", async () => {
    const venue = await startVenue({ tape: { kind: "synthetic", seed: 7 }, tickMs: 200, faults: { dropAcceptedRatio: 0.3, seed: 5 } })
    cleanups.push(() => venue.close())
    const { configPath, dbPath } = paperConfig("kill9", venue.url, { engine: { cancelOnStop: true, reconcileIntervalMs: 2000 }, strategies: CHAOS_STRATEGIES })
    const env = { SVC_API_KEY: venue.keyId, SVC_API_SECRET: venue.secret }
    const seed = chaosSeed()
    const random = seededRandom(seed)

    for (let kill = 0; kill < KILLS; kill += 1) {
      const daemon = svcbot(["run", "--config", configPath], env)
      // Kill once it is placing: after the first acceptances, plus a random part of a second.
      const wanted = 1 + Math.floor(random() * 4)
      await pollUntil(async () => (accepted(daemon.lines) >= wanted ? true : undefined), 60_000, "the daemon's first placements", 10)
      await new Promise((done) => setTimeout(done, Math.floor(random() * 800)))
      daemon.child.kill("SIGKILL")
      await daemon.exit
    }
    const last = svcbot(["run", "--config", configPath, "--for", "8s"], env)
    expect(await last.exit, last.stderr.join("")).toBe(0)

    const verdict = await verify(venue, dbPath)
    console.log(`${report("kill -9 of svcbot run", verdict)}; kills ${KILLS}, seed ${seed}`)
    expect(verdict.venueOrders).toBeGreaterThan(0)
    expectNothingLostOrDuplicated(verdict)
    // Every intent has an outcome: none is left unknown when the last run stops.
    expect(verdict.placed + verdict.refused + verdict.notPlaced + verdict.riskRefused).toBe(verdict.intents)
  }, 300_000)
})
