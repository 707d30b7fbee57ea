/**
 * Engine figures, each a ratio against a baseline measured in the same run:
 * - fills ingested per second from svc-venue into SQLite by FillSync, against raw
 *   better-sqlite3 inserts of the same rows;
 * - weight spent per order lifecycle with the tracker, against naive per-order
 *   status polling every 250 ms;
 * - intents per second from strategy to `accepted` on loopback, against bare
 *   client placements. The machine is shared, so both are run ROUNDS times,
 *   alternating, each round on an account of its own (no round sees another's
 *   open orders), and the figure is the median of the rounds' ratios; a first
 *   round of each, not counted, warms both up (a daemon runs warm). Each side
 *   is timed once the process is idle (`awaitIdle`): building a round's engine
 *   (its database opened and migrated) or client, and the side before, leave
 *   V8's threads collecting and compiling, which a burst on a running daemon
 *   does not meet;
 * - the engine's own CPU for the same burst, each placement answered by the client
 *   at once in this process (no request, no venue), against the CPU a bare round
 *   spends (client and venue, which share this process). A round of either kind
 *   is timed on the main thread where the runtime tells it (`threadCpuUsage`,
 *   Node 23.9 on), else for the whole process. Steadier than intents -> accepted,
 *   whose rounds swing with the machine, and it bounds it: that ratio reaches
 *   about 1 / (1 + this one), less what the engine's work costs the client and
 *   the venue in caches. It has no goal of its own.
 */
import BetterSqlite3 from "better-sqlite3"
import { Effect, Layer, ManagedRuntime, Redacted, Stream } from "effect"
import { Decimal } from "../src/domain/Decimal.js"
import type { PlaceIntent } from "../src/domain/Intent.js"
import { Engine, layer as engineLayer } from "../src/engine/Engine.js"
import { FillSync } from "../src/engine/FillSync.js"
import { Market } from "../src/engine/Market.js"
import * as Logger from "../src/log/Logger.js"
import { openDatabase } from "../src/store/Database.js"
import { OrderJournal } from "../src/store/OrderJournal.js"
import { defaultDialect } from "../src/svc/Dialect.js"
import { SvcClient } from "../src/svc/SvcClient.js"
import { defaultWeights, type Weights } from "../src/venue/Accounts.js"
import type { VenueRequest } from "../src/venue/Venue.js"
import { fundForFills, makeFills } from "../test/chaos/fixtures/fills.js"
import { clientLayer, fillSyncLayer, tempDbPath, type VenueKey } from "../test/integration/engine-harness.js"
import { admin, startVenue, type TestVenue } from "../test/support/venue.js"
import { awaitIdle } from "./Settle.js"

const FILLS = 10_000
const ORDERS_TRACKED = 20
const REST_MS = 3000
const INTENTS = 300
/**
 * A round of either side lasts a few hundred milliseconds, so on the shared machine one round's
 * ratio ranges from a third to above one; the median of fifteen alternating pairs holds still
 * where that of five moved by a tenth from run to run.
 */
const ROUNDS = 15
const FILL_ROUNDS = 5
const FILLS_GOAL = 0.5

const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

const quietLogger = Logger.layer({ destination: { write: () => undefined } })

/** Weight charged per key, counted as the venue sees the requests (weights from the venue's table). */
const meterWeights = (venue: TestVenue) => {
  const paths = defaultDialect.paths
  const byPath: Record<string, keyof Weights> = {
    [paths.walletsSpot]: "walletsSpot",
    [paths.walletsFunding]: "walletsFunding",
    [paths.openOrders]: "openOrders",
    [paths.fills]: "fills",
    [paths.orderStatus]: "orderStatus",
    [paths.limitOrder]: "limitOrder",
    [paths.marketOrder]: "marketOrder",
    [paths.stopLimitOrder]: "stopLimitOrder",
    [paths.cancelOrder]: "cancelOrder"
  }
  const spent = new Map<string, number>()
  const inner = venue.venue.handle.bind(venue.venue)
  venue.venue.handle = (request: VenueRequest) => {
    const key = request.headers["x-svc-apikey"]
    const path = request.target.split("?")[0] ?? ""
    const weight = byPath[path]
    if (typeof key === "string" && weight !== undefined) spent.set(key, (spent.get(key) ?? 0) + defaultWeights[weight])
    return inner(request)
  }
  return (keyId: string) => spent.get(keyId) ?? 0
}

