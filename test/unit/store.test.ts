import BetterSqlite3 from "better-sqlite3"
import { Effect, Either, Layer } from "effect"
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync, copyFileSync, mkdirSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import { InvalidTransition } from "../../src/domain/OrderState.js"
import { Database } from "../../src/store/Database.js"
import { FillLedger, type LedgerFill } from "../../src/store/FillLedger.js"
import { DatabaseFromNewerVersion, DEFAULT_MIGRATIONS_DIR, migrate, MigrationFailed, readMigrations } from "../../src/store/Migrations.js"
import { OrderJournal } from "../../src/store/OrderJournal.js"

const dirs: Array<string> = []
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "svcbot-store-"))
  dirs.push(dir)
  return dir
}
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

const storeLayer = (path: string, migrationsDir?: string) =>
  Layer.mergeAll(OrderJournal.Default, FillLedger.Default).pipe(
    Layer.provideMerge(Database.Default(migrationsDir === undefined ? { path } : { path, migrationsDir }))
  )

const run = <A, E>(path: string, effect: Effect.Effect<A, E, OrderJournal | FillLedger | Database>) =>
  Effect.runPromise(Effect.scoped(Effect.provide(effect, storeLayer(path))))

const fill = (n: number, clientOrderId: string | null = null): LedgerFill => ({
  fillId: `f${n}`,
  clientOrderId,
  symbol: "BTCUSDT",
  side: "buy",
  liquidity: "taker",
  price: new Decimal("65000.10"),
  baseQty: new Decimal("0.00100000"),
  quoteQty: new Decimal("65.0001"),
  fee: new Decimal("0.000001"),
  feeAsset: "BTC",
  time: 1_700_000_000_000 + n,
  raw: `{"fillId":"f${n}"}`
})

describe("database and migrations", () => {
  it("applies every migration once, in WAL mode, and records it", async () => {
    const path = join(tempDir(), "db", "svcbot.sqlite")
    await run(path, Effect.void)
    await run(path, Effect.void)
    const db = new BetterSqlite3(path, { readonly: true })
    const versions = db.prepare("SELECT version FROM schema_migrations ORDER BY version").all() as Array<{ version: number }>
    const files = readdirSync(DEFAULT_MIGRATIONS_DIR).filter((f) => /^\d{4}_.*\.sql$/.test(f))
    expect(versions.map((v) => v.version)).toEqual(files.map((f) => Number(f.slice(0, 4))).sort((a, b) => a - b))
    expect(db.pragma("journal_mode", { simple: true })).toBe("wal")
    db.close()
  })

  it("refuses a database written by a newer version, with a message that says what to do", async () => {
    const path = join(tempDir(), "svcbot.sqlite")
    await run(path, Effect.void)
    const db = new BetterSqlite3(path)
    db.prepare("INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'future', 0)").run()
    db.close()
    const exit = await Effect.runPromiseExit(Effect.scoped(Effect.provide(Effect.void, Database.Default({ path }))))
    expect(exit._tag).toBe("Failure")
    const error = exit._tag === "Failure" && exit.cause._tag === "Fail" ? exit.cause.error : undefined
    expect(error).toBeInstanceOf(DatabaseFromNewerVersion)
    expect((error as DatabaseFromNewerVersion).message).toContain("newer than this svcbot knows")
  })

  it("rolls back a failing migration and applies nothing of it", async () => {
    const dir = tempDir()
    const migrations = join(dir, "migrations")
    mkdirSync(migrations)
    copyFileSync(join(DEFAULT_MIGRATIONS_DIR, "0001_ledger.sql"), join(migrations, "0001_ledger.sql"))
    writeFileSync(join(migrations, "0002_broken.sql"), "CREATE TABLE half (x INTEGER);\nTHIS IS NOT SQL;")
    const path = join(dir, "svcbot.sqlite")
    const exit = await Effect.runPromiseExit(Effect.scoped(Effect.provide(Effect.void, Database.Default({ path, migrationsDir: migrations }))))
    const error = exit._tag === "Failure" && exit.cause._tag === "Fail" ? exit.cause.error : undefined
    expect(error).toBeInstanceOf(MigrationFailed)
    const db = new BetterSqlite3(path, { readonly: true })
    expect(db.prepare("SELECT name FROM sqlite_master WHERE name = 'half'").all()).toEqual([])
    expect(db.prepare("SELECT version FROM schema_migrations").all()).toEqual([{ version: 1 }])
    db.close()
  })
})

