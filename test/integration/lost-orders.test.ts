/**
 * A venue that restarts empty: the orders the journal has resting there are gone
 * without a final kind. Each is marked lost after a bounded number of status probes
 * (ORDER_NOT_FOUND, absent from open orders and fills), reported once, polled no
 * more, and shown by health until `svcbot ack-lost` acknowledges it.
 */
import { Effect } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import type { Intent } from "../../src/domain/Intent.js"
import { Engine } from "../../src/engine/Engine.js"
import { OrderJournal } from "../../src/store/OrderJournal.js"
import { svcbot } from "../support/daemon.js"
import { startProxy } from "../support/proxy.js"
import { startVenue } from "../support/venue.js"
import { CapturedLog, eventually, startEngine, tempDbPath, testOptions } from "./engine-harness.js"

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const restingBuy = (tag: string, price: string): Intent => ({ type: "limit", tag, symbol: "BTCUSDT", side: "buy", baseQty: new Decimal("0.001"), limitPrice: new Decimal(price) })

describe("orders the venue no longer knows", () => {
  it("are marked lost after bounded probes, reported once each, polled no more, and shown until acknowledged", async () => {
    const first = await startVenue()
    cleanups.push(() => first.close())
    let proxy = await startProxy(Number(new URL(first.url).port))
    const proxyPort = Number(new URL(proxy.url).port)
    cleanups.push(() => proxy.stop())
    const db = tempDbPath()
    cleanups.push(db.cleanup)
    const log = new CapturedLog()
    const engine = await startEngine({ url: proxy.url, keyId: first.keyId, secret: first.secret }, testOptions(db.path), log)
    cleanups.push(() => engine.runtime.dispose())
    const journal = (f: (j: OrderJournal) => Effect.Effect<any>) => engine.run(Effect.flatMap(OrderJournal, f))

    await engine.run(Effect.flatMap(Engine, (e) => e.submit("s", [restingBuy("a", "50000"), restingBuy("b", "50001"), restingBuy("c", "50002")])))
    await engine.run(eventually(Effect.map(Effect.flatMap(OrderJournal, (j) => j.inStates(["resting"])), (rows) => (rows.length === 3 ? rows : undefined)), "three resting orders"))

    // The venue restarts empty on the same address: the dev key works, the orders are gone.
    await proxy.stop()
    const second = await startVenue()
    cleanups.push(() => second.close())
    proxy = await startProxy(Number(new URL(second.url).port), proxyPort)

    const lost = await engine.run(eventually(Effect.map(Effect.flatMap(OrderJournal, (j) => j.inStates(["lost"])), (rows) => (rows.length === 3 ? rows : undefined)), "three lost orders", 30_000))
    const ids = lost.map((o) => o.clientOrderId!)
    expect(log.events("order.lost").map((e) => e.clientOrderId).sort()).toEqual([...ids].sort())
    expect(log.events("reconcile.mismatch").filter((e) => e.lost === true).map((e) => e.clientOrderId).sort()).toEqual([...ids].sort())
    const probes = (id: string) =>
      log.events("request.failed").filter((e) => e.what === "order status" && e.clientOrderId === id && String(e.error).includes("ORDER_NOT_FOUND")).length
    const probesWhenLost = ids.map(probes)
    console.log(`lost orders: ${ids.length}, status probes each before marking: ${probesWhenLost.join(", ")}`)
    // The default bound: three ORDER_NOT_FOUND answers in a row past the settle window, and at most
    // one more inside it (the restart can come right after acceptance, when a 404 proves nothing).
    for (const n of probesWhenLost) expect(n === 3 || n === 4, `probes ${n}`).toBe(true)

    // Polling stops: a live order on the new venue is polled many times meanwhile, the lost ones never.
    await engine.run(Effect.flatMap(Engine, (e) => e.submit("s", [restingBuy("d", "50003")])))
    await engine.run(
      eventually(Effect.map(Effect.flatMap(OrderJournal, (j) => j.latestByTag("s", "d")), (row) => (row !== undefined && row.polls >= 10 ? row : undefined)), "ten polls of a live order", 30_000)
    )
    expect(ids.map(probes)).toEqual(probesWhenLost)
    expect(await engine.run(Effect.flatMap(Engine, (e) => e.health))).toEqual([expect.stringContaining("3 orders lost")])

    // The operator acknowledges one by id, then the rest; health clears.
    const ack = async (...args: Array<string>) => {
      const run = svcbot(["ack-lost", ...args, "--db", db.path])
      return { code: await run.exit, out: run.lines.join("\n"), err: run.stderr.join("") }
    }
    const one = await ack(ids[0]!)
    expect(one.code, one.err).toBe(0)
    expect(one.out).toContain(`acknowledged 1 lost order(s): ${ids[0]}`)
    expect(await engine.run(Effect.flatMap(Engine, (e) => e.health))).toEqual([expect.stringContaining("2 orders lost")])
    const unknown = await ack("co_no_such_order")
    expect(unknown.code).toBe(2)
    expect(unknown.err).toContain("co_no_such_order is not an unacknowledged lost order")
    const all = await ack("--all")
    expect(all.code, all.err).toBe(0)
    expect(await engine.run(Effect.flatMap(Engine, (e) => e.health))).toEqual([])
    expect(await journal((j) => j.lostUnacknowledged)).toEqual([])
  }, 120_000)
})
