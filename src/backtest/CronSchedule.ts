/**
 * An instance's cron `schedule` as the backtester asks it, once for every minute of the tape:
 * the same answers as node-cron's own matching in UTC (what the daemon's timer fires on), at the
 * cost of a few array reads. node-cron reads each date it is asked about through `Intl` (tens of
 * microseconds a date), which made a dca run on minute candles spend most of its time matching.
 *
 * node-cron matches a date when its second, minute and hour are in their fields AND its calendar
 * day matches the day-of-month, month and day-of-week fields (with their `L`, `W` and `#` forms).
 * The time of day is read from tables built from node-cron's own parse of the expression; the
 * calendar day is asked of node-cron itself, once per day, at a time of day the expression
 * matches, so every day form means exactly what it means to node-cron.
 */
import cron, { type ScheduledTask } from "node-cron"

const DAY_SECONDS = 86_400

/** Which values of a time field (0-59 or 0-23) the expression allows; node-cron compares them as numbers. */
const allowed = (values: ReadonlyArray<number | string>, size: number): Uint8Array => {
  const table = new Uint8Array(size)
  for (const value of values) if (typeof value === "number" && value >= 0 && value < size) table[value] = 1
  return table
}

export class CronSchedule {
  /** The UTC day (days since the epoch) `dayMatches` answers for. */
  private day = Number.NaN
  private dayMatches = false

  private constructor(
    private readonly matcher: ScheduledTask,
    private readonly seconds: Uint8Array,
    private readonly minutes: Uint8Array,
    private readonly hours: Uint8Array,
    /** Milliseconds into a day at which every time field matches: where a day is asked of node-cron. */
    private readonly probeMs: number
  ) {}

  /** The schedule of a cron expression, or undefined when node-cron does not accept it. */
  static of(expression: string): CronSchedule | undefined {
    if (!cron.validate(expression)) return undefined
    const fields = cron.parse(expression)
    const seconds = allowed(fields.second, 60)
    const minutes = allowed(fields.minute, 60)
    const hours = allowed(fields.hour, 24)
    const probeMs = ((hours.indexOf(1) * 60 + minutes.indexOf(1)) * 60 + seconds.indexOf(1)) * 1000
    const matcher = cron.createTask(expression, () => undefined, { timezone: "UTC" })
    // Only its matching is used, and node-cron keeps every task it creates in a registry until it is destroyed.
    void matcher.destroy()
    return new CronSchedule(matcher, seconds, minutes, hours, probeMs)
  }

  /** Whether the schedule fires at `timeMs` (its milliseconds are ignored, as node-cron ignores them). */
  matches(timeMs: number): boolean {
    const secondsSinceEpoch = Math.floor(timeMs / 1000)
    const day = Math.floor(secondsSinceEpoch / DAY_SECONDS)
    const secondOfDay = secondsSinceEpoch - day * DAY_SECONDS
    if (this.seconds[secondOfDay % 60] === 0 || this.minutes[Math.floor(secondOfDay / 60) % 60] === 0 || this.hours[Math.floor(secondOfDay / 3600)] === 0) {
      return false
    }
    if (day !== this.day) {
      this.day = day
      this.dayMatches = this.matcher.match(new Date(day * DAY_SECONDS * 1000 + this.probeMs))
    }
    return this.dayMatches
  }
}
