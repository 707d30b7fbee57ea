/**
 * Execution: strategy intents in, journaled orders out. Every intent passes the
 * pre-trade risk check, is written to the journal, and only then is sent. A lost
 * answer makes the order `unknown` for reconciliation; it is never re-sent here.
 *
 * Commits are grouped: the intents of one `submit` (a strategy's batch) are risk-checked
 * and journaled, with the outbox rows they leave, in one transaction; the placements
 * ready to go out are marked `submitting` together in one commit, synced to disk
 * before any of them is sent.
 */
import { Cause, Chunk, Clock, Effect, Either, Exit, FiberSet, LogLevel, Option, Queue, Ref } from "effect"
import { type Decimal, ZERO } from "../domain/Decimal.js"
import type { Intent, PlaceIntent } from "../domain/Intent.js"
import { alreadyApplied, type InvalidTransition, isTerminal, type OrderEvent, type OrderState } from "../domain/OrderState.js"
import { EventCatalog, type EventName } from "../log/Events.js"
import { logEvent } from "../log/Logger.js"
import { Database } from "../store/Database.js"
import { type JournalBatch, type Move, OrderJournal, type OrderPatch, type OrderRow } from "../store/OrderJournal.js"
import type { Accepted } from "../svc/Api.js"
import { ErrorCode, Scope } from "../svc/ErrorCodes.js"
import { isOrderNotOpen, type PlacementOutcomeUnknown, type SvcError } from "../svc/Errors.js"
import { SvcClient } from "../svc/SvcClient.js"
import { Books } from "./Books.js"
import { EngineBus, type PlacementBlock } from "./EngineBus.js"
import { Market } from "./Market.js"
import { startOfUtcDay } from "./Portfolio.js"
import { type Approved, type PairRules, type Refused, type RefusalReason } from "./Risk.js"
import { type BatchInputs, decideBatch } from "./RiskBatch.js"
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

/** The placement block of a stopping engine: not a problem of the account. Also the code of a placement the stop withdrew. */
export const STOPPING = "STOPPING"

const WITHDRAWN = "withdrawn: the engine stopped before this placement was sent"

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

/**
 * Writes a catalog event, building its fields only when its level is logged: the debug events
 * of every order's progress cost nothing while debug is off.
 */
