/**
 * Execution: strategy intents in, journaled orders out. Every intent passes the
 * pre-trade risk check (`RiskBatch`), is written to the journal, and only then is
 * handed to the sender. Cancel intents mark their order and go to `Cancels`.
 *
 * Commits are grouped: the intents of one `submit` (a strategy's batch) are risk-checked
 * and journaled, with the outbox rows they leave, in one transaction; the sender marks
 * the placements ready to go out `submitting` together in one commit, synced to disk
 * before any of them is sent.
 */
import { Clock, Effect } from "effect"
import { type Decimal, ZERO } from "../domain/Decimal.js"
import { type Intent, isPlacement, type PlaceIntent } from "../domain/Intent.js"
import { isTerminal } from "../domain/OrderState.js"
import { type EventLineInput, logEvents } from "../log/Logger.js"
import { type JournalBatch, OrderJournal } from "../store/OrderJournal.js"
import type { OrderRow } from "../store/OrderRow.js"
import { AccountBlock } from "./AccountBlock.js"
import { Books } from "./Books.js"
import { Cancels } from "./Cancels.js"
import { EngineBus } from "./EngineBus.js"
import { Market } from "./Market.js"
import { startOfUtcDay } from "./Portfolio.js"
import { type Approved, type ListedPair, type Refused, type RefusalReason } from "./Risk.js"
import { type BatchInputs, decideBatch } from "./RiskBatch.js"
import { Sender } from "./Sender.js"
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

/** What one intent of a batch came to, inside the journal's transaction; reported once it is committed. */
type Decision =
  | { readonly _tag: "Placed"; readonly order: OrderRow; readonly notional: Decimal }
  | { readonly _tag: "RiskRefused"; readonly intentId: string; readonly tag: string; readonly refused: Refused }
  | { readonly _tag: "CancelRefused"; readonly result: SubmitResult }
  | { readonly _tag: "Cancel"; readonly result: SubmitResult; readonly marked: OrderRow | undefined }

