/**
 * Accounts, API keys and the venue's configuration as the accounts file writes them
 * (`--accounts FILE`, docs/venue.md). Keys hold their permissions, whitelist and
 * creation time; revocation and the account status are what the website would change.
 */
import { Either, Schema } from "effect"
import { type Decimal, fromString } from "../domain/Decimal.js"
import { keyIdProblem, secretProblem } from "../svc/Signer.js"
import { PermissionScopes, type Scope, ErrorCode } from "../svc/ErrorCodes.js"
import { registerSecret } from "../log/Redaction.js"
import type { Fees } from "./Matching.js"
import type { PairSpec } from "./Orders.js"

const DecimalText = Schema.String.pipe(
  Schema.filter((text) => {
    try {
      fromString(text)
      return true
    } catch (error) {
      // The refusal shows the text cut short (InvalidDecimal's message): a file may hold any length of digits.
      return `expected a decimal string such as "0.01" (${error instanceof Error ? error.message : String(error)})`
    }
  })
)

export const Permission = Schema.Literal("read", "trade")
export type Permission = typeof Permission.Type

export const MAX_WHITELIST = 20

export const KeyEntry = Schema.Struct({
  id: Schema.String.pipe(Schema.filter((id) => keyIdProblem(id) ?? true)),
  secret: Schema.String.pipe(Schema.filter((secret) => secretProblem(secret) ?? true)),
  label: Schema.optionalWith(Schema.String, { default: () => "" }),
  permissions: Schema.Array(Permission).pipe(Schema.minItems(1)),
  whitelist: Schema.optionalWith(Schema.Array(Schema.String).pipe(Schema.maxItems(MAX_WHITELIST)), { default: () => [] }),
  /** ISO time; when absent the key is created when the venue starts. */
  createdAt: Schema.optional(Schema.String.pipe(Schema.filter((t) => !Number.isNaN(Date.parse(t)) || "expected an ISO date such as 2026-11-01T00:00:00Z")))
})
export type KeyEntry = typeof KeyEntry.Type

export const AccountEntry = Schema.Struct({
  uid: Schema.Int,
  balances: Schema.optionalWith(Schema.Record({ key: Schema.String, value: DecimalText }), { default: () => ({}) }),
  funding: Schema.optionalWith(Schema.Record({ key: Schema.String, value: DecimalText }), { default: () => ({}) }),
  keys: Schema.optionalWith(Schema.Array(KeyEntry), { default: () => [] })
})
export type AccountEntry = typeof AccountEntry.Type

export const PairEntry = Schema.Struct({
  symbol: Schema.String.pipe(Schema.pattern(/^[A-Z0-9]{2,20}$/)),
  base: Schema.String,
  quote: Schema.String,
  tickSize: DecimalText,
  stepSize: DecimalText,
  minBaseQty: DecimalText,
  minNotional: DecimalText,
  price: DecimalText,
  status: Schema.optionalWith(Schema.Literal("trading", "halted"), { default: () => "trading" as const }),
  /** Quote value of the first level of the synthetic book on each side. */
  depthNotional: Schema.optionalWith(DecimalText, { default: () => "25000" })
})
export type PairEntry = typeof PairEntry.Type

export const Weights = Schema.Struct({
  walletsSpot: Schema.Int,
  walletsFunding: Schema.Int,
  openOrders: Schema.Int,
  fills: Schema.Int,
  orderStatus: Schema.Int,
  limitOrder: Schema.Int,
  marketOrder: Schema.Int,
  stopLimitOrder: Schema.Int,
  cancelOrder: Schema.Int
})
export type Weights = typeof Weights.Type

export const defaultWeights: Weights = {
  walletsSpot: 1,
  walletsFunding: 1,
  openOrders: 2,
  fills: 5,
  orderStatus: 1,
  limitOrder: 1,
  marketOrder: 1,
  stopLimitOrder: 1,
  cancelOrder: 1
}

