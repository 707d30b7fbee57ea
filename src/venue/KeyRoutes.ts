/**
 * The endpoints a signed key request reaches, each with the scope it needs, the weight it
 * costs and whether it places or cancels; Venue.ts runs the checks before any of them.
 */
import { type Decimal, toJsonNumber } from "../domain/Decimal.js"
import type { Dialect } from "../svc/Dialect.js"
import { ErrorCode, Scope } from "../svc/ErrorCodes.js"
import type { ApiKey, Weights } from "./Accounts.js"
import { amountText, answer, failure, fillsPageAnswer, isAnswer, JSON_HEADERS, orderJson, plainAnswer, type VenueAnswer } from "./Answers.js"
import { asObject, intParam, invalid, placeRequest, stringField } from "./Fields.js"
import type { BalanceRow, PlaceRequest } from "./Orders.js"
import type { Refusal } from "./PlaceRules.js"
import type { VenueState } from "./VenueState.js"

type Kind = "read" | "placement" | "cancel"

export interface KeyRoute {
  readonly scope: Scope
  readonly weight: keyof Weights
  readonly kind: Kind
  readonly run: (venue: VenueState, key: ApiKey, query: URLSearchParams, body: unknown, nowMs: number) => VenueAnswer
}

const refusalAnswer = (r: Refusal): VenueAnswer =>
  failure(r.status, r.code, r.msg, { ...(r.field === undefined ? {} : { field: r.field }), ...(r.reason === undefined ? {} : { reason: r.reason }) })

/**
 * The spot wallet answer, written directly: it is the most frequent read, and each row
 * is three known fields (`balance` a JSON number, `locked` a string).
 */
const walletsJson = (rows: ReadonlyArray<BalanceRow>): string => {
  let out = "["
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!
    out += `${i === 0 ? "" : ","}{"asset":${JSON.stringify(row.asset)},"balance":${toJsonNumber(row.free)},"locked":"${toJsonNumber(row.locked)}"}`
  }
  return `${out}]`
}

const encodeCursor = (seq: number): string => Buffer.from(`fills:${seq}`, "utf8").toString("base64url")
const decodeCursor = (cursor: string): number | undefined => {
  const text = Buffer.from(cursor, "base64url").toString("utf8")
  const match = /^fills:(\d{1,15})$/.exec(text)
  return match === null ? undefined : Number(match[1])
}

const DEFAULT_FILLS_LIMIT = 50
/** The most fills one page holds: the largest legitimate answer, which the client's answer size bound is set from. */
export const MAX_FILLS_LIMIT = 500

const placement =
  (type: PlaceRequest["type"]) =>
  (venue: VenueState, key: ApiKey, _query: URLSearchParams, body: unknown, nowMs: number): VenueAnswer => {
    const request = placeRequest(type, body)
    if (isAnswer(request)) return request
    const result = venue.engine.place(key.uid, request, nowMs)
    if (!result.ok) return refusalAnswer(result)
    return { ...answer(202, { clientOrderId: result.clientOrderId, status: "accepted" }), dropResponse: venue.faults.dropAccepted() }
  }

export const keyRoutes = (dialect: Dialect): ReadonlyMap<string, KeyRoute> => {
  const p = dialect.paths
  const routes: Array<[string, KeyRoute]> = [
    [
      `GET ${p.walletsSpot}`,
      {
        scope: Scope.walletRead,
        weight: "walletsSpot",
        kind: "read",
        run: (venue, key) => ({ status: 200, headers: JSON_HEADERS(), body: walletsJson(venue.engine.balances(key.uid)) })
      }
    ],
    [
      `GET ${p.walletsFunding}`,
      {
        scope: Scope.walletRead,
        weight: "walletsFunding",
        kind: "read",
        run: (venue, key) =>
          answer(
            200,
            [...(venue.accounts.account(key.uid)?.funding ?? new Map<string, Decimal>())].map(([asset, balance]) => ({ asset, balance: amountText(balance) }))
          )
      }
    ],
    [
      `GET ${p.openOrders}`,
      {
        scope: Scope.spotRead,
        weight: "openOrders",
        kind: "read",
        run: (venue, key, query) => {
          const symbol = query.get("symbol")
          return plainAnswer(200, venue.engine.openOrders(key.uid, symbol === null || symbol === "" ? undefined : symbol).map(orderJson))
        }
      }
    ],
    [
      `GET ${p.fills}`,
      {
        scope: Scope.spotRead,
        weight: "fills",
        kind: "read",
        run: (venue, key, query) => {
          const limit = intParam(query, "limit", DEFAULT_FILLS_LIMIT, 1, MAX_FILLS_LIMIT)
          if (typeof limit !== "number") return limit
          const before = query.get("before")
          const beforeSeq = before === null || before === "" ? undefined : decodeCursor(before)
          if (before !== null && before !== "" && beforeSeq === undefined) return invalid("before", "bad-cursor", "before must be a nextCursor value of an earlier answer")
          const symbol = query.get("symbol")
          const page = venue.engine.fills(key.uid, {
            limit,
            ...(beforeSeq === undefined ? {} : { beforeSeq }),
            ...(symbol === null || symbol === "" ? {} : { symbol })
          })
          const last = page.fills[page.fills.length - 1]
          return fillsPageAnswer(page.fills, page.hasOlder && last !== undefined ? encodeCursor(last.seq) : null)
        }
      }
    ],
    [
      `GET ${p.orderStatus}`,
      {
        scope: Scope.spotRead,
        weight: "orderStatus",
        kind: "read",
        run: (venue, key, query) => {
          const id = query.get("clientOrderId")
          if (id === null || id === "") return invalid("clientOrderId", "missing", "clientOrderId is required")
          const order = venue.engine.order(key.uid, id)
          return order === undefined ? failure(404, ErrorCode.orderNotFound, "no order with this clientOrderId", { field: "clientOrderId", reason: "not-found" }) : answer(200, orderJson(order))
        }
      }
    ],
    [`POST ${p.limitOrder}`, { scope: Scope.spotTrade, weight: "limitOrder", kind: "placement", run: placement("limit") }],
    [`POST ${p.marketOrder}`, { scope: Scope.spotTrade, weight: "marketOrder", kind: "placement", run: placement("market") }],
    [`POST ${p.stopLimitOrder}`, { scope: Scope.spotTrade, weight: "stopLimitOrder", kind: "placement", run: placement("stop-limit") }],
    [
      `POST ${p.cancelOrder}`,
      {
        scope: Scope.spotTrade,
        weight: "cancelOrder",
        kind: "cancel",
        run: (venue, key, _query, raw, nowMs) => {
          const body = asObject(raw)
          if (isAnswer(body)) return body
          const id = stringField(body, "clientOrderId")
          if (!id.ok) return id.answer
          const result = venue.engine.cancel(key.uid, id.value, venue.cancelStamp(nowMs))
          return result.ok ? answer(200, { ok: true, clientOrderId: result.clientOrderId, kind: result.kind }) : refusalAnswer(result)
        }
      }
    ]
  ]
  return new Map(routes)
}
