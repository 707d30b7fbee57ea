/**
 * Fault profiles: the ways a real exchange misbehaves, switched on through
 * `POST /_venue/faults` so that clients can be tested against them. Setting a
 * profile replaces the previous one; an empty profile switches every fault off.
 */
import { Schema } from "effect"
import { seededRandom } from "./Tape.js"
import type { LimitValues } from "./Limits.js"

const Ratio = Schema.Number.pipe(Schema.between(0, 1))
const Count = Schema.Int.pipe(Schema.nonNegative())

export const FaultProfile = Schema.Struct({
  /** Added before every /api request is handled. */
  latencyMs: Schema.optional(Count),
  /** The next N accepted placements lose their HTTP response (the order stays accepted). */
  dropAcceptedResponses: Schema.optional(Count),
  /** Each accepted placement loses its response with this probability (seeded). */
  dropAcceptedRatio: Schema.optional(Ratio),
  /** The next N /api requests answer `serverErrorStatus` without being processed. */
  serverErrors: Schema.optional(Count),
  /** Each /api request answers `serverErrorStatus` with this probability (seeded). */
  serverErrorRatio: Schema.optional(Ratio),
  serverErrorStatus: Schema.optional(Schema.Literal(500, 502, 503, 504)),
  /** Added to the venue's clock (timestamps, server_time_ms, windows). */
  clockSkewMs: Schema.optional(Schema.Int),
  /** Lower (or raise) limits mid-run; absent fields keep the configured values. */
  limits: Schema.optional(
    Schema.Struct({
      weightPerMinute: Schema.optional(Schema.Int.pipe(Schema.positive())),
      ordersPer10s: Schema.optional(Schema.Int.pipe(Schema.positive())),
      ordersPerDay: Schema.optional(Schema.Int.pipe(Schema.positive()))
    })
  ),
  /** Seed of the ratios' random draws, for repeatable runs. */
  seed: Schema.optional(Schema.Int)
})
export type FaultProfile = typeof FaultProfile.Type

/** The live fault state: counters of a profile being used up. */
export class Faults {
  private profile: FaultProfile = {}
  private dropsLeft = 0
  private errorsLeft = 0
  private random: () => number = seededRandom(1)

  set(profile: FaultProfile): void {
    this.profile = profile
    this.dropsLeft = profile.dropAcceptedResponses ?? 0
    this.errorsLeft = profile.serverErrors ?? 0
    this.random = seededRandom(profile.seed ?? 1)
  }

  get current(): FaultProfile {
    return { ...this.profile, dropAcceptedResponses: this.dropsLeft, serverErrors: this.errorsLeft }
  }

  get latencyMs(): number {
    return this.profile.latencyMs ?? 0
  }

  get clockSkewMs(): number {
    return this.profile.clockSkewMs ?? 0
  }

  /** The status to fail this request with, or undefined to process it. */
  serverError(): number | undefined {
    const status = this.profile.serverErrorStatus ?? 503
    if (this.errorsLeft > 0) {
      this.errorsLeft -= 1
      return status
    }
    const ratio = this.profile.serverErrorRatio ?? 0
    return ratio > 0 && this.random() < ratio ? status : undefined
  }

  /** Whether the answer to this accepted placement is to be lost. */
  dropAccepted(): boolean {
    if (this.dropsLeft > 0) {
      this.dropsLeft -= 1
      return true
    }
    const ratio = this.profile.dropAcceptedRatio ?? 0
    return ratio > 0 && this.random() < ratio
  }

  limits(configured: LimitValues): LimitValues {
    const squeeze = this.profile.limits
    if (squeeze === undefined) return configured
    return {
      weightPerMinute: squeeze.weightPerMinute ?? configured.weightPerMinute,
      ordersPer10s: squeeze.ordersPer10s ?? configured.ordersPer10s,
      ordersPerDay: squeeze.ordersPerDay ?? configured.ordersPerDay
    }
  }
}
