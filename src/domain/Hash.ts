/**
 * The identity of a strategy run: a hash of the strategy file's exact bytes and
 * a hash of its params in canonical JSON. Evidence and promotions are tied to
 * both, so that changing one byte of code or one param needs new evidence.
 */
import { createHash } from "node:crypto"
import { readFileSync } from "node:fs"
import { Decimal, fromJsNumber, fromNumberToken, toJsonNumber } from "./Decimal.js"
import { isLosslessNumber, stringify } from "./Json.js"

const sha256 = (bytes: string | Uint8Array): string => createHash("sha256").update(bytes).digest("hex")

/** sha256 of the file's bytes: whitespace and comments count, as they do in a code review. */
export const sourceHashOfFile = (path: string): string => sha256(readFileSync(path))

export const sourceHash = (source: string | Uint8Array): string => sha256(source)

/**
 * Params as canonical JSON: object keys sorted, numbers written as their plain
 * decimal digits (so `1.50`, `1.5` and `15e-1` are the same param), whether they
 * arrive as lossless tokens, Decimals or JS numbers.
 */
export const canonicalParams = (params: unknown): string => stringify(canonicalize(params))

const canonicalize = (value: unknown): unknown => {
  if (isLosslessNumber(value)) return fromNumberToken(value)
  if (Decimal.isDecimal(value)) return new Decimal(toJsonNumber(value as Decimal))
  if (typeof value === "number") return fromJsNumber(value)
  if (Array.isArray(value)) return value.map(canonicalize)
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {}
    for (const key of Object.keys(value).sort()) {
      const field = (value as Record<string, unknown>)[key]
      if (field !== undefined) out[key] = canonicalize(field)
    }
    return out
  }
  return value
}

export const paramsHash = (params: unknown): string => sha256(canonicalParams(params))
