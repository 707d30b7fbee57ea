/**
 * The price tape: where svc-venue's prices come from. Four sources:
 * - synthetic: a seeded random walk, deterministic per seed (same seed, same prices);
 * - replay of an OHLCV CSV (`open_time_ms,open,high,low,close,volume`), one candle per step;
 * - manual: the price moves only when told (admin route, tests);
 * - follow: another venue's public ticker and candles, polled by `Follow.ts` (paper
 *   trading on real prices); like a manual tape it never steps by itself.
 * Prices are whole numbers of ticks, so every price is an exact Decimal; the
 * randomness only decides how many ticks a step moves.
 */
import { compact, Decimal, fromString, quantize } from "../domain/Decimal.js"
import { bookAround, type Book, type BookShape } from "./Book.js"
import { candlePath, type VenueCandle } from "./PricePath.js"

export const MINUTE_MS = 60_000

/** mulberry32: a small, fast, seedable PRNG; good enough for a price walk, not for secrets. */
export const seededRandom = (seed: number): (() => number) => {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

export interface WalkOptions {
  readonly seed: number
  readonly startPrice: Decimal
  readonly tickSize: Decimal
  readonly stepSize: Decimal
  /** Standard deviation of one step, in basis points of the price. */
  readonly volatilityBps?: number
}

/** A seeded random walk on whole ticks. `next()` returns the next price. */
export class PriceWalk {
  private readonly random: () => number
  private ticks: number
  private readonly tickSize: Decimal
  private readonly stepSize: Decimal
  private readonly volatility: number

  constructor(options: WalkOptions) {
    this.random = seededRandom(options.seed)
    this.tickSize = options.tickSize
    this.stepSize = options.stepSize
    this.ticks = Math.max(1, quantize(options.startPrice, options.tickSize, "halfEven").div(options.tickSize).toNumber())
    this.volatility = (options.volatilityBps ?? 5) / 10_000
  }

  get price(): Decimal {
    return this.tickSize.mul(this.ticks)
  }

  /** The price now, in whole ticks. */
  get priceTicks(): number {
    return this.ticks
  }

  next(): Decimal {
    this.nextTicks()
    return this.price
  }

  /** Moves one step and returns the new price in ticks, without building a Decimal. */
  nextTicks(): number {
    // Box-Muller: one normal draw per step.
    const u = 1 - this.random()
    const v = this.random()
    const normal = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v)
    this.ticks = Math.max(1, this.ticks + Math.round(normal * this.volatility * this.ticks))
    return this.ticks
  }

  /** Traded base volume of one step: a whole number of steps, seeded like the price. */
  nextVolume(): Decimal {
    return this.stepSize.mul(this.nextVolumeSteps())
  }

  /** The next step's volume as a count of steps. */
  nextVolumeSteps(): number {
    return 1 + Math.floor(this.random() * 1000)
  }

  ticksToPrice(ticks: number): Decimal {
    return compact(this.tickSize.mul(ticks))
  }

  stepsToQty(steps: number): Decimal {
    return compact(this.stepSize.mul(steps))
  }
}

/** Price steps that make up one synthetic candle. */
export const STEPS_PER_CANDLE = 12

/**
 * N one-minute candles of the seeded walk, oldest first. Pure: the same options give
 * the same candles (the backtester's `--synthetic SEED:CANDLES`).
 */
export const syntheticCandles = (
  count: number,
  options: WalkOptions & { readonly startMs?: number; readonly intervalMs?: number }
): ReadonlyArray<VenueCandle> => {
  const walk = new PriceWalk(options)
  const intervalMs = options.intervalMs ?? MINUTE_MS
  const startMs = options.startMs ?? 0
  const candles = new Array<VenueCandle>(count)
  let open = walk.price
  for (let i = 0; i < count; i++) {
    const candle = walkCandle(walk, startMs + i * intervalMs, open)
    candles[i] = candle
    open = candle.close
  }
  return candles
}

/**
 * One candle of the walk, opening at `open` (the walk's price now). The steps are
 * counted in whole ticks and steps, and only the candle's own prices and volume
 * become Decimals, which are exactly the same values.
 */
const walkCandle = (walk: PriceWalk, openTimeMs: number, open: Decimal = walk.price): VenueCandle => {
  const openTicks = walk.priceTicks
  let highTicks = openTicks
  let lowTicks = openTicks
  let closeTicks = openTicks
  let volumeSteps = 0
  for (let s = 0; s < STEPS_PER_CANDLE; s++) {
    closeTicks = walk.nextTicks()
    if (closeTicks > highTicks) highTicks = closeTicks
    if (closeTicks < lowTicks) lowTicks = closeTicks
    volumeSteps += walk.nextVolumeSteps()
  }
  const close = closeTicks === openTicks ? open : walk.ticksToPrice(closeTicks)
  const priceAt = (ticks: number): Decimal => (ticks === openTicks ? open : ticks === closeTicks ? close : walk.ticksToPrice(ticks))
  return { openTimeMs, open, high: priceAt(highTicks), low: priceAt(lowTicks), close, volume: walk.stepsToQty(volumeSteps) }
}

