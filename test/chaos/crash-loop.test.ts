/**
 * A crash loop of the real daemon under faults (crash-loop.ts): a kill every 3-10 s for about two
 * minutes while svc-venue drops the answers of accepted placements, answers 5xx at random and runs
 * its clock ahead; once the faults clear, the next start must have its strategies running within 10 s.
 */
import { afterAll, describe, expect, it } from "vitest"
import { killAll } from "../support/daemon.js"
import { crashLoop } from "./crash-loop.js"

afterAll(killAll)

describe("chaos: a crash loop of svcbot run under faults", () => {
  it("a kill every 3-10 s for about two minutes under dropped answers, 5xx and skew: the next start runs within 10 s of the faults clearing", async () => {
    const { readyAfterMs, startsRunning } = await crashLoop("crash loop", { kills: 18 })
    expect(startsRunning).toBeGreaterThan(0)
    expect(readyAfterMs).toBeLessThanOrEqual(10_000)
  }, 360_000)
})
