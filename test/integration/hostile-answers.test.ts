/**
 * Hostile and malformed answers from a real svc-venue, rewritten on their way by a proxy
 * over loopback: a fill whose price is 1e900000000, one with a negative baseQty, one without
 * its fillId; an order, a wallet and a ticker with amounts that must not be stored. Each is
 * refused whole (a DecodeError naming the endpoint and the field, one warn line), the process
 * stays up with its memory flat, nothing malformed reaches the real SQLite file, fill sync
 * keeps its cursor, and once the proxy stops rewriting the ledger equals the venue's fills.
 * An answer that is not UTF-8 or nests thousands of levels deep is refused before it is read.
 */
import Sqlite from "better-sqlite3"
import { Effect, Either, Layer, ManagedRuntime } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { fromString } from "../../src/domain/Decimal.js"
import { EngineBus } from "../../src/engine/EngineBus.js"
import { FillSync } from "../../src/engine/FillSync.js"
import { EngineSettings, resolveSettings } from "../../src/engine/Settings.js"
import * as Logger from "../../src/log/Logger.js"
import { Database } from "../../src/store/Database.js"
import { FillLedger } from "../../src/store/FillLedger.js"
import { OrderJournal } from "../../src/store/OrderJournal.js"
import { MAX_ANSWER_DEPTH } from "../../src/svc/AnswerJson.js"
import { defaultDialect } from "../../src/svc/Dialect.js"
import { SvcClient } from "../../src/svc/SvcClient.js"
import { fundForFills, makeFills } from "../chaos/fixtures/fills.js"
import { type ProxiedAnswer, type Rewrite, startAnswerProxy } from "../support/proxy.js"
import { startVenue } from "../support/venue.js"
import { CapturedLog, clientLayer, tempDbPath } from "./engine-harness.js"

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const paths = defaultDialect.paths
const PAGE_LIMIT = 500
const MIB = 1024 * 1024

/** A JSON number token no JSON writer of ours would make: spliced into the text in place of this marker. */
const RAW_TOKEN = "__raw_token__"
const withToken = (value: unknown, token: string): string => JSON.stringify(value).replace(`"${RAW_TOKEN}"`, token)

type Row = Record<string, unknown>

/** How the proxy damages one row of a fills page, and the field the refusal must name. */
interface Damage {
  readonly name: string
  readonly field: string
  readonly apply: (row: Row) => string | undefined
}

const DAMAGES: ReadonlyArray<Damage> = [
  { name: "price 1e900000000", field: "price", apply: (row) => ((row.price = RAW_TOKEN), "1e900000000") },
  { name: "negative baseQty", field: "baseQty", apply: (row) => ((row.baseQty = `-${String(row.baseQty)}`), undefined) },
  { name: "missing fillId", field: "fillId", apply: (row) => (delete row.fillId, undefined) }
]

/** The row of a page that is damaged: in the middle, so that the rows before it are well formed. */
const DAMAGED_ROW = 7

let peakRss = 0
const sampleRss = () => {
  peakRss = Math.max(peakRss, process.memoryUsage.rss())
}

const startRig = async () => {
  const venue = await startVenue({ settleMs: 0 })
  cleanups.push(() => venue.close())
  fundForFills(venue.venue, venue.uid)
  // Three pages and then some, so that a pass reads a good page before the damaged one.
  makeFills(venue.venue, venue.uid, 3 * PAGE_LIMIT + 100)
  let damage: Damage | undefined
  /** Damages the second page of every pass (the first page that follows a cursor). */
  const rewrite = (answer: ProxiedAnswer): string | undefined => {
    sampleRss()
    if (damage === undefined || answer.status !== 200 || !answer.target.startsWith(paths.fills) || !answer.target.includes("before=")) return undefined
    const page = JSON.parse(answer.body) as { fills: Array<Row> }
    const token = damage.apply(page.fills[DAMAGED_ROW]!)
    return token === undefined ? JSON.stringify(page) : withToken(page, token)
  }
  const proxy = await startAnswerProxy(venue.url, rewrite)
  cleanups.push(() => proxy.close())
  const db = tempDbPath()
  cleanups.push(db.cleanup)
  const log = new CapturedLog()
  const runtime = ManagedRuntime.make(
    FillSync.Default.pipe(
      Layer.provideMerge(Layer.mergeAll(OrderJournal.Default, FillLedger.Default, EngineBus.Default)),
      Layer.provideMerge(Database.Default({ path: db.path })),
      Layer.provide(Layer.succeed(EngineSettings, resolveSettings({ dbPath: db.path, fillSync: { pageLimit: PAGE_LIMIT, maxPagesPerPass: 1000 } }))),
      Layer.provideMerge(clientLayer({ ...venue, url: proxy.url }, 5000)),
      Layer.provide(Logger.layer({ destination: log.stream }))
    )
  )
  cleanups.push(() => runtime.dispose())
  return { venue, proxy, db, log, runtime, setDamage: (next: Damage | undefined) => (damage = next) }
}