export class InvalidCsv extends Error {
  override readonly name = "InvalidCsv"
}

/** Parses `open_time_ms,open,high,low,close,volume` lines (a header line is allowed), oldest first. */
export const parseOhlcvCsv = (text: string): ReadonlyArray<VenueCandle> => {
  const candles: Array<VenueCandle> = []
  const lines = text.split(/\r?\n/)
  lines.forEach((raw, index) => {
    const line = raw.trim()
    if (line === "" || (index === 0 && /^[a-z_]/i.test(line))) return
    const cells = line.split(",").map((c) => c.trim())
    if (cells.length !== 6) throw new InvalidCsv(`line ${index + 1}: expected 6 columns open_time_ms,open,high,low,close,volume, found ${cells.length}`)
    const [time, open, high, low, close, volume] = cells as [string, string, string, string, string, string]
    if (!/^\d+$/.test(time)) throw new InvalidCsv(`line ${index + 1}: open_time_ms must be an integer count of milliseconds`)
    try {
      const candle = {
        openTimeMs: Number(time),
        open: compact(fromString(open, "open")),
        high: compact(fromString(high, "high")),
        low: compact(fromString(low, "low")),
        close: compact(fromString(close, "close")),
        volume: compact(fromString(volume, "volume"))
      }
      if (candle.high.lt(Decimal.max(candle.open, candle.close)) || candle.low.gt(Decimal.min(candle.open, candle.close))) {
        throw new InvalidCsv(`line ${index + 1}: high and low must enclose open and close`)
      }
      candles.push(candle)
    } catch (cause) {
      if (cause instanceof InvalidCsv) throw cause
      throw new InvalidCsv(`line ${index + 1}: ${cause instanceof Error ? cause.message : String(cause)}`)
    }
  })
  return candles
}

/** Collects prices into fixed one-minute candles on the tape's clock. */
export class CandleRecorder {
  private readonly closed: Array<VenueCandle> = []
  private current: { openTimeMs: number; open: Decimal; high: Decimal; low: Decimal; close: Decimal; volume: Decimal } | undefined

  constructor(private readonly maxCandles = 10_000) {}

  record(price: Decimal, volume: Decimal, nowMs: number): void {
    const openTimeMs = Math.floor(nowMs / MINUTE_MS) * MINUTE_MS
    const current = this.current
    if (current !== undefined && current.openTimeMs === openTimeMs) {
      if (price.gt(current.high)) current.high = price
      if (price.lt(current.low)) current.low = price
      current.close = price
      current.volume = current.volume.add(volume)
      return
    }
    if (current !== undefined && openTimeMs > current.openTimeMs) this.push({ ...current })
    if (current === undefined || openTimeMs > current.openTimeMs) {
      this.current = { openTimeMs, open: price, high: price, low: price, close: price, volume }
    }
  }

  /**
   * Puts a candle of a followed venue in place of the one recorded here from its polled
   * prices for the same minute, or in its place in time. `forming`: the followed venue's
   * candle is still open; it becomes the current one and takes the prices recorded next.
   * The followed candle wins because it saw every trade, the polls only some of them.
   */
  adopt(candle: VenueCandle, forming: boolean): void {
    const current = this.current
    if (current !== undefined && candle.openTimeMs >= current.openTimeMs) {
      if (candle.openTimeMs > current.openTimeMs) this.push({ ...current })
      this.current = undefined
    }
    if (forming && this.current === undefined) {
      const last = this.closed[this.closed.length - 1]
      if (last === undefined || candle.openTimeMs > last.openTimeMs) {
        this.current = { ...candle }
        return
      }
    }
    let at = this.closed.length
    while (at > 0 && this.closed[at - 1]!.openTimeMs > candle.openTimeMs) at -= 1
    if (at > 0 && this.closed[at - 1]!.openTimeMs === candle.openTimeMs) this.closed[at - 1] = candle
    else this.closed.splice(at, 0, candle)
    if (this.closed.length > this.maxCandles) this.closed.splice(0, this.closed.length - this.maxCandles)
  }

  /** Appends a finished candle (history or replay). */
  push(candle: VenueCandle): void {
    const last = this.closed[this.closed.length - 1]
    if (last !== undefined && candle.openTimeMs <= last.openTimeMs) return
    this.closed.push(candle)
    if (this.closed.length > this.maxCandles) this.closed.splice(0, this.closed.length - this.maxCandles)
  }

