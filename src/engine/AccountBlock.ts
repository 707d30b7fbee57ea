/**
 * The account block: an answer that tells the account cannot place (frozen,
 * geo-blocked, legal terms, a key without spot.trade) stops new placements, which
 * risk refuses with `placements-blocked`, until an acceptance shows the block was
 * resolved. One placement a minute is let through as a probe to learn that. The
 * sender notes what answers tell, Execution asks before each placement, and the
 * stop blocks placements for good. The block itself is published on the bus.
 */
import { Clock, Effect, Ref } from "effect"
import { logEvent } from "../log/Logger.js"
import { ErrorCode, Scope } from "../svc/ErrorCodes.js"
import type { SvcError } from "../svc/Errors.js"
import { EngineBus, type PlacementBlock } from "./EngineBus.js"

/** The placement block of a stopping engine: not a problem of the account. Also the code of a placement the stop withdrew. */
export const STOPPING = "STOPPING"

/** After an account block, one placement is let through this often to learn whether it was resolved. */
const BLOCK_PROBE_MS = 60_000

/** The account-status answers that stop new placements, with what the user must do. */
export const blockOf = (error: SvcError): PlacementBlock | undefined => {
  switch (error._tag) {
    case "AccountFrozen":
      return { code: ErrorCode.accountFrozen, fix: "the account is frozen: resolve it on the website" }
    case "GeoRestrictedIp":
      return { code: ErrorCode.geoRestrictedIp, fix: "this address may not trade: resolve it on the website" }
    case "LegalAcceptanceRequired":
      return { code: ErrorCode.legalAcceptanceRequired, fix: "accept the legal terms on the website" }
    case "ApiKeyNotPermitted":
      return error.requiredScope === null || error.requiredScope === Scope.spotTrade
        ? { code: ErrorCode.apiKeyNotPermitted, fix: "the key lacks spot.trade: create a key with Trade permission on the website" }
        : undefined
    default:
      return undefined
  }
}

export class AccountBlock extends Effect.Service<AccountBlock>()("svcbot/AccountBlock", {
  effect: Effect.gen(function* () {
    const bus = yield* EngineBus
    /** While placements are blocked, the time the next placement may go out as a probe. */
    let probeAt = 0
    return {
      current: bus.blocked,
      /**
       * Why a placement may not go out now, given the block read before its batch; past the probe
       * time one is let through (plain: asked inside the batch's transaction, once per placement).
       */
      gate: (block: PlacementBlock | undefined, now: number): string | undefined => {
        if (block === undefined) return undefined
        if (now >= probeAt) {
          probeAt = now + BLOCK_PROBE_MS
          return undefined
        }
        return `${block.code}: ${block.fix}`
      },
      /** An answer told of a block: placements stop, and the first probe waits a minute. */
      noted: (block: PlacementBlock): Effect.Effect<void> =>
        Effect.gen(function* () {
          const previous = yield* Ref.getAndSet(bus.block, block)
          probeAt = (yield* Clock.currentTimeMillis) + BLOCK_PROBE_MS
          if (previous?.code !== block.code) yield* logEvent("account.blocked", { code: block.code, fix: block.fix })
        }),
      /** An acceptance showed the block was resolved. */
      lifted: Ref.set(bus.block, undefined),
      /** Stops placements for good: the engine is stopping. */
      stop: (reason: string): Effect.Effect<void> =>
        Effect.sync(() => (probeAt = Number.POSITIVE_INFINITY)).pipe(Effect.zipRight(Ref.set(bus.block, { code: STOPPING, fix: reason })))
    }
  })
}) {}
