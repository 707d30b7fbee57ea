/**
 * What the client does after an attempt that did not end in a readable answer. The rules of
 * the spec and of DESIGN.md's "a timeout is never an outcome": a placement that may have
 * reached the server is never sent again, only reads and cancels are retried and only on what
 * passes (5xx, no answer), a boundedly many times, and a refused timestamp corrects the clock.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import {
  ApiKeyInvalid,
  ApiKeyTimestampInvalid,
  AnswerTooLarge,
  AuthBlocked,
  DecodeError,
  RateLimited,
  RequestInvalid,
  ServerUnavailable,
  type SvcError
} from "../../src/svc/Errors.js"
import {
  afterDecision,
  decideRetry,
  defaultRetryOptions,
  type FailedAttempt,
  initialRetryState,
  jitteredDelayMs,
  MAX_CLOCK_CORRECTIONS,
  type RetriedRequest,
  type RetryDecision,
  type RetryOptions,
  type RetryState
} from "../../src/svc/Retry.js"

const read: RetriedRequest = { method: "GET", path: "/api/wallets/spot", kind: "read" }
const publicRead: RetriedRequest = { method: "GET", path: "/api/spot/ticker", kind: "public" }
const cancel: RetriedRequest = { method: "POST", path: "/api/spot/cancel", kind: "cancel", body: { clientOrderId: "co_1" } }
const placement: RetriedRequest = {
  method: "POST",
  path: "/api/spot/limit",
  kind: "placement",
  orderType: "limit",
  body: { symbol: "BTCUSDT", side: "buy", baseQty: new Decimal("0.001"), limitPrice: new Decimal("50000") }
}
const requests = [read, publicRead, cancel, placement] as const

const lost = (reason: "timeout" | "connection", neverSent: boolean, sentAtMs = 1_000): FailedAttempt => ({
  _tag: "Lost",
  reason,
  neverSent: reason === "connection" && neverSent,
  detail: reason === "timeout" ? "no answer within 10000 ms" : neverSent ? "ECONNREFUSED" : "ECONNRESET",
  sentAtMs
})

const answered = (status: number, error: SvcError | undefined, sentAtLocalMs = 1_000, receivedAtLocalMs = 1_050): FailedAttempt => ({
  _tag: "Answered",
  status,
  error,
  unreadable: error === undefined ? new DecodeError({ endpoint: "/api/spot/limit", field: "clientOrderId", detail: "must not be empty" }) : undefined,
  sentAtMs: sentAtLocalMs + 7,
  sentAtLocalMs,
  receivedAtLocalMs
})

const endpoint = "/api/x"

const arbRequest = fc.constantFrom(...requests)

/** Every way an attempt can fail, as the client builds it. */
const arbAttempt: fc.Arbitrary<FailedAttempt> = fc.oneof(
  fc.tuple(fc.constantFrom("timeout" as const, "connection" as const), fc.boolean(), fc.nat()).map(([reason, neverSent, at]) => lost(reason, neverSent, at)),
  fc.integer({ min: 500, max: 599 }).map((status) => answered(status, new ServerUnavailable({ endpoint, status }))),
  fc.integer({ min: 400, max: 499 }).map((status) => answered(status, new RequestInvalid({ endpoint, status, code: null }))),
  fc.nat(60).map((retryAfter) => answered(429, new RateLimited({ endpoint, bucket: "weight-1m", retryAfter }))),
  fc.nat(60).map((retryAfter) => answered(429, new AuthBlocked({ endpoint, code: null, retryAfter }))),
  fc.constant(answered(401, new ApiKeyInvalid({ endpoint }))),
  fc
    .tuple(fc.option(fc.integer({ min: 0, max: 2_000_000_000_000 }), { nil: null }), fc.nat(10_000), fc.nat(5_000))
    .map(([serverTimeMs, sentAt, roundTrip]) =>
      answered(400, new ApiKeyTimestampInvalid({ endpoint, serverTimeMs, reason: "outside the receive window" }), sentAt, sentAt + roundTrip)
    ),
  fc.integer({ min: 200, max: 299 }).map((status) => answered(status, undefined)),
  fc.constant<FailedAttempt>({ ...(answered(200, undefined) as Extract<FailedAttempt, { _tag: "Answered" }>), unreadable: new AnswerTooLarge({ endpoint, limitBytes: 10 }) })
)

const arbState: fc.Arbitrary<RetryState> = fc.record({ retries: fc.nat(5), clockCorrections: fc.nat(MAX_CLOCK_CORRECTIONS) })

const arbOptions: fc.Arbitrary<RetryOptions> = fc
  .record({ maxRetries: fc.nat(6), baseDelayMs: fc.integer({ min: 1, max: 1_000 }), extra: fc.nat(10_000) })
  .map(({ maxRetries, baseDelayMs, extra }) => ({ maxRetries, baseDelayMs, maxDelayMs: baseDelayMs + extra }))

