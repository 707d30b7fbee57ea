import { Effect, Fiber, Logger as EffectLogger } from "effect"
import { describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import { FillSync } from "../../src/engine/FillSync.js"
import { FillLedger } from "../../src/store/FillLedger.js"
import { devTradeKey } from "../../src/venue/Accounts.js"
import { serveVenue } from "../../src/venue/Server.js"
import { fillJson } from "../../src/venue/Venue.js"
import { fundForFills, makeFills } from "../chaos/fixtures/fills.js"
import { fillSyncLayer, tempDbPath } from "./engine-harness.js"

const uid = devTradeKey.uid
const key = (url: string) => ({ url, keyId: devTradeKey.keyId, secret: devTradeKey.secret })

describe("FillSync", () => {
  it("backfills 10,000 fills across pages through crashes, resumes, and equals the venue row for row", async () => {
    const db = tempDbPath()
    try {
      await Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const running = yield* serveVenue({ settleMs: 0 })
            const venue = running.venue
            fundForFills(venue, uid)
            makeFills(venue, uid, 6000)

            // Crash 1: a pass bounded to 4 pages stops with its cursor stored, the process "dies" (the scope closes).
            const first = yield* Effect.scoped(
              Effect.gen(function* () {
                const sync = yield* FillSync
                return yield* sync.syncOnce
              }).pipe(Effect.provide(fillSyncLayer(key(running.url), db.path, 4)))
            )
            expect(first).toMatchObject({ pages: 4, interrupted: true })

            // Crash 2: interrupted at an arbitrary moment while more fills arrive.
            makeFills(venue, uid, 2000)
            yield* Effect.scoped(
              Effect.gen(function* () {
                const sync = yield* FillSync
                const ledger = yield* FillLedger
                const fiber = yield* Effect.fork(sync.syncAll)
                const before = yield* ledger.count
                for (let i = 0; i < 2000 && (yield* ledger.count) <= before; i++) yield* Effect.sleep(5)
                yield* Fiber.interrupt(fiber)
              }).pipe(Effect.provide(fillSyncLayer(key(running.url), db.path, 1000)))
            )

            makeFills(venue, uid, 2000)
            const venueFills = venue.engine.allFills(uid)
            expect(venueFills.length).toBeGreaterThanOrEqual(10_000)

            const result = yield* Effect.scoped(
              Effect.gen(function* () {
                const sync = yield* FillSync
                const ledger = yield* FillLedger
                const report = yield* sync.syncAll
                const again = yield* sync.syncOnce
                return { report, again, stored: yield* ledger.all, state: yield* ledger.syncState }
              }).pipe(Effect.provide(fillSyncLayer(key(running.url), db.path, 1000)))
            )
            expect(result.again.newFills).toBe(0)
            expect(result.state).toMatchObject({ backfillCursor: null, backfillDone: true })
            const byId = (a: { fillId: string }, b: { fillId: string }) => (a.fillId < b.fillId ? -1 : a.fillId > b.fillId ? 1 : 0)
            const stored = [...result.stored].sort(byId)
            expect(new Set(stored.map((f) => f.fillId)).size).toBe(stored.length)
            const expected = venueFills.map(fillJson).sort(byId)
            expect(stored.length).toBe(expected.length)
            stored.forEach((fill, i) => {
              const want = expected[i]!
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
              }).toEqual({ ...want, price: new Decimal(want.price).toFixed(), baseQty: new Decimal(want.baseQty).toFixed(), quoteQty: new Decimal(want.quoteQty).toFixed(), fee: new Decimal(want.fee).toFixed() })
            })
            console.log(
              `fillsync: venue ${expected.length} fills, ledger ${stored.length}, duplicates ${stored.length - new Set(stored.map((f) => f.fillId)).size}`
            )
          })
        ).pipe(Effect.provide(EffectLogger.remove(EffectLogger.defaultLogger)))
      )
    } finally {
      db.cleanup()
    }
  }, 120_000)
})
