/**
 * The backtester's schedule matching (CronSchedule) must fire on exactly the minutes node-cron
 * fires on in UTC, the daemon's timer: each expression is asked about thousands of times (runs
 * of consecutive minutes over month ends, a leap day and a year end, every day of two years at a
 * few times of day, seeded random minutes and seconds over ten years), and every answer is
 * compared with node-cron's own.
 */
import fc from "fast-check"
import cron from "node-cron"
import { describe, expect, it } from "vitest"
import { CronSchedule } from "../../src/backtest/CronSchedule.js"

const MINUTE = 60_000

/** The schedules config/ and the docs ship, then steps, ranges, lists, names, the day forms and seconds. */
const EXPRESSIONS = [
  "* * * * *",
  "0 * * * *",
  "0 */4 * * *",
  "30 * * * *",
  "*/15 9-17 * * 1-5",
  "30 2 1,15 * *",
  "0 0 * * 0",
  "0 0 * * 7",
  "5,35 */2 * jan,feb mon-fri",
  "0-10/3 * * * *",
  "*/7 22-2 * * *",
  "0,30 8-18/2 1-10 3-5 *",
  "0 0 1 * 1",
  "0 0 29 2 *",
  "0 12 L * *",
  "0 9 15W * *",
  "0 9 LW * *",
  "0 9 L-2 * *",
  "0 9 * * 5L",
  "0 9 * * 1#2",
  "0 0 9 ? * MON",
  "@hourly",
  "@daily",
  "@weekly",
  "@monthly",
  "30 * * * * *",
  "*/20 0 9 * * *"
]

/** Consecutive minutes from each of these: month ends, the leap day of 2024, a year end. */
const RUNS_FROM = [Date.UTC(2024, 0, 31, 20), Date.UTC(2024, 1, 28, 22), Date.UTC(2024, 11, 31, 21), Date.UTC(2025, 5, 30, 23)]
const RUN_MINUTES = 600

const nodeCron = (expression: string) => {
  const task = cron.createTask(expression, () => undefined, { timezone: "UTC" })
  void task.destroy()
  return (timeMs: number) => task.match(new Date(timeMs))
}

/** Every day of 2024 and 2025 at these times of day, so the schedules of rare days fire too (at 12:00:30 in January only). */
const DAILY_AT = [0, 2 * 3_600_000 + 30 * MINUTE, 9 * 3_600_000, 12 * 3_600_000]

const times = (): ReadonlyArray<number> => {
  const out: Array<number> = []
  for (const from of RUNS_FROM) for (let i = 0; i < RUN_MINUTES; i++) out.push(from + i * MINUTE)
  for (let day = Date.UTC(2024, 0, 1); day < Date.UTC(2026, 0, 1); day += 86_400_000) for (const at of DAILY_AT) out.push(day + at)
  for (let day = Date.UTC(2024, 0, 1); day < Date.UTC(2024, 1, 1); day += 86_400_000) out.push(day + 12 * 3_600_000 + 30_000)
  // Random minutes over ten years, and some off the minute (a six-field expression matches seconds).
  const random = fc.sample(fc.integer({ min: Date.UTC(2020, 0, 1) / MINUTE, max: Date.UTC(2030, 0, 1) / MINUTE }), { numRuns: 1500, seed: 42 })
  for (const minute of random) out.push(minute * MINUTE)
  const offMinute = fc.sample(fc.tuple(fc.integer({ min: Date.UTC(2020, 0, 1) / MINUTE, max: Date.UTC(2030, 0, 1) / MINUTE }), fc.integer({ min: 0, max: 59_999 })), { numRuns: 500, seed: 7 })
  for (const [minute, ms] of offMinute) out.push(minute * MINUTE + ms)
  return out
}

describe("CronSchedule", () => {
  const asked = times()

  for (const expression of EXPRESSIONS) {
    it(`fires when node-cron fires: ${expression}`, () => {
      const ours = CronSchedule.of(expression)!
      const theirs = nodeCron(expression)
      const differ = asked.filter((t) => ours.matches(t) !== theirs(t)).map((t) => new Date(t).toISOString())
      expect(differ).toEqual([])
      // The comparison means something only if the expression fires on some of the times asked, and not on all.
      const fired = asked.filter((t) => theirs(t)).length
      expect(fired).toBeGreaterThan(0)
      if (expression !== "* * * * *") expect(fired).toBeLessThan(asked.length)
    })
  }

  it("answers for days asked out of order, as node-cron does", () => {
    const ours = CronSchedule.of("0 9 * * 1-5")!
    const theirs = nodeCron("0 9 * * 1-5")
    const monday = Date.UTC(2024, 0, 1, 9)
    const saturday = Date.UTC(2024, 0, 6, 9)
    for (const t of [monday, saturday, monday, saturday + 7 * 86_400_000, monday - 86_400_000]) expect(ours.matches(t)).toBe(theirs(t))
  })

  it("refuses what node-cron refuses", () => {
    expect(CronSchedule.of("61 * * * *")).toBeUndefined()
    expect(CronSchedule.of("* * *")).toBeUndefined()
    expect(CronSchedule.of("every minute")).toBeUndefined()
  })
})
