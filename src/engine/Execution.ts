/**
 * Execution: strategy intents in, journaled orders out. Every intent passes the
 * pre-trade risk check, is written to the journal, and only then is sent. A lost
 * answer makes the order `unknown` for reconciliation; it is never re-sent here.
 */
import { Clock, Effect, FiberSet, Ref } from "effect"
import { type Decimal, ZERO } from "../domain/Decimal.js"
import type { Intent, PlaceIntent } from "../domain/Intent.js"
import { alreadyApplied, isTerminal, type OrderEvent, type OrderState } from "../domain/OrderState.js"
import type { EventName } from "../log/Events.js"
import { logEvent } from "../log/Logger.js"
import { FillLedger } from "../store/FillLedger.js"
import { OrderJournal, type OrderPatch, type OrderRow } from "../store/OrderJournal.js"
import type { Accepted } from "../svc/Api.js"
import { ErrorCode, Scope } from "../svc/ErrorCodes.js"
import type { PlacementOutcomeUnknown, SvcError } from "../svc/Errors.js"
import { SvcClient } from "../svc/SvcClient.js"
import { EngineBus, type PlacementBlock } from "./EngineBus.js"
import { Market } from "./Market.js"
import { bookBalances, dayPnl, startOfUtcDay } from "./Portfolio.js"
import { assess, type RefusalReason } from "./Risk.js"
import { EngineSettings } from "./Settings.js"

export type SubmitResult =
  | { readonly _tag: "Approved"; readonly intentId: string; readonly tag: string; readonly orderId: number }
  | {
      readonly _tag: "Refused"
      readonly intentId: string
      readonly tag: string
      readonly reason: RefusalReason | "unknown-tag" | "already-final" | "market-order"
      readonly detail: string
    }

/** The placement block of a stopping engine: not a problem of the account. */
export const STOPPING = "STOPPING"

/** After an account block, one placement is let through this often to learn whether it was resolved. */
const BLOCK_PROBE_MS = 60_000

const STATE_EVENTS: Partial<Record<OrderState, EventName>> = {
  submitting: "order.submitted",
  accepted: "order.accepted",
  refused: "order.refused",
  unknown: "order.unknown",
  not_placed: "order.reconciled",
  pending: "order.status",
  resting: "order.status",
  fill: "order.filled",
  rejected: "order.rejected",
  cancelled: "order.cancelled",
  lost: "order.lost"
}

