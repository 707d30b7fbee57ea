/**
 * What the client does after a request that did not end in a readable answer, decided
 * from the request, how the attempt ended and what was already tried; SvcClient.ts
 * carries the decision out.
 *
 * - API_KEY_TIMESTAMP_INVALID: learn the clock offset from `server_time_ms`, retry
 *   with a fresh timestamp and signature (any method: the request was refused); a
 *   second refusal corrects once more only if the server's clock stepped meanwhile.
 * - GETs and cancels retry on 5xx and network errors with capped jittered backoff;
 *   every attempt is signed anew, since a resent non-GET signature is a replay.
 * - A placement is never retried once it may have reached the server (timeout,
 *   reset, 5xx, unreadable 202): it fails with PlacementOutcomeUnknown for
 *   reconciliation. Only a connection that never opened is a plain NetworkError.
 */
import type { ApiKeyTimestampInvalid, PlacementRequest, RefusedAnswer, SvcError } from "./Errors.js"
import { NetworkError, PlacementOutcomeUnknown } from "./Errors.js"

export interface RetryOptions {
  /** Retries of a GET or cancel after a 5xx or network error. */
  readonly maxRetries: number
  readonly baseDelayMs: number
  readonly maxDelayMs: number
}

export const defaultRetryOptions: RetryOptions = { maxRetries: 3, baseDelayMs: 100, maxDelayMs: 2000 }

/** A clock that steps while a corrected retry is in flight is followed once more, never further. */
export const MAX_CLOCK_CORRECTIONS = 2

/** Public reads are unsigned and outside the key's budget; placements spend the order budgets and are never resent. */
export type RequestKind = "public" | "read" | "placement" | "cancel"

/** What the decision needs to know of the request. */
export interface RetriedRequest {
  readonly method: "GET" | "POST"
  readonly path: string
  readonly kind: RequestKind
  readonly body?: Readonly<Record<string, unknown>>
  /** The order type of a placement, for PlacementOutcomeUnknown. */
  readonly orderType?: PlacementRequest["type"]
}

/** How an attempt ended when it did not give a decoded answer. */
export type FailedAttempt =
  | {
      readonly _tag: "Answered"
      readonly status: number
      readonly error: SvcError | undefined
      /** Why a successful answer could not be read (set exactly when `error` is not). */
      readonly unreadable: RefusedAnswer | undefined
      /** Server-clock time the attempt was sent. */
      readonly sentAtMs: number
      readonly sentAtLocalMs: number
      readonly receivedAtLocalMs: number
    }
  | {
      readonly _tag: "Lost"
      readonly reason: "timeout" | "connection"
      readonly neverSent: boolean
      readonly detail: string
      readonly sentAtMs: number
    }

/** What was tried so far for one request. */
export interface RetryState {
  /** Backoff retries after a 5xx or network error. */
  readonly retries: number
  readonly clockCorrections: number
}

export const initialRetryState: RetryState = { retries: 0, clockCorrections: 0 }

export type RetryDecision =
  /** Learn the server's clock from the refusal and send again at once, signed anew. */
  | {
      readonly _tag: "CorrectClock"
      readonly serverTimeMs: number
      readonly reason: string | null
      readonly sentAtLocalMs: number
      readonly receivedAtLocalMs: number
    }
  /** Send again after a jittered delay of at most `ceilingMs` (`jitteredDelayMs`); `retry` counts from 1. */
  | { readonly _tag: "Retry"; readonly retry: number; readonly ceilingMs: number; readonly error: SvcError }
  /** The placement may have reached the server: never resent, reconciliation finds out. */
  | { readonly _tag: "Reconcile"; readonly error: PlacementOutcomeUnknown }
  | { readonly _tag: "GiveUp"; readonly error: SvcError }

const placementRequestOf = (type: PlacementRequest["type"], body: Readonly<Record<string, unknown>>): PlacementRequest =>
  ({ type, ...body }) as PlacementRequest