describe("syncing to disk", () => {
  it("syncs the write-ahead log through its own handle once the log exists, though it was missing at the first sync", async () => {
    const path = join(tempDir(), "svcbot.sqlite")
    const sizes = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const { sqlite, syncToDisk } = yield* Database
          // Out of WAL mode SQLite removes the log: the first sync finds none to open.
          sqlite.pragma("journal_mode = DELETE")
          yield* syncToDisk
          sqlite.pragma("journal_mode = WAL")
          const before = statSync(path).size
          sqlite.exec("CREATE TABLE filler (text TEXT)")
          const insert = sqlite.prepare("INSERT INTO filler VALUES (?)")
          sqlite.transaction(() => {
            for (let i = 0; i < 100; i++) insert.run("x".repeat(1000))
          })()
          yield* syncToDisk
          return { before, after: statSync(path).size }
        }).pipe(Effect.provide(Database.Default({ path })))
      )
    )
    // Synced through the log's handle, the commit stays in the log; the fallback, a checkpoint, would have copied it into the file.
    expect(sizes.after).toBe(sizes.before)
  })
})

describe("what strategies were handed (migration 0022)", () => {
  it("counts an outcome from before the instance's last saved state as handed, and one from after it, or still to come, as owed", async () => {
    const path = join(tempDir(), "svcbot.sqlite")
    const db = new BetterSqlite3(path)
    migrate(db, path, readMigrations(DEFAULT_MIGRATIONS_DIR).filter((m) => m.version < 22))
    db.prepare("INSERT INTO strategy_state (strategy_id, strategy, version, state, updated_at) VALUES ('grid', 'grid', '1', '{}', 100)").run()
    const intent = db.prepare("INSERT INTO intents (intent_id, strategy_id, seq, tag, type, body, outcome, refusal, created_at) VALUES (?, ?, ?, ?, ?, '{}', ?, ?, ?)")
    const order = db.prepare(
      "INSERT INTO orders (intent_id, strategy_id, tag, origin, client_order_id, state, symbol, side, type, created_at, updated_at, terminal_at) VALUES (?, ?, ?, 'journal', ?, ?, 'BTCUSDT', 'buy', 'limit', 0, 0, ?)"
    )
    const placed = (strategyId: string, seq: number, tag: string, clientOrderId: string, state: string, terminalAt: number | null) => {
      intent.run(`${strategyId}:${seq}`, strategyId, seq, tag, "limit", "approved", null, 1)
      order.run(`${strategyId}:${seq}`, strategyId, tag, clientOrderId, state, terminalAt)
    }
    placed("grid", 1, "filled-before", "c-1", "fill", 50)
    placed("grid", 2, "cancelled-after", "c-2", "cancelled", 150)
    placed("grid", 3, "resting", "c-3", "resting", null)
    intent.run("grid:4", "grid", 4, "refused-after", "limit", "refused", "price-collar", 120)
    intent.run("grid:5", "grid", 5, "refused-before", "limit", "refused", "price-collar", 80)
    intent.run("grid:6", "grid", 6, "cancelled-after", "cancel", "approved", null, 140)
    const ledgerRow = db.prepare(
      "INSERT INTO fills (fill_id, client_order_id, symbol, side, liquidity, price, base_qty, quote_qty, fee, fee_asset, time, raw, synced_at) VALUES (?, ?, 'BTCUSDT', 'buy', 'maker', '1', '1', '1', '0', 'BTC', ?, '{}', ?)"
    )
    ledgerRow.run("f-before", "c-1", 40, 60)
    ledgerRow.run("f-after", "c-2", 130, 140)
    ledgerRow.run("f-external", "c-unknown", 190, 200)
    db.close()

    const owed = await run(
      path,
      Effect.gen(function* () {
        const answers = yield* (yield* OrderJournal).owedAnswers("grid")
        const fills = yield* (yield* FillLedger).unheardFor("grid")
        return { answers: answers.map((a) => `${a.tag} ${a.state} ${a.code ?? ""}`.trim()), fills: fills.map((f) => `${f.fill.fillId} ${f.tag}`) }
      })
    )
    // The open order is owed its final update when it comes; the cancel intent gets none of its own.
    expect(owed).toEqual({ answers: ["refused-after refused price-collar", "cancelled-after cancelled"], fills: ["f-after cancelled-after"] })
    const read = new BetterSqlite3(path, { readonly: true })
    expect(read.prepare("SELECT intent_id FROM intents WHERE answered_at IS NULL ORDER BY seq").all()).toEqual([
      { intent_id: "grid:2" },
      { intent_id: "grid:3" },
      { intent_id: "grid:4" },
      { intent_id: "grid:6" }
    ])
    expect(read.prepare("SELECT fill_id FROM fills WHERE heard_at IS NULL").all()).toEqual([{ fill_id: "f-after" }])
    read.close()
  })
})