const newKey = async (venue: TestVenue, uid = venue.uid): Promise<VenueKey> => {
  const key = await admin(venue, "POST", "/_venue/keys", { uid, permissions: ["read", "trade"] })
  return { url: venue.url, keyId: key.id as string, secret: key.secret as string }
}

/** A key of a new account funded for the resting bids of one round. */
const freshAccountKey = async (venue: TestVenue): Promise<VenueKey> => {
  const account = await admin(venue, "POST", "/_venue/accounts", { balances: { USDT: "10000000", BTC: "10" } })
  return newKey(venue, account.uid as number)
}

/** The key's client with each limit placement accepted at once, in this process: what is left of a round is the engine's own work. */
const answeredAtOnce = (key: VenueKey) =>
  Layer.provideMerge(
    Layer.effect(
      SvcClient,
      Effect.map(SvcClient, (client) => {
        let placed = 0
        return SvcClient.make({
          ...client,
          placeLimit: () => Effect.sync(() => ({ clientOrderId: `at-once-${++placed}`, status: "accepted" as const, sentAtMs: Date.now() }))
        })
      })
    ),
    clientLayer(key, 5000)
  )

const engineRuntime = (key: VenueKey, dbPath: string, placementsAnsweredAtOnce = false) =>
  ManagedRuntime.make(
    engineLayer({ dbPath, reconcile: { intervalMs: 30_000 } }).pipe(
      Layer.provideMerge(placementsAnsweredAtOnce ? answeredAtOnce(key) : clientLayer(key, 5000)),
      Layer.provide(quietLogger)
    )
  )

const threadCpuUsage = (process as { threadCpuUsage?: (previous?: NodeJS.CpuUsage) => NodeJS.CpuUsage }).threadCpuUsage
/** Whether `cpuSince` reads the main thread alone (else the whole process, V8's and libuv's threads included). */
const mainThreadCpu = threadCpuUsage !== undefined
const cpuNow = (previous?: NodeJS.CpuUsage): NodeJS.CpuUsage => (threadCpuUsage === undefined ? process.cpuUsage(previous) : threadCpuUsage.call(process, previous))
/** CPU milliseconds used since `start` (a `cpuNow()` reading). */
const cpuSince = (start: NodeJS.CpuUsage): number => {
  const used = cpuNow(start)
  return (used.user + used.system) / 1000
}