const reconcile = (request: RetriedRequest, reason: PlacementOutcomeUnknown["reason"], detail: string, sentAtMs: number): RetryDecision => ({
  _tag: "Reconcile",
  error: new PlacementOutcomeUnknown({
    endpoint: request.path,
    request: placementRequestOf(request.orderType ?? "limit", request.body ?? {}),
    sentAtMs,
    reason,
    detail
  })
})

/**
 * Whether a refusal of the timestamp corrects the clock. The first always does. A later one
 * does only when the server's clock moved by more than this round trip can explain (it stepped
 * while the corrected retry was in flight); otherwise the window is too tight for this link,
 * and another retry would be refused the same way.
 */
const correctsClock = (
  error: ApiKeyTimestampInvalid,
  attempt: Extract<FailedAttempt, { _tag: "Answered" }>,
  state: RetryState,
  clockOffsetMs: number
): error is ApiKeyTimestampInvalid & { readonly serverTimeMs: number } => {
  if (error.serverTimeMs === null || state.clockCorrections >= MAX_CLOCK_CORRECTIONS) return false
  if (state.clockCorrections === 0) return true
  const estimateMs = error.serverTimeMs - (attempt.sentAtLocalMs + attempt.receivedAtLocalMs) / 2
  return Math.abs(estimateMs - clockOffsetMs) > attempt.receivedAtLocalMs - attempt.sentAtLocalMs
}

/** `clockOffsetMs` is the server clock's offset (server minus local) as learned now. */
export const decideRetry = (
  request: RetriedRequest,
  attempt: FailedAttempt,
  state: RetryState,
  clockOffsetMs: number,
  options: RetryOptions
): RetryDecision => {
  const placement = request.kind === "placement"
  let failure: SvcError
  if (attempt._tag === "Lost") {
    if (placement && !attempt.neverSent) return reconcile(request, attempt.reason, attempt.detail, attempt.sentAtMs)
    failure = new NetworkError({ endpoint: request.path, reason: attempt.reason, detail: attempt.detail })
  } else if (attempt.error === undefined) {
    const unreadable = attempt.unreadable!
    if (placement) return reconcile(request, "unreadable-answer", `HTTP ${attempt.status}: ${unreadable.message}`, attempt.sentAtMs)
    return { _tag: "GiveUp", error: unreadable }
  } else {
    failure = attempt.error
    if (failure._tag === "ApiKeyTimestampInvalid" && correctsClock(failure, attempt, state, clockOffsetMs)) {
      return {
        _tag: "CorrectClock",
        serverTimeMs: failure.serverTimeMs,
        reason: failure.reason,
        sentAtLocalMs: attempt.sentAtLocalMs,
        receivedAtLocalMs: attempt.receivedAtLocalMs
      }
    }
    if (failure._tag === "ServerUnavailable" && placement) return reconcile(request, "server-error", `HTTP ${failure.status}`, attempt.sentAtMs)
  }
  const transient = failure._tag === "NetworkError" || failure._tag === "ServerUnavailable"
  const retriable = request.method === "GET" || request.kind === "cancel"
  if (transient && retriable && state.retries < options.maxRetries) {
    return { _tag: "Retry", retry: state.retries + 1, ceilingMs: Math.min(options.maxDelayMs, options.baseDelayMs * 2 ** state.retries), error: failure }
  }
  return { _tag: "GiveUp", error: failure }
}

/** The state after carrying out `decision` (a CorrectClock or a Retry; the others end the request). */
export const afterDecision = (state: RetryState, decision: RetryDecision): RetryState => {
  switch (decision._tag) {
    case "CorrectClock":
      return { ...state, clockCorrections: state.clockCorrections + 1 }
    case "Retry":
      return { ...state, retries: decision.retry }
    default:
      return state
  }
}

/** A delay between half the ceiling and the ceiling, for `jitter` in [0, 1). Full jitter keeps many clients (or fibers) from retrying in step. */
export const jitteredDelayMs = (ceilingMs: number, jitter: number): number => Math.round(ceilingMs / 2 + (jitter * ceilingMs) / 2)