export const LimitsEntry = Schema.Struct({
  weightPerMinute: Schema.Int.pipe(Schema.positive()),
  ordersPer10s: Schema.Int.pipe(Schema.positive()),
  ordersPerDay: Schema.Int.pipe(Schema.positive()),
  authFailuresBeforeBlock: Schema.Int.pipe(Schema.positive()),
  authBlockSeconds: Schema.Int.pipe(Schema.positive()),
  /** Length of the weight window; one minute unless a benchmark shortens it. */
  weightWindowMs: Schema.optionalWith(Schema.Int.pipe(Schema.positive()), { default: () => 60_000 }),
  weights: Schema.optionalWith(Schema.partialWith(Weights, { exact: true }), { default: () => ({}) })
})
export type LimitsEntry = typeof LimitsEntry.Type

export const AccountsFile = Schema.Struct({
  accounts: Schema.Array(AccountEntry),
  pairs: Schema.Array(PairEntry).pipe(Schema.minItems(1)),
  limits: LimitsEntry,
  fees: Schema.Struct({ maker: DecimalText, taker: DecimalText })
})
export type AccountsFile = typeof AccountsFile.Encoded

export class InvalidAccounts extends Error {
  override readonly name = "InvalidAccounts"
}

/** Validates an accounts document (already parsed JSON); the message names every bad field. */
export const decodeAccounts = (input: unknown): typeof AccountsFile.Type => {
  const result = Schema.decodeUnknownEither(AccountsFile, { errors: "all" })(input)
  if (Either.isLeft(result)) throw new InvalidAccounts(`invalid accounts file:\n${String(result.left.message)}`)
  const file = result.right
  const ids = new Set<string>()
  for (const account of file.accounts) {
    for (const key of account.keys) {
      if (ids.has(key.id)) throw new InvalidAccounts(`invalid accounts file: key ${key.id} appears twice`)
      ids.add(key.id)
    }
  }
  return file
}

const devId = (name: string): string => `svk_live_${name.padEnd(22, "0")}`
const devSecret = (name: string): string => `svs_live_${`dev${name}secret`.padEnd(49, "0")}`

/**
 * The built-in development accounts: well-known test keys of the embedded venue (fine
 * to print; they open nothing but this venue). The trade key is created when the venue
 * starts, so it never expires during a run.
 */
export const devAccounts: AccountsFile = {
  accounts: [
    {
      uid: 1001,
      balances: { USDT: "100000", BTC: "2", ETH: "20" },
      funding: { USDT: "0" },
      keys: [
        { id: devId("devtrade"), secret: devSecret("trade"), label: "bot", permissions: ["read", "trade"], whitelist: [] },
        { id: devId("devread"), secret: devSecret("read"), label: "dashboard", permissions: ["read"], whitelist: [] }
      ]
    }
  ],
  pairs: [
    { symbol: "BTCUSDT", base: "BTC", quote: "USDT", tickSize: "0.01", stepSize: "0.00001", minBaseQty: "0.00001", minNotional: "5", price: "60000", status: "trading" },
    { symbol: "ETHUSDT", base: "ETH", quote: "USDT", tickSize: "0.01", stepSize: "0.0001", minBaseQty: "0.0001", minNotional: "5", price: "3000", status: "trading" }
  ],
  limits: { weightPerMinute: 1200, ordersPer10s: 50, ordersPerDay: 100000, authFailuresBeforeBlock: 5, authBlockSeconds: 180 },
  fees: { maker: "0.001", taker: "0.001" }
}

/** The dev trade key (read + trade) of account 1001. */
export const devTradeKey = { keyId: devId("devtrade"), secret: devSecret("trade"), uid: 1001 } as const
/** The dev read-only key of account 1001. */
export const devReadKey = { keyId: devId("devread"), secret: devSecret("read"), uid: 1001 } as const

export const toPairSpec = (entry: PairEntry): PairSpec => ({
  symbol: entry.symbol,
  base: entry.base,
  quote: entry.quote,
  tickSize: fromString(entry.tickSize),
  stepSize: fromString(entry.stepSize),
  minBaseQty: fromString(entry.minBaseQty),
  minNotional: fromString(entry.minNotional),
  status: entry.status,
  depthNotional: fromString(entry.depthNotional)
})

export const toFees = (fees: { readonly maker: string; readonly taker: string }): Fees => ({ maker: fromString(fees.maker), taker: fromString(fees.taker) })

// ---- keys and account status -------------------------------------------------

