/**
 * SvcClient over HTTPS against svc-venue serving a certificate made for the test.
 * The client's pool trusts what Node trusts, or what the Dispatcher it is given
 * trusts: a certificate nobody vouches for is a NetworkError, never an answer.
 */
import { NodeHttpClient } from "@effect/platform-node"
import Undici, { type buildConnector } from "@effect/platform-node/Undici"
import { Effect, Exit, Layer, Redacted, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { defaultDialect } from "../../src/svc/Dialect.js"
import { SvcClient, type SvcClientOptions } from "../../src/svc/SvcClient.js"
import { devTradeKey } from "../../src/venue/Accounts.js"
import { serveVenue } from "../../src/venue/Server.js"
import { selfSigned } from "../support/tls.js"

const agentLayer = (connect: buildConnector.BuildOptions) =>
  Layer.scoped(
    NodeHttpClient.Dispatcher,
    Effect.acquireRelease(
      Effect.sync(() => new Undici.Agent({ connect })),
      (agent) => Effect.promise(() => agent.destroy())
    )
  )

describe("SvcClient over TLS", () => {
  const tls = selfSigned("svc-client-tls")
  const scope = Effect.runSync(Scope.make())
  let options: SvcClientOptions

  beforeAll(async () => {
    const running = await Effect.runPromise(Scope.extend(serveVenue({ port: 0, tls }), scope))
    options = {
      baseUrl: running.url,
      apiKey: Redacted.make(devTradeKey.keyId),
      apiSecret: Redacted.make(devTradeKey.secret),
      dialect: defaultDialect,
      requestTimeoutMs: 5000,
      retry: { maxRetries: 0 }
    }
  })
  afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)))

  const wallet = (dispatcher?: Layer.Layer<NodeHttpClient.Dispatcher>) =>
    Effect.runPromise(
      Effect.flatMap(SvcClient, (client) => Effect.either(client.spotWallet())).pipe(Effect.provide(SvcClient.layerWith(options, dispatcher)), Effect.scoped)
    )

  it("sends signed requests through a pool that trusts the venue's certificate", async () => {
    const answer = await wallet(agentLayer({ ca: tls.cert }))
    expect(answer._tag).toBe("Right")
    if (answer._tag === "Right") expect(answer.right.map((row) => row.asset)).toContain("USDT")
  })

  it("refuses a certificate Node does not trust, as a network error", async () => {
    const answer = await wallet()
    expect(answer).toMatchObject({ _tag: "Left", left: { _tag: "NetworkError", reason: "connection" } })
  })

  it("accepts any certificate only when the pool is told not to verify", async () => {
    expect((await wallet(agentLayer({ rejectUnauthorized: false })))._tag).toBe("Right")
  })
})