/** The fills table and the sync state as the real SQLite file holds them, read by a connection of its own. */
const readFile = (path: string) => {
  const sqlite = new Sqlite(path, { readonly: true, fileMustExist: true })
  try {
    return {
      fills: sqlite.prepare("SELECT fill_id, price, base_qty, quote_qty, fee, raw FROM fills").all() as Array<{ fill_id: string; price: string; base_qty: string; quote_qty: string; fee: string; raw: string }>,
      cursor: (sqlite.prepare("SELECT backfill_cursor FROM sync_state WHERE stream = 'fills'").get() as { backfill_cursor: string | null } | undefined)?.backfill_cursor ?? null
    }
  } finally {
    sqlite.close()
  }
}

/** Every stored row reads back within the bounds, with quantities and prices above zero and an id. */
const expectWellFormed = (rows: ReturnType<typeof readFile>["fills"]) => {
  for (const row of rows) {
    expect(row.fill_id).not.toBe("")
    for (const amount of [row.price, row.base_qty, row.quote_qty]) expect(fromString(amount).gt(0), `${row.fill_id}: ${amount}`).toBe(true)
    fromString(row.fee)
    expect(row.raw).not.toContain("1e900000000")
  }
}

type VenueFill = Record<string, string | number | null> & { readonly fillId: string }

const venueFillsOf = async (venue: Awaited<ReturnType<typeof startVenue>>): Promise<Array<VenueFill>> =>
  ((await venue.admin("GET", `/_venue/fills?uid=${venue.uid}`)).fills as Array<Record<string, string | number | null>>)
    .map((f): VenueFill => ({ ...f, fillId: String(f.fillId) }))
    .sort((a, b) => (a.fillId < b.fillId ? -1 : a.fillId > b.fillId ? 1 : 0))

