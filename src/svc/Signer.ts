/**
 * The SVC1 signature, shared by the client (signs) and svc-venue (verifies).
 *
 * Canonical string: seven fields joined by LF, no trailing LF:
 *   SVC1, METHOD (upper case), PATH (as sent, up to the first `?`, not decoded),
 *   QUERY (everything after the first `?`, as sent, empty when none),
 *   TIMESTAMP, RECV_WINDOW, BODY_SHA256 (lowercase hex of the raw body bytes).
 * Signature: lowercase hex HMAC-SHA256 keyed by the whole secret string in UTF-8.
 */
import { createHash, createHmac, createSecretKey, type KeyObject, timingSafeEqual } from "node:crypto"

export const SIGNATURE_TAG = "SVC1"

export const Header = {
  apiKey: "X-SVC-APIKEY",
  timestamp: "X-SVC-TIMESTAMP",
  recvWindow: "X-SVC-RECV-WINDOW",
  signature: "X-SVC-SIGNATURE"
} as const

export type Body = string | Uint8Array | undefined

export interface CanonicalRequest {
  readonly method: string
  /** Path and query exactly as they go on the request line, e.g. `/api/spot/fills?limit=50&before=abc`. */
  readonly target: string
  readonly timestamp: string | number
  readonly recvWindow: string | number
  /** The exact bytes sent; a string is taken as its UTF-8 bytes. */
  readonly body?: Body
}

const bodyBytes = (body: Body): Uint8Array =>
  body === undefined ? new Uint8Array(0) : typeof body === "string" ? Buffer.from(body, "utf8") : body

const isEmpty = (body: Body): boolean => body === undefined || body.length === 0

/** Every GET hashes the empty body: computed once. */
const EMPTY_BODY_SHA256 = createHash("sha256").digest("hex")

export const sha256Hex = (body: Body): string => (isEmpty(body) ? EMPTY_BODY_SHA256 : createHash("sha256").update(bodyBytes(body)).digest("hex"))

/** Splits a request target at the first `?` without decoding either part. */
export const splitTarget = (target: string): { readonly path: string; readonly query: string } => {
  const at = target.indexOf("?")
  return at === -1 ? { path: target, query: "" } : { path: target.slice(0, at), query: target.slice(at + 1) }
}

export const canonicalString = (request: CanonicalRequest): string => {
  const { path, query } = splitTarget(request.target)
  return `${SIGNATURE_TAG}\n${request.method.toUpperCase()}\n${path}\n${query}\n${request.timestamp}\n${request.recvWindow}\n${sha256Hex(request.body)}`
}

/** A KeyObject made from the secret's UTF-8 bytes signs the same as the secret string. */
export const hmacHex = (secret: string | KeyObject, canonical: string): string =>
  createHmac("sha256", typeof secret === "string" ? Buffer.from(secret, "utf8") : secret).update(canonical, "utf8").digest("hex")

export const signature = (secret: string, request: CanonicalRequest): string => hmacHex(secret, canonicalString(request))

/** Constant-time comparison of a presented signature with the expected one. */
export const verifySignature = (secret: string, request: CanonicalRequest, presented: string): boolean => {
  const expected = Buffer.from(signature(secret, request), "utf8")
  const given = Buffer.from(presented, "utf8")
  // timingSafeEqual needs equal lengths; comparing against itself keeps the time flat.
  if (given.length !== expected.length) {
    timingSafeEqual(expected, expected)
    return false
  }
  return timingSafeEqual(expected, given)
}

export interface SignedRequest {
  readonly canonical: string
  readonly signature: string
  readonly headers: Readonly<Record<string, string>>
}

/** The four X-SVC headers, and `Content-Type: application/json` only when there is a body. Never `Authorization`. */
const signedHeaders = (apiKey: string, key: string | KeyObject, request: CanonicalRequest): SignedRequest => {
  const canonical = canonicalString(request)
  const sig = hmacHex(key, canonical)
  const headers: Record<string, string> = {
    [Header.apiKey]: apiKey,
    [Header.timestamp]: String(request.timestamp),
    [Header.recvWindow]: String(request.recvWindow),
    [Header.signature]: sig
  }
  if (!isEmpty(request.body)) headers["Content-Type"] = "application/json"
  return { canonical, signature: sig, headers }
}

/**
 * Signs a request and returns the headers to send: the four X-SVC headers, and
 * `Content-Type: application/json` only when there is a body. Never `Authorization`.
 */
export const signRequest = (apiKey: string, secret: string, request: CanonicalRequest): SignedRequest => signedHeaders(apiKey, secret, request)

/**
 * The signer of one key, for a client that signs every request: the HMAC key is
 * made once from the secret instead of once per request. Same headers as `signRequest`.
 */
export const keySigner = (apiKey: string, secret: string): ((request: CanonicalRequest) => SignedRequest) => {
  const key = createSecretKey(Buffer.from(secret, "utf8"))
  return (request) => signedHeaders(apiKey, key, request)
}

// Key formats. The spec fixes the prefixes and lengths; the character set is not
// shown, so any printable ASCII character other than a space is accepted.
const KEY_ID = /^svk_live_[\x21-\x7e]{22}$/
const SECRET = /^svs_live_[\x21-\x7e]{49}$/

/** Why a key id is malformed, or undefined when it is well formed. Safe to print: the key id is public. */
export const keyIdProblem = (keyId: string): string | undefined => {
  if (!keyId.startsWith("svk_live_")) return "the API key id must start with svk_live_ (copy the key id shown on the website, not the secret)"
  if (keyId.length !== 31) return `the API key id must be svk_live_ followed by 22 characters, but it has ${keyId.length - 9} after the prefix (check for a truncated copy or stray whitespace)`
  if (!KEY_ID.test(keyId)) return "the API key id contains spaces or non-ASCII characters (check for stray whitespace)"
  return undefined
}

/** Why a secret is malformed, or undefined. Never includes any character of the secret. */
export const secretProblem = (secret: string): string | undefined => {
  if (!secret.startsWith("svs_live_")) {
    return secret.startsWith("svk_live_")
      ? "the secret starts with svk_live_: that is the key id; the secret starts with svs_live_"
      : "the API secret must start with svs_live_ (the whole secret, including its prefix, is the HMAC key)"
  }
  if (secret.length !== 58) return `the API secret must be svs_live_ followed by 49 characters, but it has ${secret.length - 9} after the prefix (check for a truncated copy or a trailing newline)`
  if (!SECRET.test(secret)) return "the API secret contains spaces or non-ASCII characters (check for a trailing newline or stray whitespace)"
  return undefined
}

/** How a key id may appear in a log line: its first 12 characters. */
export const keyIdForLog = (keyId: string): string => `${keyId.slice(0, 12)}…`
