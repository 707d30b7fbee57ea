/**
 * The rules a placement must meet before the engine accepts it (positive amounts on the
 * pair's tick and step, minimum quantity and notional, a slippage bound in range), and
 * the refusals that name the field and the reason when it does not.
 */
import { compare, type Decimal, isMultipleOf, sign } from "../domain/Decimal.js"
import { MAX_SLIPPAGE_BPS } from "../svc/Dialect.js"
import { ErrorCode } from "../svc/ErrorCodes.js"
import type { PairSpec, PlaceRequest } from "./Orders.js"

/** A request the engine refuses outright (nothing is accepted); status is the HTTP status svc-venue answers with. */
export interface Refusal {
  readonly ok: false
  readonly status: 400 | 404 | 409
  readonly code: string
  readonly msg: string
  readonly field?: string
  readonly reason?: string
}

export const refuse = (status: Refusal["status"], code: string, msg: string, field?: string, reason?: string): Refusal => ({
  ok: false,
  status,
  code,
  msg,
  ...(field === undefined ? {} : { field }),
  ...(reason === undefined ? {} : { reason })
})

/** Error codes of placement and cancel refusals (HTTP 400/404/409). */
export const RefusalCode = {
  invalidParameter: "INVALID_PARAMETER",
  unknownSymbol: "UNKNOWN_SYMBOL",
  orderNotFound: ErrorCode.orderNotFound,
  orderNotOpen: ErrorCode.orderNotOpen
} as const

// Validation steps are module functions, not closures made per placement: placing is a hot path of a backtest.
const positiveProblem = (field: string, value: Decimal, step: Decimal, stepName: string): Refusal | undefined => {
  if (!value.isFinite() || sign(value) <= 0) return refuse(400, RefusalCode.invalidParameter, `${field} must be greater than 0`, field, "not-positive")
  if (!isMultipleOf(value, step)) {
    return refuse(400, RefusalCode.invalidParameter, `${field} must be a multiple of the ${stepName} ${step.toFixed()}`, field, stepName === "tick size" ? "tick-size" : "step-size")
  }
  return undefined
}

const notionalProblem = (pair: PairSpec, value: Decimal): Refusal | undefined =>
  compare(value, pair.minNotional) < 0
    ? refuse(400, RefusalCode.invalidParameter, `order value ${value.toFixed()} is below the minimum notional ${pair.minNotional.toFixed()}`, "baseQty", "below-min-notional")
    : undefined

const baseQtyProblem = (pair: PairSpec, value: Decimal): Refusal | undefined =>
  positiveProblem("baseQty", value, pair.stepSize, "step size") ??
  (compare(value, pair.minBaseQty) < 0 ? refuse(400, RefusalCode.invalidParameter, `baseQty is below the minimum ${pair.minBaseQty.toFixed()}`, "baseQty", "below-min-base-qty") : undefined)

/** Why `request` cannot be placed on `pair`, or undefined; a market sell's notional is checked at `price` when there is one. */
export const placementProblem = (pair: PairSpec, request: PlaceRequest, price: Decimal | undefined): Refusal | undefined => {
  switch (request.type) {
    case "limit":
      return (
        baseQtyProblem(pair, request.baseQty) ??
        positiveProblem("limitPrice", request.limitPrice, pair.tickSize, "tick size") ??
        notionalProblem(pair, request.baseQty.mul(request.limitPrice))
      )
    case "stop-limit":
      return (
        baseQtyProblem(pair, request.baseQty) ??
        positiveProblem("limitPrice", request.limitPrice, pair.tickSize, "tick size") ??
        positiveProblem("stopPrice", request.stopPrice, pair.tickSize, "tick size") ??
        notionalProblem(pair, request.baseQty.mul(request.limitPrice))
      )
    case "market": {
      const bps = request.maxSlippageBps
      if (!Number.isInteger(bps) || bps < MAX_SLIPPAGE_BPS.min || bps > MAX_SLIPPAGE_BPS.max) {
        return refuse(400, RefusalCode.invalidParameter, `maxSlippageBps must be an integer from ${MAX_SLIPPAGE_BPS.min} to ${MAX_SLIPPAGE_BPS.max}`, "maxSlippageBps", "out-of-range")
      }
      if (request.side === "buy") {
        const quoteQty = request.quoteOrderQty
        if (!quoteQty.isFinite() || sign(quoteQty) <= 0) {
          return refuse(400, RefusalCode.invalidParameter, "quoteOrderQty must be greater than 0", "quoteOrderQty", "not-positive")
        }
        return compare(quoteQty, pair.minNotional) < 0
          ? refuse(400, RefusalCode.invalidParameter, `quoteOrderQty is below the minimum notional ${pair.minNotional.toFixed()}`, "quoteOrderQty", "below-min-notional")
          : undefined
      }
      return baseQtyProblem(pair, request.baseQty) ?? (price === undefined ? undefined : notionalProblem(pair, request.baseQty.mul(price)))
    }
  }
}