describe("order journal", () => {
  it("journals intents with deterministic ids and walks an order to its terminal state", async () => {
    const path = join(tempDir(), "svcbot.sqlite")
    const result = await run(
      path,
      Effect.gen(function* () {
        const journal = yield* OrderJournal
        const order = yield* journal.journalPlacement({
          strategyId: "grid",
          tag: "buy-1",
          body: { type: "limit", baseQty: new Decimal("0.001") },
          placement: {
            symbol: "BTCUSDT",
            side: "buy",
            type: "limit",
            baseQty: new Decimal("0.001"),
            limitPrice: new Decimal("65000.1"),
            lockAsset: "USDT",
            lockAmount: new Decimal("65.0001")
          },
          now: 1
        })
        const second = yield* journal.journalIntent({ strategyId: "grid", tag: "buy-2", type: "limit", body: {}, refusal: "price-collar", now: 2 })
        yield* journal.transition(order.orderId, "send", { sentAt: 3 }, 3)
        yield* journal.transition(order.orderId, "accept", { clientOrderId: "c-1", acceptedAt: 4 }, 4)
        yield* journal.transition(order.orderId, "resting", { kind: "resting", filledBaseQty: new Decimal("0.0004") }, 5)
        yield* journal.transition(order.orderId, "resting", { kind: "resting", filledBaseQty: new Decimal("0.0007") }, 6)
        const filled = yield* journal.transition(order.orderId, "fill", { kind: "fill", filledBaseQty: new Decimal("0.001") }, 7)
        const invalid = yield* Effect.either(journal.transition(order.orderId, "cancelled", { kind: "cancelled" }, 8))
        const events = yield* journal.events(order.orderId)
        return { order, second, filled, invalid, events, byCoid: yield* journal.byClientOrderId("c-1") }
      })
    )
    expect(result.order.intentId).toBe("grid:000001")
    expect(result.second).toBe("grid:000002")
    expect(result.filled).toMatchObject({ state: "fill", kindsSeen: ["resting", "fill"], terminalAt: 7, clientOrderId: "c-1" })
    expect(result.filled.filledBaseQty.toFixed()).toBe("0.001")
    expect(result.filled.limitPrice?.toFixed()).toBe("65000.1")
    expect(Either.isLeft(result.invalid) && result.invalid.left).toBeInstanceOf(InvalidTransition)
    expect(result.events.map((e) => e.to_state)).toEqual(["intent", "submitting", "accepted", "resting", "resting", "fill"])
    expect(result.byCoid?.orderId).toBe(result.order.orderId)
  })
})

describe("order journal while the storage refuses writes", () => {
  it("finds an order by the state it reached in memory, not the one its row still holds", async () => {
    const path = join(tempDir(), "svcbot.sqlite")
    const result = await run(
      path,
      Effect.gen(function* () {
        const journal = yield* OrderJournal
        const placement = { symbol: "BTCUSDT", side: "buy", type: "limit", baseQty: new Decimal("0.001"), limitPrice: new Decimal("65000"), lockAsset: "USDT", lockAmount: new Decimal("65") } as const
        const order = yield* journal.journalPlacement({ strategyId: "grid", tag: "buy-1", body: {}, placement, now: 1 })
        yield* journal.transition(order.orderId, "send", { sentAt: 2 }, 2)
        yield* journal.transition(order.orderId, "accept", { clientOrderId: "c-1", acceptedAt: 3 }, 3)
        // The disk fills: the venue's answer that it lost the order is kept in memory, for the first write that succeeds.
        const { storage } = yield* Database
        storage.failed("disk full", Object.assign(new Error("database or disk is full"), { code: "SQLITE_FULL" }))
        yield* journal.transitionMany([{ orderId: order.orderId, event: "vanish", patch: {} }], 4)
        return {
          orderId: order.orderId,
          notRecorded: yield* journal.notRecorded,
          lost: (yield* journal.inStates(["lost"])).map((row) => row.orderId),
          finished: (yield* journal.inStates(["lost", "accepted"])).map((row) => [row.orderId, row.state]),
          lostUnacknowledged: (yield* journal.lostUnacknowledged).map((row) => row.clientOrderId),
          all: (yield* journal.all).map((row) => row.state)
        }
      })
    )
    expect(result.notRecorded).toBe(1)
    expect(result.lost).toEqual([result.orderId])
    expect(result.finished).toEqual([[result.orderId, "lost"]])
    expect(result.lostUnacknowledged).toEqual(["c-1"])
    expect(result.all).toEqual(["lost"])
    // The table still holds the row as it was: the answers above came from memory.
    const db = new BetterSqlite3(path, { readonly: true })
    expect(db.prepare("SELECT state FROM orders").all()).toEqual([{ state: "accepted" }])
    db.close()
  })
})