/** The account-status answers that stop new placements, with what the user must do. */
const blockOf = (error: SvcError): PlacementBlock | undefined => {
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

/** Answers that prove the placement was not accepted; anything else leaves its outcome unknown. */
const refusalCode = (error: SvcError): string | undefined => {
  switch (error._tag) {
    case "NetworkError":
    case "ServerUnavailable":
    case "DecodeError":
      return undefined
    case "RequestInvalid":
      return error.code ?? `HTTP_${error.status}`
    case "RateLimited":
      return ErrorCode.rateLimited
    case "CircuitOpen":
      return "CIRCUIT_OPEN"
    case "AuthBlocked":
      return ErrorCode.authBlocked
    case "ApiKeyMalformed":
      return ErrorCode.apiKeyMalformed
    case "ApiKeyTimestampInvalid":
      return ErrorCode.apiKeyTimestampInvalid
    case "ApiKeyReplayed":
      return ErrorCode.apiKeyReplayed
    case "ApiKeyInvalid":
      return ErrorCode.apiKeyInvalid
    case "ApiKeyNotPermitted":
      return ErrorCode.apiKeyNotPermitted
    case "AccountFrozen":
      return ErrorCode.accountFrozen
    case "GeoRestrictedIp":
      return ErrorCode.geoRestrictedIp
    case "LegalAcceptanceRequired":
      return ErrorCode.legalAcceptanceRequired
  }
}


export class Execution extends Effect.Service<Execution>()("svcbot/Execution", {
  scoped: Effect.gen(function* () {
    const client = yield* SvcClient
    const journal = yield* OrderJournal
    const ledger = yield* FillLedger
    const market = yield* Market
    const bus = yield* EngineBus
    const settings = yield* EngineSettings
    const sends = yield* FiberSet.make()
    const sendPermits = yield* Effect.makeSemaphore(settings.execution.sendConcurrency)
    const cancelsSent = new Set<number>()
    /** While placements are blocked, the time the next placement may go out as a probe. */
    let blockProbeAt = 0
    const killSwitchDay = yield* Ref.make(new Map<string, number>())

    /** Moves an order along the state machine, logs the change and tells subscribers. */
    const move = (orderId: number, event: OrderEvent, patch: OrderPatch = {}, detail?: string) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const moved = yield* Effect.either(journal.transition(orderId, event, patch, now, detail))
        if (moved._tag === "Left") {
          // The same outcome reached twice (the tracker and reconciliation, or two reconcile passes, raced): nothing changed.
          if (alreadyApplied(moved.left.from, moved.left.event)) return undefined
          yield* logEvent("reconcile.mismatch", { orderId, problem: moved.left.message, ...(detail === undefined ? {} : { detail }) })
          return undefined
        }
        const row = moved.right
        const name = STATE_EVENTS[row.state]
        if (name !== undefined) {
          yield* logEvent(name, {
            strategy: row.strategyId,
            tag: row.tag,
            intentId: row.intentId,
            clientOrderId: row.clientOrderId,
            state: row.state,
            symbol: row.symbol,
            side: row.side,
            type: row.type,
            filledBaseQty: row.filledBaseQty.toFixed(),
            ...(row.code === null ? {} : { code: row.code }),
            ...(row.state === "not_placed" ? { outcome: "not_placed" } : {}),
            ...(detail === undefined ? {} : { detail })
          })
        }
        yield* bus.publishOrder(row, now)
        if (row.state === "fill" || (isTerminal(row.state) && row.filledBaseQty.gt(0))) yield* bus.triggerFillSync
        return row
      })

    /**
     * The one way an order gets `cancelRequested`, which the tracker follows by sending the cancel
     * (again) until the order is final. A market order is never marked (undefined): the venue fills
     * or rejects it whole, so a cancel of it could only be refused. `sendCancel` sends marked orders only.
     */
    const markCancel = (row: OrderRow): Effect.Effect<OrderRow | undefined> =>
      row.type === "market"
        ? Effect.succeed(undefined)
        : Effect.flatMap(Clock.currentTimeMillis, (now) => journal.update(row.orderId, { cancelRequested: true }, now))

    const sendCancel = (row: OrderRow) =>
      Effect.gen(function* () {
        if (!row.cancelRequested || row.clientOrderId === null || cancelsSent.has(row.orderId)) return
        cancelsSent.add(row.orderId)
        yield* client.cancel(row.clientOrderId).pipe(
          Effect.tap(() =>
            Effect.flatMap(Clock.currentTimeMillis, (now) => journal.update(row.orderId, { nextPollAt: now }, now))
          ),
          Effect.tap(() => bus.wakeTracker),
          Effect.catchAll((error) =>
            Effect.sync(() => cancelsSent.delete(row.orderId)).pipe(
              Effect.zipRight(logEvent("request.failed", { what: "cancel", clientOrderId: row.clientOrderId, error: error.message }))
            )
          )
        )
      })

    const noteBlock = (block: PlacementBlock) =>
      Effect.gen(function* () {
        const previous = yield* Ref.getAndSet(bus.block, block)
        const now = yield* Clock.currentTimeMillis
        blockProbeAt = now + BLOCK_PROBE_MS
        if (previous?.code !== block.code) yield* logEvent("account.blocked", { code: block.code, fix: block.fix })
      })

    const place = (row: OrderRow): Effect.Effect<Accepted, SvcError | PlacementOutcomeUnknown> => {
      const base = { symbol: row.symbol, side: row.side }
      switch (row.type) {
        case "limit":
          return client.placeLimit({ ...base, baseQty: row.baseQty!, limitPrice: row.limitPrice! })
        case "stop-limit":
          return client.placeStopLimit({ ...base, baseQty: row.baseQty!, limitPrice: row.limitPrice!, stopPrice: row.stopPrice! })
        case "market":
          return row.side === "buy"
            ? client.placeMarket({ symbol: row.symbol, side: "buy", quoteOrderQty: row.quoteOrderQty!, maxSlippageBps: row.maxSlippageBps! })
            : client.placeMarket({ symbol: row.symbol, side: "sell", baseQty: row.baseQty!, maxSlippageBps: row.maxSlippageBps! })
      }
    }

    /** Sends a journaled order (state `intent`) once, and records what came of it. */
    const send = (order: OrderRow): Effect.Effect<void> =>
      sendPermits.withPermits(1)(Effect.gen(function* () {
        const sending = yield* move(order.orderId, "send", { sentAt: yield* Clock.currentTimeMillis })
        if (sending === undefined) return
        const outcome = yield* Effect.either(place(sending))
        if (outcome._tag === "Right") {
          if ((yield* bus.blocked) !== undefined) yield* Ref.set(bus.block, undefined)
          const now = yield* Clock.currentTimeMillis
          // Settlement takes a moment; the first poll waits one fast interval so that new orders are polled together.
          const accepted = yield* move(order.orderId, "accept", {
            clientOrderId: outcome.right.clientOrderId,
            acceptedAt: now,
            nextPollAt: now + settings.tracker.fastPollMs
          })
          if (accepted?.cancelRequested === true) yield* sendCancel(accepted)
          return
        }
        const error = outcome.left
        if (error._tag === "PlacementOutcomeUnknown") {
          // Now, on the local clock, is no earlier than the request was signed: the absence window counts from here.
          yield* move(order.orderId, "lose", { lostAt: yield* Clock.currentTimeMillis }, `${error.reason}: ${error.detail}`)
          return
        }
        const code = refusalCode(error)
        if (code === undefined) {
          yield* move(order.orderId, "lose", { lostAt: yield* Clock.currentTimeMillis }, error.message)
          return
        }
        const block = blockOf(error)
        if (block !== undefined) yield* noteBlock(block)
        yield* move(order.orderId, "refuse", { code }, error.message)
      }))

    const dailyPnl = (strategyId: string) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const fills = yield* ledger.forStrategy(strategyId)
        const pairs = yield* market.pairs.pipe(Effect.orElseSucceed(() => new Map()))
        const prices = yield* market.knownPrices
        return dayPnl(fills, pairs, prices, now)
      })

    /**
     * The instance's own free balances: its allocation moved by its fills, less what its
     * unfinished orders still hold (the unfilled part; the filled part is in the fills).
     */
    const allocationBook = (strategyId: string, own: ReadonlyArray<OrderRow>) =>
      Effect.gen(function* () {
        const allocation = settings.allocations.get(strategyId)
        if (allocation === undefined) return undefined
        const pairs = yield* market.pairs.pipe(Effect.orElseSucceed(() => new Map()))
        const balances = bookBalances(allocation, yield* ledger.forStrategy(strategyId), pairs)
        for (const order of own) {
          if (order.lockAsset === null || order.lockAmount === null) continue
          const base = order.baseQty
          const held = base !== null && base.gt(0) ? order.lockAmount.mul(base.minus(order.filledBaseQty)).div(base) : order.lockAmount
          balances.set(order.lockAsset, (balances.get(order.lockAsset) ?? ZERO).minus(held))
        }
        return { free: (asset: string): Decimal => balances.get(asset) ?? ZERO, allocated: (asset: string): Decimal => allocation[asset] ?? ZERO }
      })

    const placementBlock = Effect.gen(function* () {
      const block = yield* bus.blocked
      if (block === undefined) return undefined
      const now = yield* Clock.currentTimeMillis
      if (now >= blockProbeAt) {
        // Let this one through: its answer tells whether the block was resolved on the website.
        blockProbeAt = now + BLOCK_PROBE_MS
        return undefined
      }
      return `${block.code}: ${block.fix}`
    })

    const submitPlacement = (strategyId: string, intent: PlaceIntent, outboxId: number | undefined) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const unfinished = yield* journal.unfinished
        const own = unfinished.filter((o) => o.strategyId === strategyId)
        const snapshot = yield* market.balances
        const pairs = yield* market.pairs.pipe(Effect.orElseSucceed(() => new Map()))
        const pair = pairs.get(intent.symbol)
        const lastPrice = pair === undefined ? undefined : yield* market.lastPrice(intent.symbol)
        // The wallet does not show yet what orders sent since it was read will lock.
        const reserved = (asset: string) =>
          unfinished
            .filter((o) => o.lockAsset === asset && o.lockAmount !== null && (o.acceptedAt === null || o.acceptedAt >= snapshot.at))
            .reduce((sum, o) => sum.plus(o.lockAmount!), ZERO)
        const limits = settings.risk
        const assessment = assess(
          intent,
          {
            pair,
            lastPrice,
            available: (asset) => (snapshot.byAsset.get(asset)?.free ?? ZERO).minus(reserved(asset)),
            openOrders: own.length,
            openNotional: own.reduce(
              (sum, o) => sum.plus(o.lockAsset === pair?.quote ? (o.lockAmount ?? ZERO) : (o.lockAmount ?? ZERO).mul(o.limitPrice ?? lastPrice ?? ZERO)),
              ZERO
            ),
            tagInUse: own.some((o) => o.tag === intent.tag),
            dailyPnl: limits.dailyLossLimit === undefined ? ZERO : yield* dailyPnl(strategyId),
            placementsBlocked: yield* placementBlock,
            allocation: yield* allocationBook(strategyId, own)
          },
          limits
        )
        if (assessment._tag === "Refused") {
          const intentId = yield* journal.journalIntent({
            strategyId,
            tag: intent.tag,
            type: intent.type,
            body: intent,
            refusal: assessment.reason,
            now,
            outboxId
          })
          if (assessment.reason === "kill-switch") {
            const day = startOfUtcDay(now)
            const tripped = yield* Ref.modify(killSwitchDay, (m) => [m.get(strategyId) === day, new Map(m).set(strategyId, day)])
            if (!tripped) yield* logEvent("risk.kill-switch", { strategy: strategyId, detail: assessment.detail })
          }
          yield* logEvent("risk.refused", { strategy: strategyId, tag: intent.tag, intentId, reason: assessment.reason, detail: assessment.detail })
          return { _tag: "Refused", intentId, tag: intent.tag, reason: assessment.reason, detail: assessment.detail } as const
        }
        const order = yield* journal.journalPlacement({
          strategyId,
          tag: intent.tag,
          body: intent,
          placement: { ...assessment.order, lockAsset: assessment.lock.asset, lockAmount: assessment.lock.amount },
          now,
          outboxId
        })
        yield* logEvent("order.intent", {
          strategy: strategyId,
          tag: intent.tag,
          intentId: order.intentId,
          symbol: order.symbol,
          side: order.side,
          type: order.type,
          notional: assessment.notional.toFixed()
        })
        yield* bus.publishOrder(order, now)
        yield* FiberSet.run(sends, send(order))
        return { _tag: "Approved", intentId: order.intentId!, tag: intent.tag, orderId: order.orderId } as const
      })

    const submitCancel = (strategyId: string, tag: string, outboxId: number | undefined) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const order = yield* journal.latestByTag(strategyId, tag)
        const refusal =
          order === undefined
            ? ({ reason: "unknown-tag", detail: `the strategy has no order tagged ${tag}` } as const)
            : isTerminal(order.state)
              ? ({ reason: "already-final", detail: `the order tagged ${tag} is already ${order.state}` } as const)
              : order.type === "market"
                ? ({ reason: "market-order", detail: `the order tagged ${tag} is a market order: it fills or is rejected as a whole, and cannot be cancelled` } as const)
                : undefined
        const intentId = yield* journal.journalIntent({
          strategyId,
          tag,
          type: "cancel",
          body: { type: "cancel", tag },
          refusal: refusal?.reason ?? null,
          now,
          outboxId
        })
        if (refusal !== undefined || order === undefined) {
          return { _tag: "Refused", intentId, tag, reason: refusal?.reason ?? "unknown-tag", detail: refusal?.detail ?? "" } as const
        }
        // An order still being placed is cancelled as soon as the service names it.
        const marked = yield* markCancel(order)
        if (marked !== undefined) yield* FiberSet.run(sends, sendCancel(marked))
        return { _tag: "Approved", intentId, tag, orderId: order.orderId } as const
      })

    return {
      /**
       * Journals and sends a strategy's intents in order; each is Approved (journaled) or
       * Refused (with the reason). `outboxIds`, when the intents were saved in the
       * strategy outbox, names each one's row, taken out as it is journaled.
       */
      submit: (strategyId: string, intents: ReadonlyArray<Intent>, outboxIds?: ReadonlyArray<number>): Effect.Effect<ReadonlyArray<SubmitResult>> =>
        Effect.forEach(
          intents,
          (intent, i): Effect.Effect<SubmitResult> =>
            intent.type === "cancel" ? submitCancel(strategyId, intent.tag, outboxIds?.[i]) : submitPlacement(strategyId, intent, outboxIds?.[i])
        ),
      /** Sends an order journaled in state `intent` (used by the startup reconcile for intents a crash left unsent). */
      send: (order: OrderRow) => FiberSet.run(sends, send(order)),
      markCancel,
      sendCancel,
      move,
      /** Waits until every placement and cancel sent so far has its answer. */
      awaitSends: FiberSet.awaitEmpty(sends),
      /** The strategies whose daily loss limit stopped their placements today (UTC). */
      killSwitchesToday: Effect.gen(function* () {
        const today = startOfUtcDay(yield* Clock.currentTimeMillis)
        return [...(yield* Ref.get(killSwitchDay))].filter(([, day]) => day === today).map(([strategyId]) => strategyId)
      }),
      /** Stops placements: used at shutdown so that nothing new reaches the service. */
      blockPlacements: (reason: string) =>
        Effect.sync(() => (blockProbeAt = Number.POSITIVE_INFINITY)).pipe(Effect.zipRight(Ref.set(bus.block, { code: STOPPING, fix: reason })))
    }
  })
}) {}
