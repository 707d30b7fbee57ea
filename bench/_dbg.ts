import { Effect, Exit, Layer, Logger, Redacted, Scope } from "effect"
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { defaultDialect } from "../src/svc/Dialect.js"
import { signRequest } from "../src/svc/Signer.js"
import { SvcClient } from "../src/svc/SvcClient.js"
import { devAccounts, devTradeKey } from "../src/venue/Accounts.js"
import { serveVenue } from "../src/venue/Server.js"
const scope = Effect.runSync(Scope.make())
const accounts = { ...devAccounts, limits: { ...devAccounts.limits, weightPerMinute: 1_000_000_000 } }
const running = await Effect.runPromise(Scope.extend(serveVenue({ accounts }), scope))
const url = running.url + "/api/wallets/spot"
const conc = Number(process.argv[2] ?? 1)
await Effect.runPromise(Effect.gen(function* () {
  const c = yield* SvcClient
  const http = yield* HttpClient.HttpClient
  for (let k = 0; k < 3; k++) {
    let n = 0; let t = performance.now()
    yield* Effect.all(Array.from({ length: conc }, () => Effect.gen(function* () { for (let i = 0; i < 300; i++) { yield* c.spotWallet(); n++ } })), { concurrency: "unbounded" })
    console.log("client rps", n / ((performance.now() - t) / 1000))
    n = 0; t = performance.now()
    yield* Effect.all(Array.from({ length: conc }, () => Effect.gen(function* () { for (let i = 0; i < 300; i++) {
      const { headers } = signRequest(devTradeKey.keyId, devTradeKey.secret, { method: "GET", target: "/api/wallets/spot", timestamp: Date.now(), recvWindow: 60_000 })
      const r = yield* http.execute(HttpClientRequest.get(url).pipe(HttpClientRequest.setHeaders(headers))); yield* r.text; n++ } })), { concurrency: "unbounded" })
    console.log("platform rps", n / ((performance.now() - t) / 1000))
  }
}).pipe(Effect.provide(SvcClient.layerWith({ baseUrl: running.url, apiKey: Redacted.make(devTradeKey.keyId), apiSecret: Redacted.make(devTradeKey.secret), dialect: defaultDialect, requestTimeoutMs: 10000 })), Effect.provide(NodeHttpClient.layerUndici), Effect.scoped))
await Effect.runPromise(Scope.close(scope, Exit.void))
