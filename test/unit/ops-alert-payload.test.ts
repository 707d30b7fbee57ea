import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import { EventCatalog } from "../../src/log/Events.js"
import { registerSecret } from "../../src/log/Redaction.js"
import { DEFAULT_ALERT_EVENTS, makePayload, payloadBody, sanitizeFields } from "../../src/ops/AlertWebhook.js"

const secret = "svs_live_" + "q7Wx".repeat(12) + "R"
registerSecret(secret)

/** Arbitrary log fields with the secret planted in values, inside text, and under secret-named fields. */
const fieldsWithSecret = fc.letrec<{ fields: Record<string, unknown> }>((tie) => ({
  fields: fc.dictionary(
    fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom("secret", "apiSecret", "signature", "password", "token", "detail")),
    fc.oneof(
      { depthSize: "small" },
      fc.string(),
      fc.constant(secret),
      fc.string().map((text) => `${text}${secret}${text}`),
      fc.integer(),
      fc.boolean(),
      fc.constant(null),
      fc.array(fc.oneof(fc.string(), fc.constant(secret)), { maxLength: 4 }),
      tie("fields")
    ),
    { maxKeys: 6 }
  )
})).fields

describe("alert payload", () => {
  it("never carries a registered secret, wherever it sits in the fields", () => {
    fc.assert(
      fc.property(fc.constantFrom(...DEFAULT_ALERT_EVENTS), fieldsWithSecret, (event, fields) => {
        const body = payloadBody(makePayload(event, fields, new Date(0)))
        expect(body).not.toContain(secret)
        JSON.parse(body)
      }),
      { numRuns: 300 }
    )
  })

  it("drops secret-named fields, masks key ids, and writes decimals exactly", () => {
    const keyId = "svk_live_" + "k".repeat(22)
    const safe = sanitizeFields({
      apiKey: keyId,
      apiSecret: "not registered but named as a secret",
      realizedPnl: new Decimal("-0.000000012345678901234567890123"),
      when: new Date(Date.UTC(2026, 0, 2)),
      count: 3,
      failure: new Error("boom")
    })
    expect(safe).toEqual({
      apiKey: `${keyId.slice(0, 12)}…`,
      realizedPnl: "-0.000000012345678901234567890123",
      when: "2026-01-02T00:00:00.000Z",
      count: 3,
      failure: { name: "Error", message: "boom" }
    })
  })

  it("names the event, its catalog level and meaning", () => {
    const payload = makePayload("auth.invalid", {}, new Date(Date.UTC(2026, 5, 1)), "eu-1")
    expect(payload).toMatchObject({
      source: "svcbot",
      instance: "eu-1",
      event: "auth.invalid",
      level: EventCatalog["auth.invalid"].level,
      meaning: EventCatalog["auth.invalid"].meaning,
      time: "2026-06-01T00:00:00.000Z"
    })
  })
})