/** A trade key without a whitelist expires this long after creation. */
export const TRADE_KEY_LIFETIME_MS = 90 * 24 * 60 * 60 * 1000

export const AccountStatus = Schema.Literal("active", "frozen", "geo-restricted", "legal-acceptance-required")
export type AccountStatus = typeof AccountStatus.Type

/** The 403 code each blocked account status answers order placements with. */
export const accountStatusCode: Readonly<Record<Exclude<AccountStatus, "active">, string>> = {
  frozen: ErrorCode.accountFrozen,
  "geo-restricted": ErrorCode.geoRestrictedIp,
  "legal-acceptance-required": ErrorCode.legalAcceptanceRequired
}

export interface ApiKey {
  readonly id: string
  readonly secret: string
  readonly uid: number
  readonly label: string
  readonly permissions: ReadonlyArray<Permission>
  readonly scopes: ReadonlySet<Scope>
  readonly whitelist: ReadonlySet<string>
  readonly createdAtMs: number
  /** Undefined for keys that never expire (read-only, or whitelisted). */
  readonly expiresAtMs: number | undefined
  revoked: boolean
}

export interface AccountRecord {
  readonly uid: number
  status: AccountStatus
  readonly funding: Map<string, Decimal>
}

export interface NewKey {
  readonly id: string
  readonly secret: string
  readonly label: string
  readonly permissions: ReadonlyArray<Permission>
  readonly whitelist: ReadonlyArray<string>
  readonly createdAtMs: number
}

/** Accounts and keys as the website keeps them. */
export class AccountBook {
  private readonly accounts = new Map<number, AccountRecord>()
  private readonly keys = new Map<string, ApiKey>()

  account(uid: number): AccountRecord | undefined {
    return this.accounts.get(uid)
  }

  accountList(): ReadonlyArray<AccountRecord> {
    return [...this.accounts.values()]
  }

  createAccount(uid: number): AccountRecord {
    const existing = this.accounts.get(uid)
    if (existing !== undefined) return existing
    const record: AccountRecord = { uid, status: "active", funding: new Map() }
    this.accounts.set(uid, record)
    return record
  }

  /** Adds a key; answers why not when the id is taken or the whitelist too long. */
  addKey(uid: number, key: NewKey): ApiKey | string {
    if (!this.accounts.has(uid)) return `no account ${uid}`
    if (this.keys.has(key.id)) return `key ${key.id} exists`
    if (key.whitelist.length > MAX_WHITELIST) return `a whitelist holds at most ${MAX_WHITELIST} addresses`
    registerSecret(key.secret)
    const scopes = new Set<Scope>(key.permissions.flatMap((p) => PermissionScopes[p]))
    const trade = key.permissions.includes("trade")
    const record: ApiKey = {
      id: key.id,
      secret: key.secret,
      uid,
      label: key.label,
      permissions: [...key.permissions],
      scopes,
      whitelist: new Set(key.whitelist),
      createdAtMs: key.createdAtMs,
      expiresAtMs: trade && key.whitelist.length === 0 ? key.createdAtMs + TRADE_KEY_LIFETIME_MS : undefined,
      revoked: false
    }
    this.keys.set(key.id, record)
    return record
  }

  key(id: string): ApiKey | undefined {
    return this.keys.get(id)
  }

  keysOf(uid: number): ReadonlyArray<ApiKey> {
    return [...this.keys.values()].filter((k) => k.uid === uid)
  }

  revokeKey(id: string): boolean {
    const key = this.keys.get(id)
    if (key === undefined) return false
    key.revoked = true
    return true
  }

  /** A password, email or 2FA change: every key of the account stops working. */
  revokeAll(uid: number): number {
    let count = 0
    for (const key of this.keys.values()) {
      if (key.uid === uid && !key.revoked) {
        key.revoked = true
        count += 1
      }
    }
    return count
  }
}

/** Random key material in the spec's formats, for keys created through the admin route. */
export const generateKeyPair = (random: (size: number) => Uint8Array): { readonly id: string; readonly secret: string } => {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
  const text = (length: number) => [...random(length)].map((b) => alphabet[b % alphabet.length]).join("")
  return { id: `svk_live_${text(22)}`, secret: `svs_live_${text(49)}` }
}
