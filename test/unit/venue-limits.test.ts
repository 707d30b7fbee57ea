/**
 * The venue's budgets in-process: the replay cache is bounded by the largest receive
 * window, weight windows are fixed, and the failed-auth block extends on each failure.
 */
import { describe, expect, it } from "vitest"
import { AuthGuard, RateLimits, ReplayCache } from "../../src/venue/Limits.js"
import { RECV_WINDOW_MAX_MS } from "../../src/svc/Dialect.js"

describe("ReplayCache", () => {
  it("refuses a signature seen before and forgets signatures older than the largest receive window", () => {
    const cache = new ReplayCache(RECV_WINDOW_MAX_MS)
    const t0 = 1_000_000
    for (let i = 0; i < 1000; i++) expect(cache.remember(`sig-${i}`, t0, t0)).toBe(true)
    expect(cache.remember("sig-1", t0, t0 + 10)).toBe(false)
    expect(cache.size).toBe(1000)
    // Past the horizon every old signature is gone: memory is bounded by one window of traffic.
    expect(cache.remember("fresh", t0 + RECV_WINDOW_MAX_MS + 2000, t0 + RECV_WINDOW_MAX_MS + 2000)).toBe(true)
    expect(cache.size).toBe(1)
  })
})

describe("RateLimits", () => {
  it("charges weight in fixed windows and refuses without charging", () => {
    const limits = new RateLimits({ weightPerMinute: 5, ordersPer10s: 2, ordersPerDay: 100 }, 60_000)
    expect(limits.charge("k", 5, false, false, 59_000)).toBeUndefined()
    expect(limits.charge("k", 1, false, false, 59_500)).toEqual({ bucket: "weight-1m", retryAfterSeconds: 1 })
    expect(limits.report("k", 59_900).usedWeight).toBe(5)
    expect(limits.charge("k", 1, false, false, 60_000)).toBeUndefined()
    expect(limits.report("k", 60_000).usedWeight).toBe(1)
    // Cancels count but pass.
    expect(limits.charge("k", 100, false, true, 60_001)).toBeUndefined()
    expect(limits.report("k", 60_001).usedWeight).toBe(101)
  })
})

describe("AuthGuard", () => {
  it("blocks after N failures and each failure during the block extends it", () => {
    const guard = new AuthGuard(3, 180)
    const who = ["ip:127.0.0.1"]
    guard.fail(who, 0)
    guard.fail(who, 1000)
    expect(guard.blockedFor(who, 1000)).toBeUndefined()
    guard.fail(who, 2000)
    expect(guard.blockedFor(who, 2000)).toBe(180)
    expect(guard.blockedFor(who, 102_000)).toBe(80)
    guard.fail(who, 102_000)
    expect(guard.blockedFor(who, 102_000)).toBe(180)
    expect(guard.blockedFor(who, 282_001)).toBeUndefined()
    expect(guard.blockedFor(["ip:10.0.0.1"], 2000)).toBeUndefined()
  })
})
