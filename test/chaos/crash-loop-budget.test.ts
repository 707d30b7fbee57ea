/**
 * A crash loop of the real daemon (crash-loop.ts) against a weight limit small enough that the
 * budget runs out, so restarts meet budget waits at every phase.
 */
import { afterAll, describe, expect, it } from "vitest"
import { killAll } from "../support/daemon.js"
import { crashLoop } from "./crash-loop.js"

afterAll(killAll)

describe("chaos: a crash loop of svcbot run against a small weight limit", () => {
  it("a crash loop against a weight limit the restarts run out of: budget waits at every phase, still nothing lost or left open", async () => {
    const { budgetWaits } = await crashLoop("crash loop, small budget", { kills: 6, limits: { weightPerMinute: 120 } })
    expect(budgetWaits).toBeGreaterThan(0)
  }, 360_000)
})