describe("fill ledger", () => {
  it("stores exact decimal text, ignores a fill id seen twice, and keeps sync progress with the page", async () => {
    const path = join(tempDir(), "svcbot.sqlite")
    const result = await run(
      path,
      Effect.gen(function* () {
        const ledger = yield* FillLedger
        const first = yield* ledger.storePage([fill(3), fill(2)], { _tag: "Continue", cursor: "cur-2", top: { fillId: "f3", time: 3 } }, 10)
        const mid = yield* ledger.syncState
        const again = yield* ledger.storePage([fill(2), fill(1)], { _tag: "Complete" }, 11)
        return { first, mid, again, end: yield* ledger.syncState, all: yield* ledger.all }
      })
    )
    expect(result.first.map((f) => f.fillId)).toEqual(["f3", "f2"])
    expect(result.mid).toMatchObject({ backfillCursor: "cur-2", passTopFillId: "f3", highWaterFillId: null, backfillDone: false })
    expect(result.again.map((f) => f.fillId)).toEqual(["f1"])
    expect(result.end).toMatchObject({ backfillCursor: null, highWaterFillId: "f3", highWaterTime: 3, backfillDone: true })
    expect(result.all.map((f) => f.fillId)).toEqual(["f3", "f2", "f1"])
    expect(result.all[0]!.price.toFixed()).toBe("65000.1")
    const db = new BetterSqlite3(path, { readonly: true })
    expect(db.prepare("SELECT base_qty, raw FROM fills WHERE fill_id = 'f1'").get()).toEqual({ base_qty: "0.001", raw: '{"fillId":"f1"}' })
    db.close()
  })
})

describe("order events", () => {
  const placement = (i: number) => ({
    strategyId: "grid",
    tag: `buy-${i}`,
    body: { type: "limit", tag: `buy-${i}` },
    placement: {
      symbol: "BTCUSDT",
      side: "buy" as const,
      type: "limit" as const,
      baseQty: new Decimal("0.001"),
      limitPrice: new Decimal(60_000 + i),
      lockAsset: "USDT",
      lockAmount: new Decimal(60 + i)
    },
    now: 10
  })
  const eventsOf = (path: string) => {
    const db = new BetterSqlite3(path, { readonly: true })
    const rows = db.prepare("SELECT order_id, from_state, to_state, kind, code, detail, at FROM order_events ORDER BY event_id").all()
    db.close()
    return rows
  }

  it("writes a transaction's events in the order they happened, each with its own values, however many there are", async () => {
    const path = join(tempDir(), "svcbot.sqlite")
    // 45 placements and their marks: each commit writes its events by 32, by 8 and one by one.
    const orders = await run(
      path,
      Effect.gen(function* () {
        const journal = yield* OrderJournal
        const journaled = yield* journal.batch((j) => Array.from({ length: 45 }, (_, i) => j.journalPlacement(placement(i))))
        yield* journal.transitionMany(journaled.map((o) => ({ orderId: o.orderId, event: "send" as const, patch: { sentAt: 20 } })), 20)
        const refusals = journaled.slice(0, 3).map((o, i) => ({ orderId: o.orderId, event: "refuse" as const, patch: { code: `E${i}` }, detail: `refused "${i}"\n` }))
        yield* Effect.sync(() => journal.applyMoves(refusals, 30))
        return journaled
      })
    )
    const ids = orders.map((o) => o.orderId)
    expect(eventsOf(path)).toEqual([
      ...ids.map((id) => ({ order_id: id, from_state: null, to_state: "intent", kind: null, code: null, detail: null, at: 10 })),
      ...ids.map((id) => ({ order_id: id, from_state: "intent", to_state: "submitting", kind: null, code: null, detail: null, at: 20 })),
      ...ids.slice(0, 3).map((id, i) => ({ order_id: id, from_state: "submitting", to_state: "refused", kind: null, code: `E${i}`, detail: `refused "${i}"\n`, at: 30 }))
    ])
  })

  it("writes none of the events of a transaction that fails, then or with the next one", async () => {
    const path = join(tempDir(), "svcbot.sqlite")
    const { failed, order } = await run(
      path,
      Effect.gen(function* () {
        const journal = yield* OrderJournal
        const failed = yield* Effect.exit(
          journal.batch((j) => {
            j.journalPlacement(placement(1))
            throw new Error("the strategy's batch failed")
          })
        )
        return { failed, order: yield* journal.journalPlacement(placement(2)) }
      })
    )
    expect(failed._tag).toBe("Failure")
    expect(eventsOf(path)).toEqual([{ order_id: order.orderId, from_state: null, to_state: "intent", kind: null, code: null, detail: null, at: 10 }])
  })
})
