/**
 * A cancel cut short before the venue took it (the stop ends the tracker round that was
 * still retrying it after server errors): the engine must not take it for sent. The stop's
 * own cancel of the order then goes out and reaches the venue, instead of being skipped
 * while the order rests.
 * Against a real svc-venue over loopback and a real SQLite journal.
 */
import { Effect, Fiber } from "effect"
import { afterEach, describe, expect, it, vi } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import { Engine } from "../../src/engine/Engine.js"
import { Cancels } from "../../src/engine/Cancels.js"
import { OrderJournal } from "../../src/store/OrderJournal.js"
import { engineOnVenue, eventually } from "./engine-harness.js"

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** Longer than the test: the tracker stays out of the way, so only the cancels sent here go out. */
const NEVER_MS = 120_000
/** How long the venue takes to answer while it fails. */
const ANSWER_MS = 1000
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe("a cancel interrupted while the client retried it", () => {
  it("is not taken for sent: the next cancel of the order goes out and cancels it", async () => {
    const { venue, engine } = await engineOnVenue(cleanups, {
      engine: { tracker: { restingPollMs: NEVER_MS }, fillSync: { intervalMs: NEVER_MS }, reconcile: { intervalMs: NEVER_MS } }
    })
    const latest = Effect.flatMap(OrderJournal, (j) => j.latestByTag("mm", "bid"))
    await engine.run(
      Effect.flatMap(Engine, (e) =>
        e.submit("mm", [{ type: "limit", tag: "bid", symbol: "BTCUSDT", side: "buy", baseQty: new Decimal("0.01"), limitPrice: new Decimal("50000") }])
      )
    )
    const resting = await engine.run(eventually(Effect.map(latest, (o) => (o?.state === "resting" ? o : undefined)), "the bid to rest"))

    const cancels = vi.spyOn(venue.venue.engine, "cancel")
    cleanups.push(() => cancels.mockRestore())
    const marked = (await engine.runtime.runPromise(Effect.flatMap(Cancels, (x) => x.mark(resting))))!
    expect(marked.cancelRequested).toBe(true)
    // Every request is answered 503 after a second: the client retries the cancel, and the fiber
    // sending it is interrupted meanwhile, as the stop does to a tracker round.
    await venue.admin("POST", "/_venue/faults", { latencyMs: ANSWER_MS, serverErrorRatio: 1, serverErrorStatus: 503 })
    const first = engine.runtime.runFork(Effect.flatMap(Cancels, (x) => x.send(marked)))
    await sleep(ANSWER_MS * 1.5)
    expect(first.unsafePoll()).toBeNull()
    await engine.runtime.runPromise(Fiber.interrupt(first))
    // An attempt the venue still holds is answered 503 like the others before the faults clear.
    await sleep(ANSWER_MS * 1.5)
    await venue.admin("POST", "/_venue/faults", {})
    expect(cancels).not.toHaveBeenCalled()

    await engine.runtime.runPromise(Effect.flatMap(Cancels, (x) => x.send(marked)))
    expect(cancels.mock.results.map((r) => r.value)).toEqual([expect.objectContaining({ ok: true })])
    const onVenue = (await venue.admin("GET", `/_venue/orders?uid=${venue.uid}`)).orders as Array<Record<string, unknown>>
    expect(onVenue.find((o) => o.clientOrderId === resting.clientOrderId)?.kind).toBe("cancelled")
  }, 30_000)
})
