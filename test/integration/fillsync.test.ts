import { Effect, Fiber, Logger as EffectLogger } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import { FillSync } from "../../src/engine/FillSync.js"
import { FillLedger } from "../../src/store/FillLedger.js"
import { fundForFills, makeFills } from "../chaos/fixtures/fills.js"
import { startVenue } from "../support/venue.js"
import { fillSyncLayer, tempDbPath } from "./engine-harness.js"

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const byId = <T extends { readonly fillId: string }>(a: T, b: T) => (a.fillId < b.fillId ? -1 : a.fillId > b.fillId ? 1 : 0)
type VenueFill = Record<string, string | number | null> & { readonly fillId: string }
const quiet = Effect.provide(EffectLogger.remove(EffectLogger.defaultLogger))

describe("FillSync", () => {
  it("backfills 10,000 fills across pages through crashes, resumes, and equals the venue row for row", async () => {
    const venue = await startVenue({ settleMs: 0 })
    cleanups.push(() => venue.close())
    const db = tempDbPath()
    cleanups.push(db.cleanup)
    fundForFills(venue.venue, venue.uid)
    makeFills(venue.venue, venue.uid, 6000)
    const withSync = <A, E>(maxPagesPerPass: number, body: Effect.Effect<A, E, FillSync | FillLedger>) =>
      Effect.runPromise(Effect.scoped(body).pipe(Effect.provide(fillSyncLayer(venue, db.path, maxPagesPerPass)), quiet))

    // Crash 1: a pass bounded to 4 pages stops with its cursor stored, and the process "dies" (the scope closes).
    const first = await withSync(4, Effect.flatMap(FillSync, (sync) => sync.syncOnce))
    expect(first).toMatchObject({ pages: 4, interrupted: true })

    // Crash 2: interrupted at an arbitrary moment of a pass while more fills arrive.
    makeFills(venue.venue, venue.uid, 2000)
    await withSync(
      1000,
      Effect.gen(function* () {
        const sync = yield* FillSync
        const ledger = yield* FillLedger
        const before = yield* ledger.count
        const fiber = yield* Effect.fork(sync.syncAll)
        for (let i = 0; i < 2000 && (yield* ledger.count) <= before; i++) yield* Effect.sleep(5)
        yield* Fiber.interrupt(fiber)
      })
    )

    makeFills(venue.venue, venue.uid, 2000)
    const result = await withSync(
      1000,
      Effect.gen(function* () {
        const sync = yield* FillSync
        const ledger = yield* FillLedger
        yield* sync.syncAll
        const again = yield* sync.syncOnce
        return { again, stored: yield* ledger.all, state: yield* ledger.syncState }
      })
    )
    const venueFills = ((await venue.admin("GET", `/_venue/fills?uid=${venue.uid}`)).fills as Array<Record<string, string | number | null>>)
      .map((f): VenueFill => ({ ...f, fillId: String(f.fillId) }))
      .sort(byId)
    expect(venueFills.length).toBeGreaterThanOrEqual(10_000)
    expect(result.again.newFills).toBe(0)
    expect(result.state).toMatchObject({ backfillCursor: null, backfillDone: true })
    const stored = [...result.stored].sort(byId)
    const duplicates = stored.length - new Set(stored.map((f) => f.fillId)).size
    expect(duplicates).toBe(0)
    expect(stored.length).toBe(venueFills.length)
    stored.forEach((fill, i) => {
      const want = venueFills[i]!
      expect({
        fillId: fill.fillId,
        clientOrderId: fill.clientOrderId,
        symbol: fill.symbol,
        side: fill.side,
        liquidity: fill.liquidity,
        price: fill.price.toFixed(),
        baseQty: fill.baseQty.toFixed(),
        quoteQty: fill.quoteQty.toFixed(),
        fee: fill.fee.toFixed(),
        feeAsset: fill.feeAsset,
        time: fill.time
      }).toEqual({
        fillId: want.fillId,
        clientOrderId: want.clientOrderId,
        symbol: want.symbol,
        side: want.side,
        liquidity: want.liquidity,
        price: new Decimal(String(want.price)).toFixed(),
        baseQty: new Decimal(String(want.baseQty)).toFixed(),
        quoteQty: new Decimal(String(want.quoteQty)).toFixed(),
        fee: new Decimal(String(want.fee)).toFixed(),
        feeAsset: want.feeAsset,
        time: Number(want.time)
      })
    })
    console.log(`fillsync: venue ${venueFills.length} fills, ledger ${stored.length}, duplicates ${duplicates}`)
  }, 120_000)
})
