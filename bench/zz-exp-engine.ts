import { Effect, ManagedRuntime, Layer } from "effect"
import { Decimal } from "../src/domain/Decimal.js"
import { Engine, layer as engineLayer } from "../src/engine/Engine.js"
import { OrderJournal } from "../src/store/OrderJournal.js"
import * as Logger from "../src/log/Logger.js"
import { clientLayer, tempDbPath } from "../test/integration/engine-harness.js"
import { startVenue } from "../test/support/venue.js"

const venue = await startVenue({ settleMs: 0, limits: { weightPerMinute: 10_000_000, ordersPer10s: 1_000_000, ordersPerDay: 10_000_000 } })
const db = tempDbPath()
const rt = ManagedRuntime.make(engineLayer({ dbPath: db.path }).pipe(Layer.provideMerge(clientLayer(venue, 5000)), Layer.provide(Logger.layer({ destination: { write: () => undefined } }))))
await rt.runPromise(Effect.void)
const intents = Array.from({ length: 200 }, (_, i) => ({ type: "limit" as const, tag: `e-${i}`, symbol: "BTCUSDT", side: "buy" as const, baseQty: new Decimal("0.001"), limitPrice: new Decimal(50000 + i) }))
const t0 = performance.now()
await rt.runPromise(Effect.flatMap(Engine, (e) => e.submit("x", intents)))
const t1 = performance.now()
for (;;) {
  const rows = await rt.runPromise(Effect.flatMap(OrderJournal, (j) => j.inStates(["intent", "submitting"])))
  if (rows.length === 0) break
  await new Promise((r) => setTimeout(r, 5))
}
const t2 = performance.now()
console.log("submit ms", (t1 - t0).toFixed(0), "to accepted ms", (t2 - t0).toFixed(0))
await rt.dispose()
await venue.close()
db.cleanup()
