/**
 * The `/_venue` admin routes: what the website does for a real account (accounts,
 * balances, keys, revocation, password change, account status), plus test controls
 * (tape, pair status, fault profiles, every order and fill of an account). Loopback
 * only and unsigned; never under /api. docs/venue.md documents each route.
 */
import { Either, Schema } from "effect"
import { fromString, InvalidDecimal, type Decimal } from "../domain/Decimal.js"
import { isLosslessNumber, parse as parseJson } from "../domain/Json.js"
import { AccountStatus, generateKeyPair, MAX_WHITELIST, Permission } from "./Accounts.js"
import { FaultProfile } from "./Faults.js"
import { answer, failure, fillJson, isAnswer, orderJson, VenueCode, type VenueAnswer } from "./Answers.js"
import type { VenueState } from "./VenueState.js"

/** Amounts in admin bodies may be decimal strings or JSON numbers, within the bounds of `fromString`. */
const Amount = Schema.Union(Schema.String, Schema.Unknown.pipe(Schema.filter((u) => isLosslessNumber(u) || "expected an amount"))).pipe(
  Schema.filter((u) => {
    try {
      fromString(typeof u === "string" ? u : (u as { value: string }).value)
      return true
    } catch (error) {
      return `expected a plain decimal amount such as "100.5"${error instanceof InvalidDecimal ? ` (${error.problem})` : ""}`
    }
  })
)
const toDecimal = (u: unknown): Decimal => fromString(typeof u === "string" ? u : (u as { value: string }).value)

/** Integers arrive as exact number tokens; this reads them as safe JS integers. */
const Int = Schema.Unknown.pipe(
  Schema.filter((u) => (isLosslessNumber(u) && /^-?\d{1,15}$/.test(u.value)) || typeof u === "number" || "expected an integer"),
  Schema.transform(Schema.Number, { decode: (u) => (isLosslessNumber(u) ? Number(u.value) : (u as number)), encode: (n) => n, strict: false })
)

const Balances = Schema.Record({ key: Schema.String, value: Amount })

const bodies = {
  createAccount: Schema.Struct({ uid: Schema.optional(Int), balances: Schema.optional(Balances) }),
  balances: Schema.Struct({ uid: Int, balances: Schema.optional(Balances), funding: Schema.optional(Balances) }),
  createKey: Schema.Struct({
    uid: Int,
    permissions: Schema.Array(Permission).pipe(Schema.minItems(1)),
    whitelist: Schema.optional(Schema.Array(Schema.String).pipe(Schema.maxItems(MAX_WHITELIST))),
    createdAt: Schema.optional(Schema.String),
    label: Schema.optional(Schema.String),
    id: Schema.optional(Schema.String),
    secret: Schema.optional(Schema.String)
  }),
  revokeKey: Schema.Struct({ keyId: Schema.String }),
  passwordChange: Schema.Struct({ uid: Int, change: Schema.optional(Schema.Literal("password", "email", "2fa")) }),
  accountStatus: Schema.Struct({ uid: Int, status: AccountStatus }),
  tape: Schema.Struct({ symbol: Schema.optional(Schema.String), price: Schema.optional(Amount), steps: Schema.optional(Int) }),
  pairStatus: Schema.Struct({ symbol: Schema.String, status: Schema.Literal("trading", "halted") })
}

const decode = <A, I>(schema: Schema.Schema<A, I>, raw: Uint8Array): A | VenueAnswer => {
  let value: unknown = {}
  if (raw.length > 0) {
    try {
      value = parseJson(new TextDecoder().decode(raw))
    } catch {
      return failure(400, VenueCode.invalidJson, "the body is not valid JSON")
    }
  }
  const result = Schema.decodeUnknownEither(schema, { errors: "all" })(value)
  return Either.isLeft(result) ? failure(400, VenueCode.invalidParameter, result.left.message) : result.right
}

