/**
 * `docker compose up` as the README gives it: svc-venue and the paper bot from the image built
 * from this checkout, on their own named volumes. The bot must turn healthy and stay up without a
 * restart, trade, stop cleanly with nothing left open, continue the same ledger after a start, and
 * come back from `docker kill` (SIGKILL, no stop) with no duplicate order and every fill stored.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { setTimeout as delay } from "node:timers/promises"
import { pollUntil } from "../support/daemon.js"
import {
  buildImage,
  duplicateLevels,
  ledgerFillIds,
  openOrders,
  project,
  serviceEvents,
  unavailable,
  untilHealthy,
  venueFillIds,
  type Project
} from "./compose.js"

const figures: Record<string, number | string> = {}

describe.skipIf(unavailable !== undefined)(`docker compose up, the default profile${unavailable === undefined ? "" : ` (skipped: ${unavailable})`}`, () => {
  let p: Project

  beforeAll(async () => {
    figures["build seconds"] = await buildImage()
    p = await project("paper")
  }, 900_000)

  afterAll(async () => {
    console.log(`compose default profile: ${JSON.stringify(figures)}`)
    await p?.down()
  }, 120_000)

  it("starts venue and bot healthy, trades, and runs a minute without a restart", async () => {
    const started = Date.now()
    const up = await p.compose(["up", "-d"])
    expect(up.status, up.stderr).toBe(0)
    await untilHealthy(p, "bot", 180_000)
    // From `up` on: compose starts the bot once the venue is healthy.
    figures["seconds to healthy"] = (Date.now() - started) / 1000
    await untilHealthy(p, "venue", 10_000)
    const resting = await pollUntil(async () => {
      const orders = await openOrders(p)
      return orders.length > 0 ? orders : undefined
    }, 60_000, "orders at the venue", 1000)
    figures["orders resting"] = resting.length

    const watchUntil = Date.now() + 60_000
    while (Date.now() < watchUntil) {
      for (const service of ["venue", "bot"]) {
        const state = await p.inspect(service)
        expect(state.status, `${service} is running`).toBe("running")
        expect(state.restarts, `${service} restarts`).toBe(0)
      }
      await delay(5000)
    }
    figures.restarts = (await p.inspect("bot")).restarts + (await p.inspect("venue")).restarts
    expect((await p.inspect("bot")).health).toBe("healthy")
  }, 400_000)

  it("runs both as the unprivileged user, read-only, with no capability and no privilege escalation", async () => {
    for (const service of ["venue", "bot"]) {
      const state = await p.inspect(service)
      expect(state.user, service).toBe("1000:1000")
      expect(state.readOnlyRootfs, service).toBe(true)
      expect(state.capDrop, service).toEqual(["ALL"])
      expect(state.securityOpt, service).toContain("no-new-privileges:true")
      expect(state.binds.some((source) => source.endsWith("docker.sock")), service).toBe(false)
    }
  })

  it("`stop bot` exits 0 with nothing open at the venue; `start` continues the same ledger without duplicates", async () => {
    const stop = await p.compose(["stop", "bot"])
    expect(stop.status, stop.stderr).toBe(0)
    const stopped = await p.inspect("bot")
    expect(stopped.status).toBe("exited")
    expect(stopped.exitCode).toBe(0)
    const leftOpen = (await openOrders(p)).length
    figures["orders open after stop"] = leftOpen
    expect(leftOpen).toBe(0)
    const before = await ledgerFillIds(p, "bot")
    figures["fills before restart"] = before.length
    // The clean stop synced every fill: the ledger is the venue's record of the account.
    expect(before).toEqual(await venueFillIds(p))

    const start = await p.compose(["start", "bot"])
    expect(start.status, start.stderr).toBe(0)
    await untilHealthy(p, "bot", 180_000)
    await pollUntil(async () => ((await openOrders(p)).length > 0 ? true : undefined), 60_000, "orders after the start", 1000)
    expect(duplicateLevels(await openOrders(p)), "resting orders on one grid level").toBe(0)
    const after = await ledgerFillIds(p, "bot")
    figures["fills after restart"] = after.length
    expect(after).toEqual(expect.arrayContaining(before))
  }, 400_000)

  it("after `docker kill` (no stop at all) `up` reconciles: no duplicate order, every fill stored", async () => {
    await pollUntil(async () => ((await openOrders(p)).length >= 2 ? true : undefined), 60_000, "resting orders before the kill", 1000)
    const killed = await p.compose(["kill", "-s", "SIGKILL", "bot"])
    expect(killed.status, killed.stderr).toBe(0)
    expect((await openOrders(p)).length, "a killed bot cancels nothing").toBeGreaterThan(0)

    const up = await p.compose(["up", "-d"])
    expect(up.status, up.stderr).toBe(0)
    await untilHealthy(p, "bot", 180_000)
    const reconciled = (await serviceEvents(p, "bot")).filter((e) => e.event === "reconcile.completed" || e.event === "order.reconciled")
    expect(reconciled.length, "the start reconciled with the exchange").toBeGreaterThan(0)
    const duplicates = duplicateLevels(await openOrders(p))
    figures["duplicates after kill"] = duplicates
    expect(duplicates).toBe(0)

    const stop = await p.compose(["stop", "bot"])
    expect(stop.status, stop.stderr).toBe(0)
    expect((await p.inspect("bot")).exitCode).toBe(0)
    const ledger = await ledgerFillIds(p, "bot")
    const venue = await venueFillIds(p)
    figures["fills after kill"] = ledger.length
    figures["fills missing after kill"] = venue.filter((id) => !ledger.includes(id)).length
    expect(ledger).toEqual(venue)
  }, 400_000)
})
