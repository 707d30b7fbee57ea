/**
 * A candle CSV that grows at its end: the file `svcbot data download` and `svcbot data
 * record` write and `svcbot backtest --data` reads (`open_time_ms,open,high,low,close,volume`,
 * prices and volumes as the venue wrote them, digit for digit).
 *
 * Resuming: only lines that end in a line feed count. A process killed in the middle of a
 * write leaves a partial last line; opening the file cuts it off, so the candle it held is
 * fetched again and written whole. Rows are appended in open-time order, and a candle at or
 * before the last row is never written twice.
 */
import { closeSync, fstatSync, fsyncSync, ftruncateSync, openSync, readSync, statSync, writeSync } from "node:fs"
import { Data, Effect, type Scope } from "effect"
import type { Candle } from "../svc/Api.js"

export const CSV_HEADER = "open_time_ms,open,high,low,close,volume"

/** Bytes read from the end of a file to find its last rows: far more than a row, cheap for a file of millions. */
const TAIL_BYTES = 64 * 1024
const ROW = /^(\d{1,16}),((?:0|[1-9]\d*)(?:\.\d+)?),((?:0|[1-9]\d*)(?:\.\d+)?),((?:0|[1-9]\d*)(?:\.\d+)?),((?:0|[1-9]\d*)(?:\.\d+)?),((?:0|[1-9]\d*)(?:\.\d+)?)$/

/** The file cannot be continued: it is not a candle file of this layout, or not of this interval. */
export class CandleFileInvalid extends Data.TaggedError("CandleFileInvalid")<{ readonly path: string; readonly problem: string }> {
  override get message(): string {
    return `${this.path}: ${this.problem}`
  }
}

/** Missing candles between two rows: the venue had none for those intervals. */
export interface Gap {
  readonly afterMs: number
  readonly beforeMs: number
  readonly missing: number
}

const iso = (ms: number): string => new Date(ms).toISOString()

const rowOf = (candle: Candle): string =>
  `${candle.openTime},${candle.open.toFixed()},${candle.high.toFixed()},${candle.low.toFixed()},${candle.close.toFixed()},${candle.volume.toFixed()}\n`

const readAt = (fd: number, position: number, length: number): Buffer => {
  const buffer = Buffer.alloc(length)
  let read = 0
  while (read < length) {
    const n = readSync(fd, buffer, read, length - read, position + read)
    if (n === 0) break
    read += n
  }
  return buffer.subarray(0, read)
}

const LINE_FEED = 0x0a

const writeAll = (fd: number, text: string): void => {
  const bytes = Buffer.from(text, "utf8")
  let written = 0
  while (written < bytes.length) written += writeSync(fd, bytes, written, bytes.length - written)
}

export class CandleFile {
  /** Candles appended since the file was opened. */
  written = 0

  private constructor(
    private readonly fd: number,
    readonly path: string,
    private readonly stepMs: number,
    /** Open time of the first row, undefined while the file holds none. */
    public firstOpenTimeMs: number | undefined,
    /** Open time of the last complete row. */
    public lastOpenTimeMs: number | undefined,
    /** Bytes of a partial last line cut off when the file was opened (0 when it ended cleanly). */
    readonly droppedBytes: number
  ) {}

  /**
   * Opens (or creates) the file for appending candles `stepMs` apart, after cutting off a
   * partial last line. Refuses a file with another first line, or whose rows are not
   * `stepMs` apart: appending to it would make a file no backtest can read.
   */
  static open(path: string, stepMs: number): CandleFile {
    const invalid = (problem: string) => new CandleFileInvalid({ path, problem })
    const existing = (() => {
      try {
        return statSync(path)
      } catch {
        return undefined
      }
    })()
    if (existing?.isDirectory() === true) throw invalid("is a directory; give --out a file path such as data/btcusdt-1m.csv")
    let fd: number
    try {
      fd = openSync(path, "a+")
    } catch (cause) {
      throw invalid(`cannot be opened for writing (${(cause as NodeJS.ErrnoException).code ?? String(cause)}); check the directory exists and is writable`)
    }
    try {
      return CandleFile.resume(fd, path, stepMs, invalid)
    } catch (error) {
      closeSync(fd)
      throw error
    }
  }