  /** Candles of `intervalMs` (a multiple of one minute), oldest first, the last `limit` that open before `beforeMs`. */
  candles(intervalMs: number, limit: number, beforeMs?: number): ReadonlyArray<VenueCandle> {
    const minutes = this.current === undefined ? this.closed : [...this.closed, { ...this.current }]
    const merged: Array<VenueCandle> = []
    for (const c of minutes) {
      const openTimeMs = Math.floor(c.openTimeMs / intervalMs) * intervalMs
      const last = merged[merged.length - 1]
      if (last !== undefined && last.openTimeMs === openTimeMs) {
        merged[merged.length - 1] = {
          openTimeMs,
          open: last.open,
          high: Decimal.max(last.high, c.high),
          low: Decimal.min(last.low, c.low),
          close: c.close,
          volume: last.volume.add(c.volume)
        }
      } else {
        merged.push({ ...c, openTimeMs })
      }
    }
    const eligible = beforeMs === undefined ? merged : merged.filter((c) => c.openTimeMs < beforeMs)
    return eligible.slice(Math.max(0, eligible.length - limit))
  }
}

export type TapeSource =
  | { readonly kind: "synthetic"; readonly seed: number; readonly volatilityBps?: number }
  | { readonly kind: "csv"; readonly candles: ReadonlyArray<VenueCandle> }
  | { readonly kind: "manual" }
  | FollowSource

/** Prices of another venue: see `Follow.ts`. */
export interface FollowSource {
  readonly kind: "follow"
  /** The followed venue's base URL (scheme, host, port, any prefix before `/api`). */
  readonly baseUrl: string
  /** Milliseconds between polls of its ticker (default 1000). */
  readonly pollMs?: number
  /** Length of the followed venue's weight window: a minute per the Dialect; shorter only in tests. */
  readonly weightWindowMs?: number
}

/** Minutes of synthetic history a tape starts with, so indicators have data at once. */
export const HISTORY_CANDLES = 240

/** Spreads a symbol over the seed so that pairs sharing a seed still walk apart. */
const symbolSeed = (seed: number, symbol: string): number => {
  let h = seed >>> 0
  for (let i = 0; i < symbol.length; i++) h = Math.imul(h ^ symbol.charCodeAt(i), 0x01000193) >>> 0
  return h
}

/** The tape of one pair: its current price, its candles and its synthetic book. */
export class Tape {
  readonly recorder = new CandleRecorder()
  private walk: PriceWalk | undefined
  private replayAt = 0
  private current: Decimal

  constructor(
    readonly symbol: string,
    private readonly shape: BookShape,
    startPrice: Decimal,
    private readonly source: TapeSource,
    startMs: number
  ) {
    this.current = startPrice
    if (source.kind === "synthetic") {
      const walkOptions = { seed: symbolSeed(source.seed, symbol), startPrice, tickSize: shape.tickSize, stepSize: shape.stepSize, ...(source.volatilityBps === undefined ? {} : { volatilityBps: source.volatilityBps }) }
      const historyStart = Math.floor(startMs / MINUTE_MS) * MINUTE_MS - HISTORY_CANDLES * MINUTE_MS
      const walk = new PriceWalk(walkOptions)
      for (let i = 0; i < HISTORY_CANDLES; i++) this.recorder.push(walkCandle(walk, historyStart + i * MINUTE_MS))
      this.walk = walk
      this.current = walk.price
    } else if (source.kind === "csv") {
      const first = source.candles[0]
      if (first !== undefined) this.current = first.open
    }
  }

  get price(): Decimal {
    return this.current
  }

  /**
   * One step of the tape: the prices it passes through (one for the walk, a candle's
   * path for a replay, none for a manual tape or a finished replay).
   */
  step(nowMs: number): ReadonlyArray<Decimal> {
    if (this.walk !== undefined) {
      const price = this.walk.next()
      this.current = price
      this.recorder.record(price, this.walk.nextVolume(), nowMs)
      return [price]
    }
    if (this.source.kind === "csv") {
      const candle = this.source.candles[this.replayAt]
      if (candle === undefined) return []
      this.replayAt += 1
      this.recorder.push(candle)
      this.current = candle.close
      return candlePath(candle)
    }
    return []
  }

  /** Moves the price to `price` (admin route); recorded like a traded price with no volume. */
  set(price: Decimal, nowMs: number): void {
    this.current = price
    this.recorder.record(price, new Decimal(0), nowMs)
  }

  depth(levels: number): Book {
    return bookAround(this.shape, this.current, levels)
  }
}