/** Fault profiles are plain JSON numbers; lossless tokens become JS numbers first. */
const plainNumbers = (value: unknown): unknown => {
  if (isLosslessNumber(value)) return Number(value.value)
  if (Array.isArray(value)) return value.map(plainNumbers)
  if (value !== null && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plainNumbers(v)]))
  return value
}

const noAccount = (uid: number): VenueAnswer => failure(404, VenueCode.notFound, `no account ${uid}`)

const balanceRows = (venue: VenueState, uid: number) =>
  venue.engine.balances(uid).map((row) => ({ asset: row.asset, free: row.free.toFixed(), locked: row.locked.toFixed() }))

const keyJson = (key: { id: string; uid: number; label: string; permissions: ReadonlyArray<string>; whitelist: ReadonlySet<string>; createdAtMs: number; expiresAtMs: number | undefined; revoked: boolean }) => ({
  id: key.id,
  uid: key.uid,
  label: key.label,
  permissions: key.permissions,
  whitelist: [...key.whitelist],
  createdAt: new Date(key.createdAtMs).toISOString(),
  expiresAt: key.expiresAtMs === undefined ? null : new Date(key.expiresAtMs).toISOString(),
  revoked: key.revoked
})

export const handleAdmin = (venue: VenueState, method: string, path: string, query: string, raw: Uint8Array, nowMs: number): VenueAnswer => {
  const route = `${method} ${path}`
  const uidParam = (): number | VenueAnswer => {
    const uid = new URLSearchParams(query).get("uid")
    return uid !== null && /^\d{1,15}$/.test(uid) ? Number(uid) : failure(400, VenueCode.invalidParameter, "query uid is required")
  }
  switch (route) {
    case "GET /_venue/health":
      return answer(200, { ok: true, time: nowMs })
    case "GET /_venue/accounts":
      return answer(200, {
        ok: true,
        accounts: venue.accounts.accountList().map((a) => ({ uid: a.uid, status: a.status, balances: balanceRows(venue, a.uid), keys: venue.accounts.keysOf(a.uid).map(keyJson) }))
      })
    case "POST /_venue/accounts": {
      const body = decode(bodies.createAccount, raw)
      if (isAnswer(body)) return body
      const uid = body.uid ?? Math.max(1000, ...venue.accounts.accountList().map((a) => a.uid)) + 1
      venue.accounts.createAccount(uid)
      venue.engine.openAccount(uid)
      for (const [asset, amount] of Object.entries(body.balances ?? {})) venue.engine.setBalance(uid, asset, toDecimal(amount))
      return answer(200, { ok: true, uid, balances: balanceRows(venue, uid) })
    }
    case "POST /_venue/balances": {
      const body = decode(bodies.balances, raw)
      if (isAnswer(body)) return body
      const account = venue.accounts.account(body.uid)
      if (account === undefined) return noAccount(body.uid)
      for (const [asset, amount] of Object.entries(body.balances ?? {})) venue.engine.setBalance(body.uid, asset, toDecimal(amount))
      for (const [asset, amount] of Object.entries(body.funding ?? {})) account.funding.set(asset, toDecimal(amount))
      return answer(200, { ok: true, uid: body.uid, balances: balanceRows(venue, body.uid) })
    }
    case "POST /_venue/keys": {
      const body = decode(bodies.createKey, raw)
      if (isAnswer(body)) return body
      const generated = generateKeyPair(venue.randomBytes)
      const createdAtMs = body.createdAt === undefined ? nowMs : Date.parse(body.createdAt)
      if (Number.isNaN(createdAtMs)) return failure(400, VenueCode.invalidParameter, "createdAt must be an ISO date such as 2026-11-01T00:00:00Z")
      const added = venue.accounts.addKey(body.uid, {
        id: body.id ?? generated.id,
        secret: body.secret ?? generated.secret,
        label: body.label ?? "",
        permissions: body.permissions,
        whitelist: body.whitelist ?? [],
        createdAtMs
      })
      if (typeof added === "string") return failure(400, VenueCode.invalidParameter, added)
      // The secret is shown once, at creation, as on the website.
      return answer(200, { ok: true, ...keyJson(added), secret: added.secret })
    }
    case "POST /_venue/keys/revoke": {
      const body = decode(bodies.revokeKey, raw)
      if (isAnswer(body)) return body
      return venue.accounts.revokeKey(body.keyId) ? answer(200, { ok: true, keyId: body.keyId }) : failure(404, VenueCode.notFound, "no such key")
    }
    case "POST /_venue/password-change": {
      const body = decode(bodies.passwordChange, raw)
      if (isAnswer(body)) return body
      if (venue.accounts.account(body.uid) === undefined) return noAccount(body.uid)
      return answer(200, { ok: true, uid: body.uid, change: body.change ?? "password", revokedKeys: venue.accounts.revokeAll(body.uid) })
    }
    case "POST /_venue/account-status": {
      const body = decode(bodies.accountStatus, raw)
      if (isAnswer(body)) return body
      const account = venue.accounts.account(body.uid)
      if (account === undefined) return noAccount(body.uid)
      account.status = body.status
      return answer(200, { ok: true, uid: body.uid, status: body.status })
    }
    case "GET /_venue/orders": {
      const uid = uidParam()
      if (typeof uid !== "number") return uid
      return answer(200, { ok: true, uid, orders: venue.engine.allOrders(uid).map(orderJson) })
    }
    case "GET /_venue/fills": {
      const uid = uidParam()
      if (typeof uid !== "number") return uid
      return answer(200, { ok: true, uid, fills: venue.engine.allFills(uid).map(fillJson) })
    }
    case "POST /_venue/tape": {
      const body = decode(bodies.tape, raw)
      if (isAnswer(body)) return body
      if (body.price !== undefined) {
        if (body.symbol === undefined) return failure(400, VenueCode.invalidParameter, "symbol is required with price")
        if (!venue.setPrice(body.symbol, toDecimal(body.price))) return failure(404, VenueCode.notFound, `no pair ${body.symbol}`)
      } else {
        const steps = Math.min(Math.max(body.steps ?? 1, 0), 10_000)
        for (let i = 0; i < steps; i++) venue.stepTapes()
      }
      return answer(200, { ok: true, prices: Object.fromEntries([...venue.tapes].map(([symbol, tape]) => [symbol, tape.price.toFixed()])) })
    }
    case "GET /_venue/tape":
      return answer(200, { ok: true, prices: Object.fromEntries([...venue.tapes].map(([symbol, tape]) => [symbol, tape.price.toFixed()])) })
    case "POST /_venue/pair-status": {
      const body = decode(bodies.pairStatus, raw)
      if (isAnswer(body)) return body
      return venue.engine.setPairStatus(body.symbol, body.status) ? answer(200, { ok: true, symbol: body.symbol, status: body.status }) : failure(404, VenueCode.notFound, `no pair ${body.symbol}`)
    }
    case "GET /_venue/faults":
      return answer(200, { ok: true, faults: venue.faults.current })
    case "POST /_venue/faults": {
      let value: unknown = {}
      try {
        value = raw.length === 0 ? {} : plainNumbers(parseJson(new TextDecoder().decode(raw)))
      } catch {
        return failure(400, VenueCode.invalidJson, "the body is not valid JSON")
      }
      const result = Schema.decodeUnknownEither(FaultProfile, { errors: "all" })(value)
      if (Either.isLeft(result)) return failure(400, VenueCode.invalidParameter, result.left.message)
      venue.applyFaults(result.right)
      return { ...answer(200, { ok: true, faults: venue.faults.current }), event: { name: "venue.fault", fields: { faults: venue.faults.current } } }
    }
    case "POST /_venue/settle":
      venue.settle()
      return answer(200, { ok: true })
    default:
      return failure(404, VenueCode.notFound, `no admin route ${route}`)
  }
}