const logWhenEnabled = (name: EventName, fields: () => Record<string, unknown>): Effect.Effect<void> => {
  const write = Effect.suspend(() => logEvent(name, fields()))
  return EventCatalog[name].level === "debug" ? Effect.asVoid(Effect.whenLogLevel(write, LogLevel.Debug)) : write
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
    case "AnswerTooLarge":
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


/** What one intent of a batch came to, inside the journal's transaction; reported once it is committed. */
type Decision =
  | { readonly _tag: "Placed"; readonly order: OrderRow; readonly notional: Decimal }
  | { readonly _tag: "RiskRefused"; readonly intentId: string; readonly tag: string; readonly refused: Refused }
  | { readonly _tag: "CancelRefused"; readonly result: SubmitResult }
  | { readonly _tag: "Cancel"; readonly result: SubmitResult; readonly marked: OrderRow | undefined }

export class Execution extends Effect.Service<Execution>()("svcbot/Execution", {
  scoped: Effect.gen(function* () {
    const client = yield* SvcClient
    const journal = yield* OrderJournal
    const database = yield* Database
    const books = yield* Books
    const market = yield* Market
    const bus = yield* EngineBus
    const settings = yield* EngineSettings
    const sends = yield* FiberSet.make()
    /** Orders whose cancel is out; an order leaves when it is final, or when the cancel failed and may be sent again. */
    const cancelsSent = new Set<number>()
    /** While placements are blocked, the time the next placement may go out as a probe. */
    let blockProbeAt = 0
    /** Per strategy, the UTC day its kill switch was last reported. */
    const killSwitchDay = yield* Ref.make(new Map<string, number>())

    /**
     * Logs the state changes of a batch (one commit's) and tells subscribers in one publish.
     * `fillsSynced`: whoever moved the orders synced the fills they report already; otherwise
     * finished orders with fills have them synced now.
     */
    const announce = (rows: ReadonlyArray<OrderRow>, details: ReadonlyArray<string | undefined>, now: number, fillsSynced: boolean): Effect.Effect<void> =>
      Effect.suspend(() => {
        const lines: Array<Effect.Effect<void>> = []
        let syncFills = false
        for (const [i, row] of rows.entries()) {
          const name = row.state === "refused" && row.code === STOPPING ? "order.withdrawn" : STATE_EVENTS[row.state]
          const detail = details[i]
          if (name !== undefined) {
            lines.push(
              logWhenEnabled(name, () => ({
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
              }))
            )
          }
          if (isTerminal(row.state)) cancelsSent.delete(row.orderId)
          if (!fillsSynced && (row.state === "fill" || (isTerminal(row.state) && row.filledBaseQty.gt(0)))) syncFills = true
        }
        return Effect.all(lines, { discard: true }).pipe(
          Effect.zipRight(bus.publishOrders(rows, now)),
          Effect.zipRight(syncFills ? bus.triggerFillSync : Effect.void)
        )
      })

    /** What a move that the state machine refused means: nothing, when the outcome was reached already. */
    const refusedMove = (orderId: number, refusal: InvalidTransition, detail: string | undefined) =>
      // The same outcome reached twice (the tracker and reconciliation, or two reconcile passes, raced): nothing changed.
      alreadyApplied(refusal.from, refusal.event)
        ? Effect.void
        : logEvent("reconcile.mismatch", { orderId, problem: refusal.message, ...(detail === undefined ? {} : { detail }) })

    /**
     * Moves orders along the state machine in one transaction, logs each change and tells
     * subscribers; a move the state machine refuses comes back undefined.
     */
    const moveMany = (moves: ReadonlyArray<Move>, options: { readonly fillsSynced?: boolean } = {}) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const outcomes = yield* journal.transitionMany(moves, now)
        const rows: Array<OrderRow | undefined> = []
        const moved: Array<OrderRow> = []
        const details: Array<string | undefined> = []
        for (const [i, m] of moves.entries()) {
          const outcome = outcomes[i]!
          if (outcome._tag === "Left") {
            yield* refusedMove(m.orderId, outcome.left, m.detail)
            rows.push(undefined)
            continue
          }
          rows.push(outcome.right)
          moved.push(outcome.right)
          details.push(m.detail)
        }
        yield* announce(moved, details, now, options.fillsSynced === true)
        return rows
      })

    /** Moves an order along the state machine, logs the change and tells subscribers. */
    const move = (orderId: number, event: OrderEvent, patch: OrderPatch = {}, detail?: string) =>
      Effect.map(moveMany([{ orderId, event, patch, detail }]), (rows) => rows[0])

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
        // The tracker learns how the order ended from its status, at once rather than at the next due poll.
        const pollNow = Effect.flatMap(Clock.currentTimeMillis, (now) => journal.update(row.orderId, { nextPollAt: now }, now)).pipe(
          Effect.zipRight(bus.wakeTracker)
        )
        yield* client.cancel(row.clientOrderId).pipe(
          Effect.zipRight(pollNow),
          Effect.catchAll((error) =>
            isOrderNotOpen(error)
              ? // The order filled or was rejected before the cancel reached it: a settled outcome, not a
                // failure. It stays among the cancels sent until the tracker sees it end, so no cancel is re-sent.
                Effect.zipRight(
                  pollNow,
                  logEvent("order.cancel-too-late", { strategy: row.strategyId, tag: row.tag, clientOrderId: row.clientOrderId, symbol: row.symbol, side: row.side })
                )
              : Effect.sync(() => cancelsSent.delete(row.orderId)).pipe(
                  Effect.zipRight(logEvent("request.failed", { what: "cancel", clientOrderId: row.clientOrderId, error: error.message }))
                )
          ),
          // A cancel cut short (the stop ends the tracker round that sent it) may never have reached the
          // service: forgotten, so that the stop's own cancel goes out instead of being taken for sent.
          Effect.onInterrupt(() => Effect.sync(() => cancelsSent.delete(row.orderId)))
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

    /** Marked placements not yet taken by a sender when the next group may be marked: a group is synced while half of one is still to go out. */
    const markAhead = Math.max(1, Math.floor(settings.execution.markGroupSize / 2))

    /** Placements journaled (state `intent`) and waiting to be marked, in journal order. */
    const awaitingMark: Array<number> = []
    /** Placements marked and synced to disk, waiting for a sender. */
    const readyToSend = yield* Queue.unbounded<OrderRow>()
    /** Placements marked and not yet taken by a sender. */
    let markedWaiting = 0
    const markerWake = yield* Queue.sliding<void>(1)
    /** What the service answered to placements, waiting to be recorded together. */
    let answered: Array<{ readonly order: OrderRow; readonly outcome: Exit.Exit<Accepted, SvcError | PlacementOutcomeUnknown>; readonly at: number }> = []
    const recorderWake = yield* Queue.sliding<void>(1)
    /** Placements handed to the sends whose outcome is not recorded yet; the latch is open while there are none. */
    let unfinishedSends = 0
    const sendsIdle = yield* Effect.makeLatch(true)
    const sendsDone = (count: number) => {
      unfinishedSends -= count
      if (unfinishedSends === 0) sendsIdle.unsafeOpen()
    }
    /** Set when the engine stops: from then on no placement is handed to a sender; each is withdrawn instead. */
    let withdrawing = false
    /** Placements withdrawn since the stop began: at its call, and by a group or a submit that was under way then. */
    let withdrawnCount = 0
    /** Marking a group and withdrawing take turns: a placement is either marked and sent, or withdrawn unsent, never both. */
    const marking = yield* Effect.makeSemaphore(1)

    /** Queues journaled placements (state `intent`) to be marked, synced and sent, each once. */
    const enqueue = (orders: ReadonlyArray<OrderRow>): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (orders.length === 0) return Effect.void
        if (unfinishedSends === 0) sendsIdle.unsafeClose()
        unfinishedSends += orders.length
        for (const order of orders) awaitingMark.push(order.orderId)
        return Queue.offer(markerWake, undefined)
      })

    /**
     * Hands the placements of a marked group to the senders once the commit is on disk: after a
     * power loss the journal still knows they may have been sent.
     */
    const release = (group: ReadonlyArray<number>, moved: ReadonlyArray<Either.Either<OrderRow, InvalidTransition>>, now: number) =>
      Effect.gen(function* () {
        yield* database.syncToDisk
        const marked: Array<OrderRow> = []
        for (const [i, orderId] of group.entries()) {
          const outcome = moved[i]!
          if (outcome._tag === "Right") {
            marked.push(outcome.right)
          } else {
            markedWaiting -= 1
            sendsDone(1)
            yield* refusedMove(orderId, outcome.left, undefined)
          }
        }
        yield* announce(marked, [], now, false)
        // Only now may any of them be sent, unless the engine began to stop while the commit was synced.
        yield* marking.withPermits(1)(
          Effect.suspend(() => {
            if (!withdrawing) return Queue.offerAll(readyToSend, marked)
            markedWaiting -= marked.length
            return Effect.zipRight(withdraw(marked), Effect.sync(() => sendsDone(marked.length)))
          })
        )
        // No sender will take the ones refused: room for the next group is made here.
        if (marked.length < group.length) yield* Queue.offer(markerWake, undefined)
      })

    /**
     * Ends placements that never reached a sender as `refused` with code STOPPING, in one commit:
     * nothing of them was sent, so the next start has nothing to send or reconcile for them.
     */
    const withdraw = (rows: ReadonlyArray<OrderRow>): Effect.Effect<void> =>
      Effect.gen(function* () {
        if (rows.length === 0) return
        const now = yield* Clock.currentTimeMillis
        const moves = rows.map((row): Move => ({ orderId: row.orderId, event: "withdraw", patch: { code: STOPPING }, detail: WITHDRAWN }))
        // A write that fails (a full disk) must not stop the stop: the rows stay as they were, and its report counts them.
        const written = yield* Effect.exit(journal.transitionMany(moves, now))
        if (Exit.isFailure(written)) {
          yield* logEvent("reconcile.mismatch", {
            problem: `${rows.length} placements could not be withdrawn in the journal: an intent among them is sent by the next start, a submitting one reconciled`,
            detail: Cause.pretty(written.cause)
          })
          return
        }
        const withdrawn: Array<OrderRow> = []
        for (const [i, m] of moves.entries()) {
          const outcome = written.value[i]!
          if (outcome._tag === "Left") yield* refusedMove(m.orderId, outcome.left, m.detail)
          else withdrawn.push(outcome.right)
        }
        withdrawnCount += withdrawn.length
        yield* announce(withdrawn, withdrawn.map(() => WITHDRAWN), now, true)
      })

    /**
     * Withdraws every placement not handed to a sender yet: marked ones waiting for a sender,
     * queued ones waiting to be marked, and journaled ones never queued (a submit interrupted
     * between its commit and its queueing). Runs holding `marking`, so no group is half marked.
     */
    const withdrawWaiting = Effect.gen(function* () {
      const taken = Chunk.toReadonlyArray(yield* Queue.takeAll(readyToSend))
      markedWaiting -= taken.length
      const queued = awaitingMark.splice(0).length
      yield* withdraw([...taken, ...(yield* journal.inStates(["intent"]))])
      sendsDone(taken.length + queued)
    })

    /**
     * Marks the next group of placements `submitting` in one commit and syncs it to disk off the
     * event loop, while the group before goes out. At most `markGroupSize` placements are marked
     * and not yet sent: a crash leaves at most those and the sends in flight marked, each resolved
     * by reconciliation (`unknown`, then found or proven not placed).
     */
    const markNextGroup = Effect.gen(function* () {
      // A placement queued after the stop began (its submit was under way) is withdrawn like the others.
      if (withdrawing) return yield* withdrawWaiting
      if (markedWaiting > markAhead || awaitingMark.length === 0) return
      const group = awaitingMark.splice(0, settings.execution.markGroupSize - markedWaiting)
      markedWaiting += group.length
      const now = yield* Clock.currentTimeMillis
      const moved = yield* journal.transitionMany(
        group.map((orderId) => ({ orderId, event: "send" as const, patch: { sentAt: now } })),
        now
      )
      yield* FiberSet.run(sends, Effect.uninterruptible(release(group, moved, now)))
    })
    yield* Effect.forkScoped(Effect.forever(Effect.zipRight(Queue.take(markerWake), Effect.uninterruptible(marking.withPermits(1)(markNextGroup)))))

    /** The move that records what the service answered to a placement, and the block its refusal tells of, if any. */
    const moveOfAnswer = (order: OrderRow, outcome: Exit.Exit<Accepted, SvcError | PlacementOutcomeUnknown>, at: number): { readonly move: Move; readonly block?: PlacementBlock | undefined } => {
      const { orderId } = order
      if (Exit.isSuccess(outcome)) {
        // Settlement takes a moment; the first poll waits one fast interval so that new orders are polled together.
        return { move: { orderId, event: "accept", patch: { clientOrderId: outcome.value.clientOrderId, acceptedAt: at, nextPollAt: at + settings.tracker.fastPollMs } } }
      }
      const failure = Cause.failureOption(outcome.cause)
      // A defect in the client leaves the outcome as unknown as a lost answer: reconciliation finds out.
      if (Option.isNone(failure)) return { move: { orderId, event: "lose", patch: { lostAt: at }, detail: Cause.pretty(outcome.cause) } }
      const error = failure.value
      // The local clock when the answer came is no earlier than the request was signed: the absence window counts from there.
      if (error._tag === "PlacementOutcomeUnknown") return { move: { orderId, event: "lose", patch: { lostAt: at }, detail: `${error.reason}: ${error.detail}` } }
      const code = refusalCode(error)
      if (code === undefined) return { move: { orderId, event: "lose", patch: { lostAt: at }, detail: error.message } }
      return { move: { orderId, event: "refuse", patch: { code }, detail: error.message }, block: blockOf(error) }
    }

    /**
     * Records the answers that came since the last time in one commit. An acceptance needs no
     * sync (a power loss that drops it leaves the order `submitting`, found again by
     * reconciliation), so a commit per answer would only cost time.
     */
    const recordAnswers = Effect.gen(function* () {
      const group = answered
      answered = []
      if (group.length === 0) return
      const moves: Array<Move> = []
      // In the order they came: an acceptance shows that a block was resolved, a refusal may tell of a new one.
      let block = yield* bus.blocked
      for (const { order, outcome, at } of group) {
        const recorded = moveOfAnswer(order, outcome, at)
        moves.push(recorded.move)
        if (recorded.move.event === "accept" && block !== undefined && block.code !== STOPPING) {
          block = undefined
          yield* Ref.set(bus.block, undefined)
        } else if (recorded.block !== undefined) {
          block = recorded.block
          yield* noteBlock(recorded.block)
        }
      }
      // A write that fails (a full disk) must not stop the recording of later answers.
      const written = yield* Effect.exit(moveMany(moves))
      if (Exit.isSuccess(written)) {
        for (const row of written.value) if (row?.state === "accepted" && row.cancelRequested) yield* FiberSet.run(sends, sendCancel(row))
      } else {
        yield* logEvent("reconcile.mismatch", {
          problem: `the answers to ${group.length} placements could not be written to the journal: they stay submitting until the next start reconciles them`,
          detail: Cause.pretty(written.cause)
        })
      }
      sendsDone(group.length)
    })
    // One timer turn gathers the answers of the requests in flight that came meanwhile.
    yield* Effect.forkScoped(Effect.forever(Queue.take(recorderWake).pipe(Effect.zipRight(Effect.sleep(0)), Effect.zipRight(Effect.uninterruptible(recordAnswers)))))

    /** A marked placement took its send slot; when few marked ones are left, the next group may be marked. */
    const slotTaken = Effect.suspend(() => {
      markedWaiting -= 1
      return markedWaiting <= markAhead ? Queue.offer(markerWake, undefined) : Effect.void
    })

    /** One of `sendConcurrency` senders: sends marked placements one at a time, each once, and leaves the answer to be recorded. */
    const sender = Effect.forever(
      Effect.gen(function* () {
        const order = yield* Queue.take(readyToSend)
        yield* slotTaken
        const outcome = yield* Effect.exit(place(order))
        answered.push({ order, outcome, at: yield* Clock.currentTimeMillis })
        yield* Queue.offer(recorderWake, undefined)
      })
    )
    const senders = yield* FiberSet.make()
    for (let i = 0; i < settings.execution.sendConcurrency; i++) yield* FiberSet.run(senders, sender)

    /** Whether placements are blocked now; past the probe time one is let through, and its answer tells whether the block was resolved. */
    const blockedAt = (block: PlacementBlock | undefined, now: number): string | undefined => {
      if (block === undefined) return undefined
      if (now >= blockProbeAt) {
        blockProbeAt = now + BLOCK_PROBE_MS
        return undefined
      }
      return `${block.code}: ${block.fix}`
    }

    /** What the risk checks of a batch read from the market and the books: read once, before the batch's transaction. */
    const riskInputs = (strategyId: string, placements: ReadonlyArray<PlaceIntent>, now: number) =>
      Effect.gen(function* () {
        const balances = yield* market.balances
        const pairs: ReadonlyMap<string, PairRules> = yield* market.pairs.pipe(Effect.orElseSucceed(() => new Map()))
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
        return { batch, block: yield* bus.blocked }
      })

    type RiskInputs = Effect.Effect.Success<ReturnType<typeof riskInputs>>

    /**
     * Risk-checks and journals a strategy's intents in order, inside the journal's transaction.
     * Each check sees the orders journaled before it, in this batch too.
     */
    const decide = (j: JournalBatch, strategyId: string, intents: ReadonlyArray<Intent>, outboxIds: ReadonlyArray<number> | undefined, inputs: RiskInputs | undefined, now: number) => {
      const placements = intents.filter((intent): intent is PlaceIntent => intent.type !== "cancel")
      const assessments =
        inputs === undefined
          ? []
          : decideBatch(strategyId, placements, j.unfinished(), inputs.batch, placements.map(() => blockedAt(inputs.block, now)), settings.risk)
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

    /** Logs what a committed batch decided and sends its cancels; its placements are published and queued by the caller. */
    const carryOut = (strategyId: string, decision: Decision, now: number): Effect.Effect<SubmitResult> =>
      Effect.gen(function* () {
        switch (decision._tag) {
          case "Placed": {
            const { order } = decision
            yield* logEvent("order.intent", {
              strategy: strategyId,
              tag: order.tag,
              intentId: order.intentId,
              symbol: order.symbol,
              side: order.side,
              type: order.type,
              notional: decision.notional.toFixed()
            })
            return { _tag: "Approved", intentId: order.intentId!, tag: order.tag!, orderId: order.orderId }
          }
          case "RiskRefused": {
            const { refused, intentId, tag } = decision
            if (refused.reason === "kill-switch") {
              const day = startOfUtcDay(now)
              const tripped = yield* Ref.modify(killSwitchDay, (m) => [m.get(strategyId) === day, new Map(m).set(strategyId, day)])
              if (!tripped) yield* logEvent("risk.kill-switch", { strategy: strategyId, detail: refused.detail })
            }
            yield* logEvent("risk.refused", { strategy: strategyId, tag, intentId, reason: refused.reason, detail: refused.detail })
            return { _tag: "Refused", intentId, tag, reason: refused.reason, detail: refused.detail }
          }
          case "CancelRefused":
            return decision.result
          case "Cancel":
            if (decision.marked !== undefined) yield* FiberSet.run(sends, sendCancel(decision.marked))
            return decision.result
        }
      })

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
          const placements = intents.filter((intent): intent is PlaceIntent => intent.type !== "cancel")
          const inputs = placements.length === 0 ? undefined : yield* riskInputs(strategyId, placements, now)
          const decisions = yield* journal.batch((j) => decide(j, strategyId, intents, outboxIds, inputs, now))
          const results = yield* Effect.forEach(decisions, (decision) => carryOut(strategyId, decision, now))
          const placed = decisions.flatMap((decision) => (decision._tag === "Placed" ? [decision.order] : []))
          yield* bus.publishOrders(placed, now)
          yield* enqueue(placed)
          return results
        }),
      /** Sends an order journaled in state `intent` (used by the startup reconcile for intents a crash left unsent). */
      send: (order: OrderRow) => enqueue([order]),
      markCancel,
      sendCancel,
      move,
      moveMany,
      /** Waits until every placement and cancel sent so far has its answer (a withdrawn placement needs none). */
      awaitSends: Effect.zipRight(sendsIdle.await, FiberSet.awaitEmpty(sends)),
      /**
       * Ends the senders at the end of a stop and records the answers already heard: from then on
       * nothing of this run moves a placement, so the stop's account of the journal stays true. A
       * placement a sender still held stays `submitting`, for the next start's reconcile.
       */
      endSends: Effect.zipRight(FiberSet.clear(senders), recordAnswers),
      /** How many placements the stop withdrew, counting those a group or a submit under way at its call withdrew later. */
      withdrawn: Effect.sync(() => withdrawnCount),
      /** The strategies whose daily loss limit stopped their placements today (UTC). */
      killSwitchesToday: Effect.gen(function* () {
        const today = startOfUtcDay(yield* Clock.currentTimeMillis)
        return [...(yield* Ref.get(killSwitchDay))].filter(([, day]) => day === today).map(([strategyId]) => strategyId)
      }),
      /**
       * Stops placements at shutdown, so that nothing new reaches the service: risk refuses new
       * intents, and every placement not yet handed to a sender is withdrawn (`refused`, code
       * STOPPING), now and whenever a submit under way queues one later. Placements a sender has
       * taken may be on the wire: they are left to their answer, or to reconciliation.
       */
      stopPlacements: (reason: string): Effect.Effect<void> =>
        Effect.sync(() => (blockProbeAt = Number.POSITIVE_INFINITY)).pipe(
          Effect.zipRight(Ref.set(bus.block, { code: STOPPING, fix: reason })),
          Effect.zipRight(
            marking.withPermits(1)(
              Effect.suspend(() => {
                withdrawing = true
                return withdrawWaiting
              })
            )
          ),
          Effect.uninterruptible
        )
    }
  })
}) {}
