/**
 * The send path under a batch of many placements: the senders take marked placements from a
 * queue and the answers are recorded in groups, yet every placement is still marked before it
 * is sent, sent once, and answered once in the journal.
 */
import { Effect } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { Engine } from "../../src/engine/Engine.js"
import { OrderJournal } from "../../src/store/OrderJournal.js"
import { query } from "../support/daemon.js"
import { engineOnVenue, eventually, restingBids } from "./engine-harness.js"

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

// Room for a batch of placements at once: the default key allows 50 orders per 10 s.
const setup = () =>
  engineOnVenue(cleanups, { venue: { settleMs: 0, limits: { ordersPer10s: 1000, weightPerMinute: 100_000 } }, price: "60000" })

describe("engine send path", () => {
  it("sends each placement of a large batch once, after it is marked, and records one answer for each", async () => {
    const { venue, engine, db } = await setup()
    const count = 120
    const results = await engine.run(Effect.flatMap(Engine, (e) => e.submit("s-many", restingBids("bid", count))))
    expect(results.every((r) => r._tag === "Approved")).toBe(true)

    const answered = await engine.run(
      eventually(
        Effect.map(Effect.flatMap(OrderJournal, (j) => j.forStrategy("s-many")), (rows) =>
          rows.length === count && rows.every((o) => o.clientOrderId !== null) ? rows : undefined
        ),
        "every placement to be answered"
      )
    )
    const onVenue = ((await venue.admin("GET", `/_venue/orders?uid=${venue.uid}`)).orders as Array<{ clientOrderId: string }>).map((o) => o.clientOrderId)
    expect(onVenue).toHaveLength(count)
    expect(new Set(onVenue)).toEqual(new Set(answered.map((o) => o.clientOrderId)))

    // Every order went intent -> submitting -> accepted, each step once; the tracker may have moved it on since.
    const steps = query<{ order_id: number; path: string }>(
      db.path,
      `SELECT order_id, group_concat(COALESCE(from_state, '') || '>' || to_state, ' ') AS path
       FROM (SELECT * FROM order_events ORDER BY event_id) GROUP BY order_id`
    )
    expect(steps).toHaveLength(count)
    for (const { path } of steps) expect(path).toMatch(/^>intent intent>submitting submitting>accepted( |$)/)
  })

  it("keeps placements stopped when a placement sent before the stop is accepted during it", async () => {
    const { engine } = await setup()
    const sent = await engine.run(Effect.flatMap(Engine, (e) => e.submit("s-stop", restingBids("before", 40))))
    expect(sent.every((r) => r._tag === "Approved")).toBe(true)
    // The stop blocks placements first, then waits for the answers of what was already sent.
    await engine.run(Effect.flatMap(Engine, (e) => e.stop))
    const accepted = await engine.run(Effect.map(Effect.flatMap(OrderJournal, (j) => j.forStrategy("s-stop")), (rows) => rows.filter((o) => o.state !== "intent" && o.state !== "submitting")))
    expect(accepted).toHaveLength(40)

    const [after] = await engine.run(Effect.flatMap(Engine, (e) => e.submit("s-stop", restingBids("after", 1))))
    expect(after).toMatchObject({ _tag: "Refused", reason: "placements-blocked" })
  })
})
