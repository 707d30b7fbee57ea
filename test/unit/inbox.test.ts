/**
 * The instance's queue: a run of events longer than its room is queued in order, the rest
 * waiting for the handler to take what waits; a paused instance's market data is dropped as it is
 * given, its order updates and fills never; a timer that finds the queue full is skipped.
 */
import { Effect, Fiber } from "effect"
import { describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import { type HostEvent, Inbox, QUEUE_CAPACITY } from "../../src/strategy/Inbox.js"

const candle = (openTime: number): HostEvent => ({
  _tag: "Candle",
  event: { symbol: "BTCUSDT", interval: "1m", openTime, open: new Decimal(1), high: new Decimal(1), low: new Decimal(1), close: new Decimal(1), volume: new Decimal(1) }
})
const cancelled = (tag: string): HostEvent => ({ _tag: "OrderUpdate", event: { tag, kind: "cancelled" } as never })
const openTimes = (events: ReadonlyArray<HostEvent>) => events.map((e) => (e._tag === "Candle" ? e.event.openTime : e._tag))

describe("Inbox", () => {
  it("queues a run longer than its room in order: the rest waits until the handler takes what waits", () =>
    Effect.runPromise(
      Effect.gen(function* () {
        const inbox = new Inbox(() => false)
        const run = Array.from({ length: QUEUE_CAPACITY + 10 }, (_, i) => candle(i))
        const delivering = yield* Effect.fork(inbox.deliver(run))
        yield* Effect.yieldNow()
        expect(delivering.unsafePoll(), "waiting for room").toBeNull()
        const first = yield* inbox.takeAll
        expect(first).toHaveLength(QUEUE_CAPACITY)
        yield* Fiber.join(delivering)
        const rest = yield* inbox.takeAll
        expect(openTimes([...first, ...rest])).toEqual(run.map((_, i) => i))
      })
    ))

  it("drops a paused instance's market data and timers as they are given, never its order updates", () =>
    Effect.runPromise(
      Effect.gen(function* () {
        let paused = true
        const inbox = new Inbox(() => paused)
        yield* inbox.deliver([candle(1), cancelled("a"), candle(2)])
        inbox.offer({ _tag: "Timer", event: { name: "schedule", scheduledAt: 0 } })
        paused = false
        yield* inbox.deliver([candle(3)])
        expect(openTimes(yield* inbox.takeAll)).toEqual(["OrderUpdate", 3])
      })
    ))

  it("skips a timer that finds the queue full", () =>
    Effect.runPromise(
      Effect.gen(function* () {
        const inbox = new Inbox(() => false)
        yield* inbox.deliver(Array.from({ length: QUEUE_CAPACITY }, (_, i) => candle(i)))
        inbox.offer({ _tag: "Timer", event: { name: "schedule", scheduledAt: 0 } })
        const taken = yield* inbox.takeAll
        expect(taken).toHaveLength(QUEUE_CAPACITY)
        expect(taken.some((e) => e._tag === "Timer")).toBe(false)
      })
    ))
})