describe("hostile answers", () => {
  it("a damaged fills page is refused whole, the cursor stays, nothing malformed is stored, and the ledger equals the venue once answers are good", async () => {
    const rig = await startRig()
    const baseline = process.memoryUsage.rss()
    peakRss = baseline
    let storedBefore = -1
    let cursorBefore: string | null = null
    for (const damage of DAMAGES) {
      rig.setDamage(damage)
      const linesBefore = rig.log.lines.length
      const outcome = await rig.runtime.runPromise(Effect.either(Effect.flatMap(FillSync, (sync) => sync.syncOnce)))
      sampleRss()
      expect(outcome, damage.name).toMatchObject({ left: { _tag: "DecodeError", endpoint: paths.fills, field: `fills[${DAMAGED_ROW}].${damage.field}` } })
      // One warn line names the endpoint and the field; nothing else is logged about it.
      const failed = rig.log.lines.slice(linesBefore).filter((line) => line.event === "request.failed")
      expect(failed, damage.name).toEqual([expect.objectContaining({ level: "warn", endpoint: paths.fills, error: "DecodeError", field: `fills[${DAMAGED_ROW}].${damage.field}` })])
      // The client holds the refusal, for health, until the endpoint answers readably.
      const refused = await rig.runtime.runPromise(Effect.flatMap(SvcClient, (client) => client.refusedAnswers))
      expect(refused).toEqual([expect.objectContaining({ _tag: "DecodeError", endpoint: paths.fills, field: `fills[${DAMAGED_ROW}].${damage.field}` })])
      // The first page of the pass was stored with the cursor it leads to; the damaged page was not, nor any of it.
      const file = readFile(rig.db.path)
      expect(file.fills.length, damage.name).toBe(PAGE_LIMIT)
      expect(file.cursor).not.toBeNull()
      if (storedBefore >= 0) {
        expect(file.fills.length).toBe(storedBefore)
        expect(file.cursor).toBe(cursorBefore)
      }
      storedBefore = file.fills.length
      cursorBefore = file.cursor
      expectWellFormed(file.fills)
      console.log(`hostile answers: ${damage.name} refused at fills[${DAMAGED_ROW}].${damage.field}; ledger holds ${file.fills.length} fills, cursor kept`)
    }
    expect(rig.proxy.rewritten.length).toBe(DAMAGES.length)

    rig.setDamage(undefined)
    const report = await rig.runtime.runPromise(Effect.flatMap(FillSync, (sync) => sync.syncAll))
    expect(report.interrupted).toBe(false)
    expect(await rig.runtime.runPromise(Effect.flatMap(SvcClient, (client) => client.refusedAnswers))).toEqual([])
    const file = readFile(rig.db.path)
    expectWellFormed(file.fills)
    expect(file.cursor).toBeNull()
    const venueFills = await venueFillsOf(rig.venue)
    const stored = await rig.runtime.runPromise(Effect.flatMap(FillLedger, (ledger) => ledger.all))
    expect(stored.length).toBe(venueFills.length)
    const byId = new Map(stored.map((fill) => [fill.fillId, fill]))
    for (const want of venueFills) {
      const fill = byId.get(want.fillId)
      expect(fill, want.fillId).toBeDefined()
      expect({ price: fill!.price.toFixed(), baseQty: fill!.baseQty.toFixed(), quoteQty: fill!.quoteQty.toFixed(), fee: fill!.fee.toFixed(), side: fill!.side, time: fill!.time }).toEqual({
        price: fromString(String(want.price)).toFixed(),
        baseQty: fromString(String(want.baseQty)).toFixed(),
        quoteQty: fromString(String(want.quoteQty)).toFixed(),
        fee: fromString(String(want.fee)).toFixed(),
        side: want.side,
        time: Number(want.time)
      })
    }
    sampleRss()
    console.log(
      `hostile answers: after the proxy stopped rewriting, ledger ${stored.length} fills = venue ${venueFills.length}; RSS ${(baseline / MIB).toFixed(1)} MB before, peak ${(peakRss / MIB).toFixed(1)} MB (+${((peakRss - baseline) / MIB).toFixed(1)} MB)`
    )
    expect(peakRss - baseline).toBeLessThan(256 * MIB)
  }, 120_000)

  it("an order status, open orders, a wallet and a ticker that must not be stored are refused naming the field, and read again once good", async () => {
    const venue = await startVenue({ settleMs: 0 })
    cleanups.push(() => venue.close())
    const placed = await venue.signed("POST", paths.limitOrder, { symbol: "BTCUSDT", side: "buy", baseQty: fromString("0.01"), limitPrice: fromString("1000") })
    expect(placed.status).toBe(202)
    const clientOrderId = String(placed.json.clientOrderId)
    let hostile = true
    /** Each endpoint's answer with one amount made hostile: the JSON number token or the string as the venue would write it. */
    const rewrite = (answer: ProxiedAnswer): string | undefined => {
      if (!hostile || answer.status !== 200) return undefined
      const path = answer.target.split("?")[0]
      const json = JSON.parse(answer.body) as Row & Array<Row>
      if (path === paths.orderStatus) return withToken({ ...json, filledBaseQty: RAW_TOKEN }, "1e900000000")
      if (path === paths.openOrders) return JSON.stringify(json.map((row) => ({ ...row, baseQty: "-0.001" })))
      if (path === paths.walletsSpot) return withToken(json.map((row, i) => (i === 0 ? { ...row, balance: RAW_TOKEN } : row)), "-5")
      if (path === paths.ticker) return JSON.stringify({ ...json, price: "NaN" })
      return undefined
    }
    const proxy = await startAnswerProxy(venue.url, rewrite)
    cleanups.push(() => proxy.close())
    const log = new CapturedLog()
    const runtime = ManagedRuntime.make(clientLayer({ ...venue, url: proxy.url }, 5000).pipe(Layer.provide(Logger.layer({ destination: log.stream }))))
    cleanups.push(() => runtime.dispose())
    const reads = Effect.flatMap(SvcClient, (client) =>
      Effect.all({
        status: Effect.either(client.orderStatus(clientOrderId)),
        open: Effect.either(client.openOrders()),
        wallet: Effect.either(client.spotWallet()),
        ticker: Effect.either(client.ticker("BTCUSDT")),
        refused: Effect.suspend(() => client.refusedAnswers)
      })
    )
    const refusedReads = await runtime.runPromise(reads)
    expect(refusedReads.status).toMatchObject({ left: { _tag: "DecodeError", endpoint: paths.orderStatus, field: "filledBaseQty" } })
    expect(refusedReads.open).toMatchObject({ left: { _tag: "DecodeError", endpoint: paths.openOrders, field: "[0].baseQty" } })
    expect(refusedReads.wallet).toMatchObject({ left: { _tag: "DecodeError", endpoint: paths.walletsSpot, field: "[0].balance" } })
    expect(refusedReads.ticker).toMatchObject({ left: { _tag: "DecodeError", endpoint: paths.ticker, field: "price" } })
    expect(refusedReads.refused.map((answer) => answer.endpoint).sort()).toEqual([paths.openOrders, paths.orderStatus, paths.ticker, paths.walletsSpot].sort())
    const warned = log.events("request.failed")
    expect(warned).toHaveLength(4)
    for (const line of warned) expect(line).toMatchObject({ level: "warn", error: "DecodeError", endpoint: expect.any(String), field: expect.any(String) })

    hostile = false
    const goodReads = await runtime.runPromise(reads)
    expect(Either.isRight(goodReads.status) && goodReads.status.right.filledBaseQty.isZero()).toBe(true)
    expect(Either.isRight(goodReads.open) && goodReads.open.right.map((order) => order.clientOrderId)).toEqual([clientOrderId])
    expect(Either.isRight(goodReads.wallet)).toBe(true)
    expect(Either.isRight(goodReads.ticker)).toBe(true)
    expect(goodReads.refused).toEqual([])
  }, 60_000)

  it("an answer that is not UTF-8, or nests thousands of levels deep, is refused whole: no id is read with replacement characters, no request is left hanging", async () => {
    const venue = await startVenue({ settleMs: 0 })
    cleanups.push(() => venue.close())
    /** A byte no UTF-8 text holds, put into the first clientOrderId of an answer; or a ticker's price nested this deep. */
    let damage: "utf8" | number | undefined = "utf8"
    const rewrite = (answer: ProxiedAnswer): Rewrite | undefined => {
      if (damage === undefined || answer.status >= 300) return undefined
      if (damage === "utf8") {
        const at = answer.body.indexOf('"co_') + 4
        return at < 4 ? undefined : { body: Buffer.concat([Buffer.from(answer.body.slice(0, at)), Buffer.from([0xff]), Buffer.from(answer.body.slice(at))]) }
      }
      return answer.target.startsWith(paths.ticker) ? { body: answer.body.replace(/"price":"[^"]*"/, `"price":${"[".repeat(damage)}${"]".repeat(damage)}`) } : undefined
    }
    const proxy = await startAnswerProxy(venue.url, rewrite)
    cleanups.push(() => proxy.close())
    const log = new CapturedLog()
    const runtime = ManagedRuntime.make(clientLayer({ ...venue, url: proxy.url }, 5000).pipe(Layer.provide(Logger.layer({ destination: log.stream }))))
    cleanups.push(() => runtime.dispose())
    const client = <A, E>(use: (client: SvcClient) => Effect.Effect<A, E>) => runtime.runPromise(Effect.either(Effect.flatMap(SvcClient, use)))

    // Read with U+FFFD in place of the byte, the id would be another order's, well formed and wrong.
    const placed = await client((c) => c.placeLimit({ symbol: "BTCUSDT", side: "buy", baseQty: fromString("0.01"), limitPrice: fromString("1000") }))
    expect(placed).toMatchObject({ left: { _tag: "PlacementOutcomeUnknown", reason: "unreadable-answer", detail: expect.stringContaining("not UTF-8") } })
    const [order] = (await venue.admin("GET", `/_venue/orders?uid=${venue.uid}`)).orders as Array<{ clientOrderId: string }>
    const status = await client((c) => c.orderStatus(order!.clientOrderId))
    expect(status).toMatchObject({ left: { _tag: "DecodeError", endpoint: paths.orderStatus, field: "", detail: "the answer is not UTF-8 text" } })

    // Just past the bound, through the few thousand levels where recursive readers run out of
    // stack (a request then never ended), and far beyond.
    const depths = [MAX_ANSWER_DEPTH + 1, ...Array.from({ length: 29 }, (_, i) => 1000 + 250 * i), 100_000]
    for (const depth of depths) {
      damage = depth
      const ticker = await client((c) => c.ticker("BTCUSDT"))
      expect(ticker, `depth ${depth}`).toMatchObject({ left: { _tag: "DecodeError", endpoint: paths.ticker, field: "", detail: `the answer nests arrays and objects deeper than ${MAX_ANSWER_DEPTH} levels` } })
    }
    expect(log.events("request.failed").map((line) => line.endpoint)).toEqual([paths.orderStatus, ...depths.map(() => paths.ticker)])

    damage = undefined
    expect(Either.isRight(await client((c) => c.ticker("BTCUSDT")))).toBe(true)
    expect(await client((c) => c.orderStatus(order!.clientOrderId))).toMatchObject({ right: { clientOrderId: order!.clientOrderId } })
    const refused = await runtime.runPromise(Effect.flatMap(SvcClient, (c) => c.refusedAnswers))
    expect(refused.map((answer) => answer.endpoint)).not.toContain(paths.ticker)
    expect(refused.map((answer) => answer.endpoint)).not.toContain(paths.orderStatus)
  }, 60_000)
})