export class Execution extends Effect.Service<Execution>()("svcbot/Execution", {
  effect: Effect.gen(function* () {
    const journal = yield* OrderJournal
    const books = yield* Books
    const market = yield* Market
    const bus = yield* EngineBus
    const sender = yield* Sender
    const cancels = yield* Cancels
    const accountBlock = yield* AccountBlock
    const settings = yield* EngineSettings
    /** Per strategy, the UTC day its kill switch was last reported. */
    const killSwitchDay = new Map<string, number>()

    /** What the risk checks of a batch read from the market and the books: read once, before the batch's transaction. */
    const riskInputs = (strategyId: string, placements: ReadonlyArray<PlaceIntent>, now: number) =>
      Effect.gen(function* () {
        const balances = yield* market.balances
        const pairs: ReadonlyMap<string, ListedPair> = yield* market.pairs.pipe(Effect.orElseSucceed(() => new Map()))
        const lastPrices = new Map<string, Decimal | undefined>()
        for (const intent of placements) {
          if (pairs.has(intent.symbol) && !lastPrices.has(intent.symbol)) lastPrices.set(intent.symbol, yield* market.lastPrice(intent.symbol))
        }
        const allocation = settings.allocations.get(strategyId)
        const lossLimited = settings.risk.dailyLossLimit !== undefined
        const figures = lossLimited || allocation !== undefined ? yield* books.figures(strategyId, pairs, now) : undefined
        const batch: BatchInputs = {
          balances,
          pairs,
          lastPrices,
          dailyPnl: lossLimited ? figures!.dayPnl(yield* market.knownPrices) : ZERO,
          allocation: allocation === undefined ? undefined : { allocated: allocation, afterFills: figures!.balances(allocation) }
        }
        return { batch, block: yield* accountBlock.current }
      })

    type RiskInputs = Effect.Effect.Success<ReturnType<typeof riskInputs>>

    /**
     * Risk-checks and journals a strategy's intents in order, inside the journal's transaction.
     * Each check sees the orders journaled before it, in this batch too.
     */
    const decide = (j: JournalBatch, strategyId: string, intents: ReadonlyArray<Intent>, outboxIds: ReadonlyArray<number> | undefined, inputs: RiskInputs | undefined, now: number) => {
      const placements = intents.filter(isPlacement)
      const assessments =
        inputs === undefined
          ? []
          : decideBatch(strategyId, placements, j.unfinished(), inputs.batch, placements.map(() => accountBlock.gate(inputs.block, now)), settings.risk)
      let placed = 0
      return intents.map((intent, i): Decision => {
        const outboxId = outboxIds?.[i]
        if (intent.type === "cancel") return decideCancel(j, strategyId, intent.tag, outboxId, now)
        const assessment = assessments[placed++]!
        if (assessment._tag === "Refused") {
          const intentId = j.journalIntent({ strategyId, tag: intent.tag, type: intent.type, body: intent, refusal: assessment.reason, now, outboxId })
          return { _tag: "RiskRefused", intentId, tag: intent.tag, refused: assessment }
        }
        return { _tag: "Placed", order: journalApproved(j, strategyId, intent, assessment, now, outboxId), notional: assessment.notional }
      })
    }

    const journalApproved = (j: JournalBatch, strategyId: string, intent: PlaceIntent, assessment: Approved, now: number, outboxId: number | undefined) =>
      j.journalPlacement({
        strategyId,
        tag: intent.tag,
        body: intent,
        placement: { ...assessment.order, lockAsset: assessment.lock.asset, lockAmount: assessment.lock.amount },
        now,
        outboxId
      })


    const decideCancel = (j: JournalBatch, strategyId: string, tag: string, outboxId: number | undefined, now: number): Decision => {
      const order = j.latestByTag(strategyId, tag)
      const refusal =
        order === undefined
          ? ({ reason: "unknown-tag", detail: `the strategy has no order tagged ${tag}` } as const)
          : isTerminal(order.state)
            ? ({ reason: "already-final", detail: `the order tagged ${tag} is already ${order.state}` } as const)
            : order.type === "market"
              ? ({ reason: "market-order", detail: `the order tagged ${tag} is a market order: it fills or is rejected as a whole, and cannot be cancelled` } as const)
              : undefined
      const intentId = j.journalIntent({ strategyId, tag, type: "cancel", body: { type: "cancel", tag }, refusal: refusal?.reason ?? null, now, outboxId })
      if (refusal !== undefined || order === undefined) {
        return { _tag: "CancelRefused", result: { _tag: "Refused", intentId, tag, reason: refusal?.reason ?? "unknown-tag", detail: refusal?.detail ?? "" } }
      }
      // An order still being placed is cancelled as soon as the service names it.
      return { _tag: "Cancel", result: { _tag: "Approved", intentId, tag, orderId: order.orderId }, marked: j.update(order.orderId, { cancelRequested: true }, now) }
    }

    /**
     * What a committed decision comes to: its result, with the lines to log put in `lines` and the
     * cancel to send in `effects`, each done together for the batch. Its placement is published and queued by the caller.
     */
    const carryOut = (strategyId: string, decision: Decision, now: number, lines: Array<EventLineInput>, effects: Array<Effect.Effect<void>>): SubmitResult => {
      switch (decision._tag) {
        case "Placed": {
          const { order } = decision
          lines.push([
            "order.intent",
            {
              strategy: strategyId,
              tag: order.tag,
              intentId: order.intentId,
              symbol: order.symbol,
              side: order.side,
              type: order.type,
              notional: decision.notional.toFixed()
            }
          ])
          return { _tag: "Approved", intentId: order.intentId!, tag: order.tag!, orderId: order.orderId }
        }
        case "RiskRefused": {
          const { refused, intentId, tag } = decision
          if (refused.reason === "kill-switch") {
            const day = startOfUtcDay(now)
            if (killSwitchDay.get(strategyId) !== day) lines.push(["risk.kill-switch", { strategy: strategyId, detail: refused.detail }])
            killSwitchDay.set(strategyId, day)
          }
          lines.push(["risk.refused", { strategy: strategyId, tag, intentId, reason: refused.reason, detail: refused.detail }])
          return { _tag: "Refused", intentId, tag, reason: refused.reason, detail: refused.detail }
        }
        case "CancelRefused":
          return decision.result
        case "Cancel":
          if (decision.marked !== undefined) effects.push(cancels.sendInBackground(decision.marked))
          return decision.result
      }
    }

    return {
      /**
       * Journals and sends a strategy's intents in order; each is Approved (journaled) or
       * Refused (with the reason). `outboxIds`, when the intents were saved in the
       * strategy outbox, names each one's row, taken out as it is journaled. The whole
       * batch is one transaction; nothing is sent before it is committed.
       */
      submit: (strategyId: string, intents: ReadonlyArray<Intent>, outboxIds?: ReadonlyArray<number>): Effect.Effect<ReadonlyArray<SubmitResult>> =>
        Effect.gen(function* () {
          if (intents.length === 0) return []
          const now = yield* Clock.currentTimeMillis
          const placements = intents.filter(isPlacement)
          const inputs = placements.length === 0 ? undefined : yield* riskInputs(strategyId, placements, now)
          const decisions = yield* journal.batch((j) => decide(j, strategyId, intents, outboxIds, inputs, now))
          const lines: Array<EventLineInput> = []
          const effects: Array<Effect.Effect<void>> = []
          const results = decisions.map((decision) => carryOut(strategyId, decision, now, lines, effects))
          const placed = decisions.flatMap((decision) => (decision._tag === "Placed" ? [decision.order] : []))
          yield* bus.publishOrders(placed, now)
          yield* sender.enqueue(placed)
          // The sender marks the first placements and syncs them to disk before any goes out: what
          // the decisions leave to do (their lines, their cancels) is done while the disk syncs (the
          // marker runs at this yield), not before the marking begins; uninterruptibly, so that
          // what was committed is logged.
          const carriedOut = Effect.zipRight(logEvents(lines), Effect.all(effects, { discard: true }))
          yield* Effect.uninterruptible(placed.length > 0 ? Effect.zipRight(Effect.yieldNow(), carriedOut) : carriedOut)
          return results
        }),
      /** Waits until every placement and cancel sent so far has its answer (a withdrawn placement needs none). */
      awaitSends: Effect.zipRight(sender.awaitIdle, cancels.awaitSent),
      /** The strategies whose daily loss limit stopped their placements today (UTC). */
      killSwitchesToday: Effect.gen(function* () {
        const today = startOfUtcDay(yield* Clock.currentTimeMillis)
        return [...killSwitchDay].filter(([, day]) => day === today).map(([strategyId]) => strategyId)
      }),
      /**
       * Stops placements at shutdown, so that nothing new reaches the service: risk refuses new
       * intents, and every placement not yet handed to a sender is withdrawn (`refused`, code
       * STOPPING), now and whenever a submit under way queues one later. Placements a sender has
       * taken may be on the wire: they are left to their answer, or to reconciliation.
       */
      stopPlacements: (reason: string): Effect.Effect<void> => Effect.uninterruptible(Effect.zipRight(accountBlock.stop(reason), sender.withdraw))
    }
  })
}) {}