  private static resume(fd: number, path: string, stepMs: number, invalid: (problem: string) => CandleFileInvalid): CandleFile {
    const size = fstatSync(fd).size
    const head = readAt(fd, 0, Math.min(size, TAIL_BYTES))
    const headerEnd = head.indexOf(LINE_FEED)
    if (headerEnd === -1) {
      // Empty, or only the start of the header: a run killed before its first row.
      if (!CSV_HEADER.startsWith(head.toString("utf8"))) throw invalid(`its first line is not the header ${CSV_HEADER}; give --out a new file, or move this one away`)
      ftruncateSync(fd, 0)
      writeAll(fd, `${CSV_HEADER}\n`)
      return new CandleFile(fd, path, stepMs, undefined, undefined, size)
    }
    const header = head.toString("utf8", 0, headerEnd)
    if (header !== CSV_HEADER) {
      throw invalid(`its first line is "${header.slice(0, 80)}", not the header ${CSV_HEADER}: it is not a file svcbot data wrote; give --out a new file, or move this one away`)
    }
    const tailStart = Math.max(0, size - TAIL_BYTES)
    const tail = tailStart === 0 ? head : readAt(fd, tailStart, size - tailStart)
    const lastNewline = tail.lastIndexOf(LINE_FEED)
    if (lastNewline === -1) throw invalid(`its last line is longer than ${TAIL_BYTES} bytes: it is not a candle row; move the file away and download again`)
    const completeEnd = tailStart + lastNewline + 1
    if (completeEnd < size) ftruncateSync(fd, completeEnd)
    const lines = tail.toString("utf8", 0, lastNewline).split("\n")
    // The header, or (in a tail read from mid-file) what may be the end of a longer line.
    lines.shift()
    const times = lines.map((line, index) => {
      const match = ROW.exec(line)
      if (match === null) throw invalid(`line "${line.slice(0, 80)}" near the end (${lines.length - index} from the last) is not a candle row; move the file away and download again`)
      return Number(match[1])
    })
    let smallestStep = Number.POSITIVE_INFINITY
    for (let i = 1; i < times.length; i++) {
      const step = times[i]! - times[i - 1]!
      if (step <= 0) throw invalid(`rows are out of order near the end (${iso(times[i]!)} after ${iso(times[i - 1]!)}); move the file away and download again`)
      smallestStep = Math.min(smallestStep, step)
    }
    if (times.length >= 2 && smallestStep !== stepMs) {
      throw invalid(`its candles are ${smallestStep / 60_000} minute(s) apart, not the ${stepMs / 60_000} of --interval; give the file's interval, or --out a new file for this one`)
    }
    const secondLineEnd = head.indexOf(LINE_FEED, headerEnd + 1)
    const firstRow = tailStart === 0 ? times[0] : Number(ROW.exec(head.toString("utf8", headerEnd + 1, secondLineEnd))?.[1])
    return new CandleFile(fd, path, stepMs, firstRow, times.at(-1), size - completeEnd)
  }

  /**
   * Appends the candles (oldest first) that open after the last row, in one write; the
   * rest are already in the file. Returns where candles are missing between rows.
   */
  append(candles: ReadonlyArray<Candle>): ReadonlyArray<Gap> {
    const gaps: Array<Gap> = []
    let text = ""
    let last = this.lastOpenTimeMs
    for (const candle of candles) {
      if (last !== undefined && candle.openTime <= last) continue
      if (last !== undefined) {
        const step = candle.openTime - last
        if (step % this.stepMs !== 0) {
          throw new CandleFileInvalid({ path: this.path, problem: `the venue answered a candle at ${iso(candle.openTime)}, off the ${this.stepMs / 60_000}-minute grid of the last row ${iso(last)}` })
        }
        if (step > this.stepMs) gaps.push({ afterMs: last, beforeMs: candle.openTime, missing: step / this.stepMs - 1 })
      }
      text += rowOf(candle)
      this.firstOpenTimeMs ??= candle.openTime
      last = candle.openTime
      this.written += 1
    }
    if (text !== "") writeAll(this.fd, text)
    this.lastOpenTimeMs = last
    return gaps
  }

  close(): void {
    fsyncSync(this.fd)
    closeSync(this.fd)
  }
}

/** The file, open for appending until the scope closes (synced and closed then). */
export const openCandleFile = (path: string, stepMs: number): Effect.Effect<CandleFile, CandleFileInvalid, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.try({
      try: () => CandleFile.open(path, stepMs),
      catch: (error) => (error instanceof CandleFileInvalid ? error : new CandleFileInvalid({ path, problem: String(error) }))
    }),
    (file) => Effect.sync(() => file.close())
  )