describe("the retry decision", () => {
  it("property: a placement that may have reached the server is left to reconciliation, never sent again", () => {
    fc.assert(
      fc.property(arbAttempt, arbState, fc.integer(), arbOptions, (attempt, state, offset, options) => {
        const decision = decideRetry(placement, attempt, state, offset, options)
        expect(decision._tag).not.toBe("Retry")
        const unknownOutcome =
          attempt._tag === "Lost" ? !attempt.neverSent : attempt.error === undefined || attempt.error._tag === "ServerUnavailable"
        if (unknownOutcome) {
          expect(decision._tag).toBe("Reconcile")
          if (decision._tag !== "Reconcile") return
          expect(decision.error.sentAtMs).toBe(attempt.sentAtMs)
          expect(decision.error.request).toMatchObject({ type: "limit", symbol: "BTCUSDT", side: "buy" })
          expect(decision.error.reason).toBe(attempt._tag === "Lost" ? attempt.reason : attempt.error === undefined ? "unreadable-answer" : "server-error")
        } else expect(decision._tag).not.toBe("Reconcile")
      })
    )
  })

  it("property: only reads and cancels are retried, only after a 5xx or no answer, at most maxRetries times, each delay capped", () => {
    fc.assert(
      fc.property(arbRequest, arbAttempt, arbState, fc.integer(), arbOptions, (request, attempt, state, offset, options) => {
        const decision = decideRetry(request, attempt, state, offset, options)
        const passing = attempt._tag === "Lost" || attempt.error?._tag === "ServerUnavailable"
        const retriable = request.method === "GET" || request.kind === "cancel"
        expect(decision._tag === "Retry").toBe(passing && retriable && state.retries < options.maxRetries)
        if (decision._tag !== "Retry") return
        expect(decision.retry).toBe(state.retries + 1)
        expect(decision.ceilingMs).toBe(Math.min(options.maxDelayMs, options.baseDelayMs * 2 ** state.retries))
        expect(decision.error._tag).toBe(attempt._tag === "Lost" ? "NetworkError" : "ServerUnavailable")
        expect(afterDecision(state, decision)).toEqual({ ...state, retries: state.retries + 1 })
      })
    )
  })

  it("property: the jittered delay lies between half the ceiling and the ceiling", () => {
    fc.assert(
      fc.property(fc.nat(100_000), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (ceilingMs, jitter) => {
        const delayMs = jitteredDelayMs(ceilingMs, jitter)
        expect(delayMs).toBeGreaterThanOrEqual(Math.floor(ceilingMs / 2))
        expect(delayMs).toBeLessThanOrEqual(ceilingMs)
      })
    )
    expect(jitteredDelayMs(2_000, 0)).toBe(1_000)
  })

  it("property: what is neither passing nor a timestamp to correct ends the request with its own error", () => {
    fc.assert(
      fc.property(arbRequest, arbAttempt, arbState, fc.integer(), arbOptions, (request, attempt, state, offset, options) => {
        const decision = decideRetry(request, attempt, state, offset, options)
        if (decision._tag !== "GiveUp") return
        if (attempt._tag === "Lost") expect(decision.error).toMatchObject({ _tag: "NetworkError", reason: attempt.reason, detail: attempt.detail })
        else expect(decision.error).toBe(attempt.error ?? attempt.unreadable)
        // A placement gives up only when it never reached the server, or was refused outright.
        if (request.kind === "placement") {
          if (attempt._tag === "Lost") expect(attempt.neverSent).toBe(true)
          else expect(attempt.error?._tag ?? "unreadable").not.toMatch(/^(ServerUnavailable|unreadable)$/)
        }
      })
    )
  })

  it("a refused timestamp corrects the clock the first time, a second time only when the server's clock stepped meanwhile, never a third", () => {
    const refusal = (serverTimeMs: number | null, sentAt: number, receivedAt: number) =>
      answered(400, new ApiKeyTimestampInvalid({ endpoint, serverTimeMs, reason: "ahead" }), sentAt, receivedAt)
    const decide = (attempt: FailedAttempt, state: RetryState, offset: number) => decideRetry(placement, attempt, state, offset, defaultRetryOptions)

    // First refusal: the server read its clock at 61_000 when the midpoint of the round trip was 1_025 here.
    const first = decide(refusal(61_000, 1_000, 1_050), initialRetryState, 0)
    expect(first).toEqual({ _tag: "CorrectClock", serverTimeMs: 61_000, reason: "ahead", sentAtLocalMs: 1_000, receivedAtLocalMs: 1_050 })
    const once = afterDecision(initialRetryState, first)
    expect(once).toEqual({ retries: 0, clockCorrections: 1 })

    // Refused again with the learned offset (59_975): the estimate moved by 15 ms within a 50 ms round trip, so another try would fail the same way.
    expect(decide(refusal(61_085, 1_100, 1_150), once, 59_975)._tag).toBe("GiveUp")
    // The server's clock stepped by a second meanwhile: it is followed once more.
    const stepped = decide(refusal(62_100, 1_100, 1_150), once, 59_975)
    expect(stepped._tag).toBe("CorrectClock")
    // Never a third time, and never without the server's time.
    expect(decide(refusal(90_000, 1_200, 1_250), afterDecision(once, stepped), 60_000)._tag).toBe("GiveUp")
    expect(decide(refusal(null, 1_000, 1_050), initialRetryState, 0)).toMatchObject({ _tag: "GiveUp", error: { _tag: "ApiKeyTimestampInvalid" } })
  })

  it("property: any run of failing attempts ends, after at most maxRetries retries and MAX_CLOCK_CORRECTIONS corrections", () => {
    fc.assert(
      fc.property(arbRequest, fc.array(arbAttempt, { minLength: 20, maxLength: 20 }), arbOptions, (request, attempts, options) => {
        let state = initialRetryState
        let decision: RetryDecision | undefined
        for (const attempt of attempts) {
          decision = decideRetry(request, attempt, state, 0, options)
          state = afterDecision(state, decision)
          if (decision._tag === "Reconcile" || decision._tag === "GiveUp") break
        }
        expect(state.retries).toBeLessThanOrEqual(options.maxRetries)
        expect(state.clockCorrections).toBeLessThanOrEqual(MAX_CLOCK_CORRECTIONS)
        // 20 attempts are more than the most a request is sent (maxRetries + MAX_CLOCK_CORRECTIONS + 1).
        expect(decision?._tag === "Reconcile" || decision?._tag === "GiveUp").toBe(true)
      })
    )
  })
})
