/**
 * The default bound on an answer's size against the largest legitimate answer: a full fills
 * page of svc-venue (MAX_FILLS_LIMIT fills) whose every field is as long as the spec and the
 * amount bounds allow. The page must read, and fit the bound many times over.
 */
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { MAX_EXPONENT, MAX_SIGNIFICANT_DIGITS } from "../../src/domain/Decimal.js"
import { decodeFillsPage, parseFillsAnswer } from "../../src/svc/FillsDecoder.js"
import { DEFAULT_MAX_ANSWER_BYTES } from "../../src/svc/SvcClient.js"
import { MAX_FILLS_LIMIT } from "../../src/venue/KeyRoutes.js"

/** The longest amount within the bounds, written in plain digits: the smallest exponent, every digit significant. */
const longestAmount = (negative: boolean) => `${negative ? "-" : ""}0.${"0".repeat(MAX_EXPONENT - 1)}${"9".repeat(MAX_SIGNIFICANT_DIGITS)}`

describe("the client's answer size bound", () => {
  it("fits the largest legitimate fills page more than ten times over", () => {
    const fill = {
      // svc-venue takes clientOrderIds of up to 64 characters; fill ids are no longer.
      fillId: "f".repeat(64),
      clientOrderId: "c".repeat(64),
      symbol: "S".repeat(20),
      side: "sell",
      liquidity: "maker",
      price: longestAmount(false),
      baseQty: longestAmount(false),
      quoteQty: longestAmount(false),
      fee: longestAmount(true),
      feeAsset: "A".repeat(12),
      time: 4_102_444_800_000
    }
    const page = JSON.stringify({ fills: Array.from({ length: MAX_FILLS_LIMIT }, (_, i) => ({ ...fill, fillId: `${i}`.padStart(64, "f") })), nextCursor: "n".repeat(64) })
    expect(Either.isRight(decodeFillsPage("/api/spot/fills")(parseFillsAnswer(page)))).toBe(true)
    const bytes = Buffer.byteLength(page, "utf8")
    console.log(`largest legitimate fills page: ${MAX_FILLS_LIMIT} fills, ${bytes} bytes; default bound ${DEFAULT_MAX_ANSWER_BYTES} bytes (${(DEFAULT_MAX_ANSWER_BYTES / bytes).toFixed(1)}x)`)
    expect(bytes * 10).toBeLessThan(DEFAULT_MAX_ANSWER_BYTES)
  })
})