const waitFor = async (check: () => Promise<boolean>, what: string, timeoutMs = 60_000) => {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

/** Each timed side starts on a clean heap, so that no side pays for the garbage of what ran before it (bench/run.ts passes --expose-gc). */
const collectGarbage = (): void => (globalThis as { gc?: () => void }).gc?.()

/**
 * One sync of every fill into a new ledger, and raw inserts of the rows it stored into
 * another new database. The sync's runtime (database opened and migrated, client
 * built) is made before the clock starts, as the raw side's database is.
 */
const fillRound = async (venue: TestVenue) => {
  const db = tempDbPath()
  const raw = tempDbPath()
  try {
    const runtime = ManagedRuntime.make(fillSyncLayer(await newKey(venue), db.path).pipe(Layer.provide(quietLogger)))
    await runtime.runPromise(Effect.void)
    collectGarbage()
    const started = performance.now()
    const report = await runtime.runPromise(Effect.flatMap(FillSync, (sync) => sync.syncAll))
    const syncSeconds = (performance.now() - started) / 1000
    await runtime.dispose()
    const ledger = new BetterSqlite3(db.path, { readonly: true })
    const rows = ledger.prepare("SELECT * FROM fills").all() as Array<Record<string, unknown>>
    ledger.close()
    if (rows.length !== report.newFills) throw new Error(`ledger holds ${rows.length} fills, the sync reported ${report.newFills}`)

    const target = openDatabase({ path: raw.path })
    const insert = target.prepare(`INSERT INTO fills (fill_id, client_order_id, symbol, side, liquidity, price, base_qty, quote_qty, fee,
      fee_asset, time, raw, synced_at) VALUES (@fill_id, @client_order_id, @symbol, @side, @liquidity, @price, @base_qty, @quote_qty,
      @fee, @fee_asset, @time, @raw, @synced_at)`)
    const page = target.transaction((batch: Array<Record<string, unknown>>) => {
      for (const row of batch) insert.run(row)
    })
    collectGarbage()
    const rawStarted = performance.now()
    for (let i = 0; i < rows.length; i += 500) page(rows.slice(i, i + 500))
    const rawSeconds = (performance.now() - rawStarted) / 1000
    target.close()
    return { fills: rows.length, syncPerSecond: rows.length / syncSeconds, rawPerSecond: rows.length / rawSeconds }
  } finally {
    db.cleanup()
    raw.cleanup()
  }
}

/**
 * Each round syncs the same fills into a ledger of its own (a new key, a new file).
 * A first round, not counted, warms both paths up (a daemon syncs warm); the figure
 * is the median of the rounds' ratios, which resists a shared machine's noise.
 */
const fillIngestion = async (venue: TestVenue) => {
  fundForFills(venue.venue, venue.uid)
  makeFills(venue.venue, venue.uid, FILLS)
  await fillRound(venue)
  const rounds: Array<Awaited<ReturnType<typeof fillRound>>> = []
  for (let round = 0; round < FILL_ROUNDS; round++) rounds.push(await fillRound(venue))
  const ratios = rounds.map((r) => r.syncPerSecond / r.rawPerSecond)
  const middle = rounds[ratios.indexOf(median(ratios))]!
  return { ...middle, ratio: median(ratios), ratios }
}

const restingBuys = (prefix: string, count: number): Array<PlaceIntent> =>
  Array.from({ length: count }, (_, i) => ({
    type: "limit",
    tag: `${prefix}-${i}`,
    symbol: "BTCUSDT",
    side: "buy",
    baseQty: new Decimal("0.001"),
    limitPrice: new Decimal(59_000 + i)
  }))

/** Orders rest REST_MS, then the tape crosses them all and they fill. */
const weightPerLifecycle = async (venue: TestVenue, weightOf: (keyId: string) => number) => {
  await admin(venue, "POST", "/_venue/tape", { symbol: "BTCUSDT", price: "60000" })
  const naiveKey = await newKey(venue)
  const client = ManagedRuntime.make(
    SvcClient.layerWith({
      baseUrl: venue.url,
      apiKey: Redacted.make(naiveKey.keyId),
      apiSecret: Redacted.make(naiveKey.secret),
      dialect: defaultDialect,
      requestTimeoutMs: 5000
    }).pipe(Layer.provide(quietLogger))
  )
  await client.runPromise(
    Effect.gen(function* () {
      const svc = yield* SvcClient
      const ids = yield* Effect.forEach(restingBuys("naive", ORDERS_TRACKED), (o) => svc.placeLimit(o as never), { concurrency: 4 })
      const started = Date.now()
      let crossed = false
      const open = new Set(ids.map((a) => a.clientOrderId))
      while (open.size > 0) {
        const round = Date.now()
        if (!crossed && round - started >= REST_MS) {
          crossed = true
          yield* Effect.promise(() => admin(venue, "POST", "/_venue/tape", { symbol: "BTCUSDT", price: "58000" }))
        }
        yield* Effect.forEach([...open], (id) =>
          svc.orderStatus(id).pipe(Effect.tap((s) => Effect.sync(() => ["fill", "rejected", "cancelled"].includes(s.kind) && open.delete(id)))),
          { concurrency: 4 }
        )
        // Fixed rate: a new round every 250 ms however long the last one took.
        yield* Effect.sleep(Math.max(0, 250 - (Date.now() - round)))
      }
    })
  )
  await client.dispose()
  await admin(venue, "POST", "/_venue/tape", { symbol: "BTCUSDT", price: "60000" })

  const engineKey = await newKey(venue)
  const db = tempDbPath()
  const runtime = engineRuntime(engineKey, db.path)
  try {
    await runtime.runPromise(Effect.void)
    const before = weightOf(engineKey.keyId)
    await runtime.runPromise(Effect.flatMap(Engine, (e) => e.submit("bench", restingBuys("tracked", ORDERS_TRACKED))))
    const started = Date.now()
    let crossed = false
    await waitFor(async () => {
      if (!crossed && Date.now() - started >= REST_MS) {
        crossed = true
        await admin(venue, "POST", "/_venue/tape", { symbol: "BTCUSDT", price: "58000" })
      }
      const open = await runtime.runPromise(Effect.flatMap(OrderJournal, (j) => j.unfinished))
      return open.length === 0
    }, "tracked orders to fill")
    const tracked = weightOf(engineKey.keyId) - before
    return { naivePerOrder: weightOf(naiveKey.keyId) / ORDERS_TRACKED, trackedPerOrder: tracked / ORDERS_TRACKED }
  } finally {
    await runtime.dispose()
    db.cleanup()
    await admin(venue, "POST", "/_venue/tape", { symbol: "BTCUSDT", price: "60000" })
  }
}

const intentsToAccepted = async (venue: TestVenue) => {
  const orders = (prefix: string) => restingBuys(prefix, INTENTS).map((o, i) => ({ ...o, limitPrice: new Decimal(50_000 + i) }))

  const engineRound = async (round: number, placementsAnsweredAtOnce = false) => {
    const db = tempDbPath()
    const runtime = engineRuntime(await freshAccountKey(venue), db.path, placementsAnsweredAtOnce)
    try {
      await runtime.runPromise(Effect.void)
      // A running engine has the pair's last price (refreshed in the background once stale), so its
      // risk check waits for no ticker; a round's new engine reads it here, before the clock starts.
      await runtime.runPromise(Effect.flatMap(Market, (market) => market.lastPrice("BTCUSDT")))
      awaitIdle()
      const cpu = cpuNow()
      const started = performance.now()
      // Done when the engine announces its last placement past `submitting`, the moment the journal
      // holds the answer (a poll of the journal would add up to its interval to the figure).
      await runtime.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const engine = yield* Engine
            const updates = yield* engine.orderUpdates()
            const placed = (yield* engine.submit("bench", orders(`eng${round}`))).filter((r) => r._tag === "Approved").length
            const answered = new Set<number>()
            yield* updates.pipe(
              Stream.filter((u) => u.state !== "intent" && u.state !== "submitting" && !answered.has(u.orderId) && answered.add(u.orderId) !== undefined),
              Stream.take(placed),
              Stream.runDrain,
              Effect.timeoutFail({ duration: "60 seconds", onTimeout: () => new Error(`timed out waiting for ${placed - answered.size} of ${placed} placements to be answered`) })
            )
          })
        )
      )
      const seconds = (performance.now() - started) / 1000
      const cpuMs = cpuSince(cpu)
      const journaled = (await runtime.runPromise(Effect.flatMap(OrderJournal, (j) => j.all))).filter((o) => o.origin === "journal")
      const accepted = journaled.filter((o) => o.clientOrderId !== null).length
      return { accepted, perSecond: accepted / seconds, cpuMs }
    } finally {
      await runtime.dispose()
      db.cleanup()
    }
  }

  const bareRound = async (round: number) => {
    const key = await freshAccountKey(venue)
    const client = ManagedRuntime.make(
      SvcClient.layerWith({
        baseUrl: venue.url,
        apiKey: Redacted.make(key.keyId),
        apiSecret: Redacted.make(key.secret),
        dialect: defaultDialect,
        requestTimeoutMs: 5000
      }).pipe(Layer.provide(quietLogger))
    )
    try {
      await client.runPromise(Effect.void)
      awaitIdle()
      const cpu = cpuNow()
      const started = performance.now()
      await client.runPromise(Effect.flatMap(SvcClient, (svc) => Effect.forEach(orders(`bare${round}`), (o) => svc.placeLimit(o as never), { concurrency: 16 })))
      return { perSecond: INTENTS / ((performance.now() - started) / 1000), cpuMs: cpuSince(cpu) }
    } finally {
      await client.dispose()
    }
  }

  await bareRound(-1)
  await engineRound(-1)
  const rounds: Array<{ readonly accepted: number; readonly enginePerSecond: number; readonly barePerSecond: number; readonly bareCpuMs: number }> = []
  for (let round = 0; round < ROUNDS; round++) {
    // Alternating which goes first, so that a drift in the machine's load does not favour one.
    const bareFirst = round % 2 === 1
    const earlier = bareFirst ? await bareRound(round) : undefined
    const engine = await engineRound(round)
    const bare = earlier ?? (await bareRound(round))
    rounds.push({ accepted: engine.accepted, enginePerSecond: engine.perSecond, barePerSecond: bare.perSecond, bareCpuMs: bare.cpuMs })
  }
  const ratios = rounds.map((r) => r.enginePerSecond / r.barePerSecond)
  const middle = rounds[ratios.indexOf(median(ratios))]!
  await engineRound(ROUNDS, true)
  const ownCpuMs: Array<number> = []
  for (let round = 0; round < ROUNDS; round++) ownCpuMs.push((await engineRound(ROUNDS + 1 + round, true)).cpuMs)
  const bareCpuMs = median(rounds.map((r) => r.bareCpuMs))
  return {
    accepted: Math.min(...rounds.map((r) => r.accepted)),
    enginePerSecond: middle.enginePerSecond,
    barePerSecond: middle.barePerSecond,
    ratio: median(ratios),
    ratios,
    own: { engineCpuMs: median(ownCpuMs), bareCpuMs, ratio: median(ownCpuMs) / bareCpuMs }
  }
}

