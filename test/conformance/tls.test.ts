/**
 * The service is carried over HTTPS: svc-venue serves TLS with `--tls-cert` and
 * `--tls-key`, and the same signed requests work over it. The certificate is made
 * for the test by openssl.
 */
import { request } from "node:https"
import { Effect, Exit, Scope } from "effect"
import { describe, expect, it } from "vitest"
import { signRequest } from "../../src/svc/Signer.js"
import { devTradeKey } from "../../src/venue/Accounts.js"
import { serveVenue } from "../../src/venue/Server.js"
import { selfSigned } from "../support/tls.js"

const get = (url: string, target: string, headers: Record<string, string>, ca: string) =>
  new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = request(`${url}${target}`, { method: "GET", headers, ca }, (res) => {
      let body = ""
      res.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }))
    })
    req.on("error", reject)
    req.end()
  })

describe("transport", () => {
  it("svc-venue serves HTTPS with a given certificate, and signed requests work over it", async () => {
    const tls = selfSigned("svc-venue-tls")
    const scope = Effect.runSync(Scope.make())
    try {
      const running = await Effect.runPromise(Scope.extend(serveVenue({ port: 0, tls }), scope))
      expect(running.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/)
      const signed = signRequest(devTradeKey.keyId, devTradeKey.secret, { method: "GET", target: "/api/wallets/spot", timestamp: Date.now(), recvWindow: 5000 })
      const answer = await get(running.url, "/api/wallets/spot", signed.headers, tls.cert)
      expect(answer.status).toBe(200)
      expect(answer.body).toContain('"asset":"USDT"')
      const publicAnswer = await get(running.url, "/api/spot/exchange-info", {}, tls.cert)
      expect(publicAnswer.status).toBe(200)
    } finally {
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  })
})
