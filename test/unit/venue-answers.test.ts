import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import { answer, fillJson, fillsPageAnswer, plainAnswer } from "../../src/venue/Answers.js"
import type { VenueFill } from "../../src/venue/Orders.js"

/** Amounts as the venue keeps them: up to 18 integer and 18 fraction digits, zero included. */
const amount = fc
  .tuple(fc.bigInt({ min: 0n, max: 10n ** 18n }), fc.bigInt({ min: 0n, max: 10n ** 18n - 1n }), fc.integer({ min: 0, max: 18 }))
  .map(([whole, fraction, places]) => new Decimal(places === 0 ? whole.toString() : `${whole}.${fraction.toString().padStart(18, "0").slice(0, places)}`))

const fill = fc.record({
  seq: fc.nat(),
  fillId: fc.string(),
  clientOrderId: fc.string(),
  symbol: fc.constantFrom("BTCUSDT", "ETHUSDT"),
  side: fc.constantFrom("buy" as const, "sell" as const),
  liquidity: fc.constantFrom("maker" as const, "taker" as const),
  price: amount,
  baseQty: amount,
  quoteQty: amount,
  fee: amount,
  feeAsset: fc.constantFrom("BTC", "USDT"),
  time: fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER })
}) as fc.Arbitrary<VenueFill>

describe("venue answers written without the exact-number writer", () => {
  it("a fills page reads exactly as the exact writer writes it, its rows written once and then reused", () => {
    fc.assert(
      fc.property(fc.array(fill, { maxLength: 20 }), fc.option(fc.string(), { nil: null }), (fills, nextCursor) => {
        const page = { fills: fills.map(fillJson), nextCursor }
        const exact = answer(200, page)
        expect(plainAnswer(200, page)).toEqual(exact)
        expect(fillsPageAnswer(fills, nextCursor)).toEqual(exact)
        // Again, from the rows kept from the first page.
        expect(fillsPageAnswer(fills, nextCursor)).toEqual(exact)
      })
    )
  })
})