const main = async () => {
  const venue = await startVenue({ settleMs: 0, limits: { weightPerMinute: 10_000_000, ordersPer10s: 1_000_000, ordersPerDay: 10_000_000 } })
  try {
    const weightOf = meterWeights(venue)
    const fills = await fillIngestion(venue)
    const weight = await weightPerLifecycle(venue, weightOf)
    const intents = await intentsToAccepted(venue)
    console.log("| figure | svcbot | baseline | ratio |")
    console.log("| --- | ---: | ---: | ---: |")
    console.log(
      `| fills ingested per second (FillSync vs raw inserts, median of ${FILL_ROUNDS} rounds: ${fills.ratios.map((r) => r.toFixed(3)).join(", ")}; goal >= ${FILLS_GOAL}) | ${fills.syncPerSecond.toFixed(0)} | ${fills.rawPerSecond.toFixed(0)} | ${fills.ratio.toFixed(3)} |`
    )
    console.log(`| weight per order lifecycle (tracker vs polling every 250 ms) | ${weight.trackedPerOrder.toFixed(1)} | ${weight.naivePerOrder.toFixed(1)} | ${(weight.trackedPerOrder / weight.naivePerOrder).toFixed(3)} |`)
    console.log(
      `| intents per second to accepted (engine vs bare client, median of ${ROUNDS} rounds: ${intents.ratios.map((r) => r.toFixed(3)).join(", ")}) | ${intents.enginePerSecond.toFixed(0)} | ${intents.barePerSecond.toFixed(0)} | ${intents.ratio.toFixed(3)} |`
    )
    console.log(
      `| the engine's own CPU for a burst of ${INTENTS}, placements answered at once in-process, vs a bare round's (client and venue), medians of ${ROUNDS} rounds, ${mainThreadCpu ? "main thread" : "whole process"} | ${intents.own.engineCpuMs.toFixed(1)} ms | ${intents.own.bareCpuMs.toFixed(1)} ms | ${intents.own.ratio.toFixed(3)} |`
    )
    console.log(
      JSON.stringify({
        bench: "engine",
        fills: {
          count: fills.fills,
          rounds: FILL_ROUNDS,
          syncPerSecond: Math.round(fills.syncPerSecond),
          rawPerSecond: Math.round(fills.rawPerSecond),
          roundRatios: fills.ratios.map((r) => Number(r.toFixed(4))),
          ratio: Number(fills.ratio.toFixed(4)),
          goal: FILLS_GOAL
        },
        weightPerOrder: {
          orders: ORDERS_TRACKED,
          restMs: REST_MS,
          tracker: weight.trackedPerOrder,
          naive250ms: weight.naivePerOrder,
          ratio: Number((weight.trackedPerOrder / weight.naivePerOrder).toFixed(4)),
          goal: "<= 0.12"
        },
        intentsToAccepted: {
          intents: INTENTS,
          rounds: ROUNDS,
          accepted: intents.accepted,
          enginePerSecond: Math.round(intents.enginePerSecond),
          barePerSecond: Math.round(intents.barePerSecond),
          roundRatios: intents.ratios.map((r) => Number(r.toFixed(4))),
          ratio: Number(intents.ratio.toFixed(4)),
          goal: 0.7
        },
        ownCpu: {
          intents: INTENTS,
          rounds: ROUNDS,
          mainThread: mainThreadCpu,
          engineMs: Number(intents.own.engineCpuMs.toFixed(2)),
          bareMs: Number(intents.own.bareCpuMs.toFixed(2)),
          ratio: Number(intents.own.ratio.toFixed(4))
        }
      })
    )
  } finally {
    await venue.close()
  }
}

await main()
