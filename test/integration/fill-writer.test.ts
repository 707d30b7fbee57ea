/**
 * The fill ledger's writer thread on a real SQLite file: a page stored there is stored once and
 * moves the sync state with it, the thread lets go of the file when the ledger's scope ends, the
 * daemon's own transactions (which read before they write) are never refused while it writes,
 * and a page the storage refuses there fails as a write on the daemon's thread would.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Cause, Effect, Exit, Layer, Option } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import { Database } from "../../src/store/Database.js"
import { FillLedger, type LedgerFill } from "../../src/store/FillLedger.js"
import { isStorageFailure } from "../../src/store/StorageHealth.js"
import { fillUp, mountTmpfs } from "../support/tmpfs.js"

const cleanups: Array<() => void> = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup()
})

const tempFolder = (): string => {
  const folder = mkdtempSync(join(tmpdir(), "svcbot-fill-writer-"))
  cleanups.push(() => rmSync(folder, { recursive: true, force: true }))
  return folder
}

const run = <A, E>(path: string, effect: Effect.Effect<A, E, FillLedger | Database>) =>
  Effect.runPromise(Effect.scoped(Effect.provide(effect, FillLedger.Default.pipe(Layer.provideMerge(Database.Default({ path }))))))

const fill = (n: number, raw = `{"fillId":"f${n}"}`): LedgerFill => ({
  fillId: `f${n}`,
  clientOrderId: `c${n % 7}`,
  symbol: "BTCUSDT",
  side: "buy",
  liquidity: "maker",
  price: new Decimal("60000.1"),
  baseQty: new Decimal("0.001"),
  quoteQty: new Decimal("60.0001"),
  fee: new Decimal("0.000001"),
  feeAsset: "BTC",
  time: 1_700_000_000_000 + n,
  raw
})

const page = (from: number, count: number, raw?: (n: number) => string): Array<LedgerFill> =>
  Array.from({ length: count }, (_, i) => fill(from + i, raw?.(from + i)))

describe("the fill ledger's writer thread", () => {
  it("stores a page once with its progress, and lets go of the file when the ledger's scope ends", async () => {
    const path = join(tempFolder(), "svcbot.sqlite")
    const seen = await run(
      path,
      Effect.gen(function* () {
        const ledger = yield* FillLedger
        const first = yield* ledger.storePage(page(1, 3), { _tag: "Continue", cursor: "next-1", top: { fillId: "f3", time: 1_700_000_000_003 } }, 1)
        const midway = yield* ledger.syncState
        const again = yield* ledger.storePage(page(2, 3), { _tag: "Complete" }, 2)
        return { first, midway, again, state: yield* ledger.syncState, stored: yield* ledger.all }
      })
    )
    expect(seen.first.map((f) => f.fillId)).toEqual(["f1", "f2", "f3"])
    expect(seen.midway).toMatchObject({ backfillCursor: "next-1", passTopFillId: "f3", highWaterFillId: null })
    // f2 and f3 were stored already: only f4 is new.
    expect(seen.again.map((f) => f.fillId)).toEqual(["f4"])
    expect(seen.state).toMatchObject({ backfillCursor: null, backfillDone: true, highWaterFillId: "f3", passTopFillId: null })
    expect(seen.stored.map((f) => [f.fillId, f.price.toFixed(), f.raw])).toEqual(
      [4, 3, 2, 1].map((n) => [`f${n}`, "60000.1", `{"fillId":"f${n}"}`])
    )
    // SQLite removes the write-ahead log when the last connection to the file closes: the thread's is closed too.
    expect(existsSync(`${path}-wal`)).toBe(false)
  })

  it("never has the daemon's own transactions refused while it writes, though they read before they write", async () => {
    const path = join(tempFolder(), "svcbot.sqlite")
    const outcome = await run(
      path,
      Effect.gen(function* () {
        const ledger = yield* FillLedger
        const database = yield* Database
        const countFills = database.sqlite.prepare<[], { n: number }>("SELECT count(*) AS n FROM fills")
        const upsert = database.sqlite.prepare(
          "INSERT INTO pair_rules (symbol, base, quote, tick_size, step_size, updated_at) VALUES ('BTCUSDT', 'BTC', 'USDT', '0.1', '0.001', ?) ON CONFLICT (symbol) DO UPDATE SET updated_at = excluded.updated_at"
        )
        // Twenty pages of 500 handed over at once: the thread writes them one after another meanwhile.
        const pending: Array<Effect.Effect<ReadonlyArray<LedgerFill>>> = []
        for (let p = 0; p < 20; p++) pending.push(yield* ledger.startPage(page(p * 500, 500), { _tag: "Continue", cursor: `next-${p}` }, p))
        // Until the last page is in, a transaction that reads the fills and then writes, again and again.
        const counts: Array<number> = []
        let refused = 0
        for (let i = 0; i < 100_000 && counts[counts.length - 1] !== 10_000; i++) {
          const exit = yield* Effect.exit(
            database.transaction(() => {
              const { n } = countFills.get()!
              upsert.run(i)
              return n
            })
          )
          if (Exit.isSuccess(exit)) counts.push(exit.value)
          else refused += 1
          // A moment for the thread between transactions, as the event loop's other work gives it.
          yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
        }
        let fresh = 0
        for (const wait of pending) fresh += (yield* wait).length
        return { counts, refused, fresh, stored: yield* ledger.count }
      })
    )
    expect(outcome.refused).toBe(0)
    expect(outcome.fresh).toBe(10_000)
    expect(outcome.stored).toBe(10_000)
    // The transactions ran while the pages were being written, not only before or after them.
    expect(outcome.counts.some((n) => n > 0 && n < 10_000)).toBe(true)
  })

  it("fails a page the storage refuses as the daemon's own write would fail, and is healthy again once a page is stored", async (context) => {
    const mounted = mountTmpfs("8m")
    if ("refused" in mounted) return context.skip(mounted.refused)
    cleanups.push(mounted.unmount)
    const mountPoint = mounted.path
    const path = join(mountPoint, "svcbot.sqlite")
    const filler = join(mountPoint, "filler")
    const seen = await run(
      path,
      Effect.gen(function* () {
        const ledger = yield* FillLedger
        yield* ledger.storePage(page(0, 10), { _tag: "Complete" }, 0)
        fillUp(filler)
        const big = (n: number) => `{"fillId":"f${n}","pad":"${"x".repeat(1000)}"}`
        const refused = yield* Effect.exit(ledger.storePage(page(100, 1000, big), { _tag: "Complete" }, 1))
        const fault = ledger.storage.fault
        const countWhileFull = yield* ledger.count
        rmSync(filler)
        const fresh = yield* ledger.storePage(page(100, 1000, big), { _tag: "Complete" }, 2)
        return { refused, fault, countWhileFull, fresh: fresh.length, after: ledger.storage.fault, stored: yield* ledger.count }
      })
    )
    const defect = Exit.isFailure(seen.refused) ? Cause.dieOption(seen.refused.cause) : Option.none()
    expect(Option.isSome(defect) && isStorageFailure(defect.value) ? defect.value.message : defect).toBe(`database ${path}: disk full (database or disk is full)`)
    expect(seen.fault?.cause).toBe("disk full")
    // Refused whole: none of the page is stored.
    expect(seen.countWhileFull).toBe(10)
    expect(seen.fresh).toBe(1000)
    expect(seen.after).toBeUndefined()
    expect(seen.stored).toBe(1010)
  })
})
