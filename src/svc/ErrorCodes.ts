/** The stable error codes of the SVC API, shared by the client and svc-venue. */
export const ErrorCode = {
  apiKeyMalformed: "API_KEY_MALFORMED",
  apiKeyTimestampInvalid: "API_KEY_TIMESTAMP_INVALID",
  apiKeyReplayed: "API_KEY_REPLAYED",
  apiKeyInvalid: "API_KEY_INVALID",
  apiKeyNotPermitted: "API_KEY_NOT_PERMITTED",
  accountFrozen: "ACCOUNT_FROZEN",
  geoRestrictedIp: "GEO_RESTRICTED_IP",
  legalAcceptanceRequired: "LEGAL_ACCEPTANCE_REQUIRED",
  rateLimited: "RATE_LIMITED",
  /** Not shown by the spec: the code svc-venue puts on a failed-auth 429 (clients treat any 429 without a bucket as this). */
  authBlocked: "AUTH_BLOCKED",
  /** Not shown by the spec: svc-venue's 404 for a clientOrderId it has no order for (status and cancel). */
  orderNotFound: "ORDER_NOT_FOUND",
  /** Not shown by the spec: svc-venue's 409 for a cancel of an order that is not open. */
  orderNotOpen: "ORDER_NOT_OPEN"
} as const
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode]

/** The code of a placement the client did not send because its circuit for the venue was open (svcbot's, not the spec's). */
export const CIRCUIT_OPEN = "CIRCUIT_OPEN"

/**
 * Refusal codes that say nothing of the placement refused: the key is over its rate budget, blocked
 * for a moment after a failed authentication, or the client holds requests while the venue fails.
 * Each ends by itself, so none counts towards a strategy instance's back-pressure, whose pause
 * waits for an operator.
 */
export const TRANSIENT_REFUSALS: ReadonlySet<string> = new Set([ErrorCode.rateLimited, ErrorCode.authBlocked, CIRCUIT_OPEN])

/** Scopes held by each permission. Trade always includes Read. */
export const Scope = {
  spotRead: "spot.read",
  walletRead: "wallet.read",
  accountRead: "account.read",
  spotTrade: "spot.trade"
} as const
export type Scope = (typeof Scope)[keyof typeof Scope]

export const PermissionScopes: Readonly<Record<"read" | "trade", ReadonlyArray<Scope>>> = {
  read: [Scope.spotRead, Scope.walletRead, Scope.accountRead],
  trade: [Scope.spotTrade, Scope.spotRead, Scope.walletRead, Scope.accountRead]
}
