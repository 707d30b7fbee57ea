/**
 * The sender: journaled placements (state `intent`) out to the service, each once.
 * Three fibers share the work. The marker marks the next group `submitting` in one
 * commit and syncs it to disk before any of it may go out, each group reaching the
 * senders after the one marked before it (Sequence.ts); `sendConcurrency`
 * senders place marked orders one at a time; the recorder writes the answers that came
 * within a few milliseconds (or all of them, once none is left on the wire) in one commit.
 * A lost answer makes the order `unknown` for reconciliation: nothing is re-sent here.
 *
 * The order budget is shared among strategy instances in turns (Turns.ts): placements
 * are marked and sent one instance after the other, and a sender takes the next only
 * while no placement waits for the budget (`Budget.placementTurn`). So while the budget
 * binds, the choice of what goes next is made when the budget can let it go, in turn,
 * and an instance that submits many placements at once cannot hold back the first
 * placement of one that submits later.
 *
 * Execution enqueues what a submit journaled and the startup reconcile what a crash
 * left unsent; the stop withdraws what no sender took yet, waits for the sender to
 * be idle and ends the sends.
 */
import { Cause, Clock, Effect, Either, Exit, FiberSet, Option, Queue } from "effect"
import type { InvalidTransition } from "../domain/OrderState.js"
import { logEvent } from "../log/Logger.js"
import { Database } from "../store/Database.js"
import { type Move, OrderJournal } from "../store/OrderJournal.js"
import { isStorageFailure } from "../store/StorageHealth.js"
import type { OrderRow } from "../store/OrderRow.js"
import type { Accepted } from "../svc/Api.js"
import { Budget } from "../svc/Budget.js"
import { CIRCUIT_OPEN, ErrorCode } from "../svc/ErrorCodes.js"
import type { PlacementOutcomeUnknown, SvcError } from "../svc/Errors.js"
import { SvcClient } from "../svc/SvcClient.js"
import { AccountBlock, blockOf, STOPPING } from "./AccountBlock.js"
import { Cancels } from "./Cancels.js"
import type { PlacementBlock } from "./EngineBus.js"
import { OrderMoves } from "./OrderMoves.js"
import { makeSequence, type Place } from "./Sequence.js"
import { EngineSettings } from "./Settings.js"
import { supervised } from "./Supervised.js"
import { Turns } from "./Turns.js"

const WITHDRAWN = "withdrawn: the engine stopped before this placement was sent"

/** Whose turn a placement waits for: its strategy instance (placements of no instance share one turn). */
const instanceOf = (order: OrderRow): string => order.strategyId ?? ""

type Outcome = Exit.Exit<Accepted, SvcError | PlacementOutcomeUnknown>

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
      return CIRCUIT_OPEN
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

/** Placements handed to the sender whose outcome is not recorded yet; `idle` is open while there are none. */
const makeOutstanding = Effect.map(Effect.makeLatch(true), (idle) => {
  let count = 0
  return {
    add: (n: number) => {
      if (count === 0) idle.unsafeClose()
      count += n
    },
    done: (n: number) => {
      count -= n
      if (count === 0) idle.unsafeOpen()
    },
    awaitIdle: idle.await
  }
})

/**
 * The longest an answer waits for others to be recorded with it, while placements are still on
 * the wire: their answers come within a round trip, and a commit per answer or two would cost
 * more than the rows it writes. Nor is a group closed after one answer per sender: during a
 * burst that makes a commit, a publish and a batch of log lines every two or three milliseconds.
 */
const RECORD_WITHIN_MS = 5

/** What the service answered to one placement, and when. */
interface Answer {
  readonly order: OrderRow
  readonly outcome: Outcome
  readonly at: number
}

/**
 * What the service answered to placements, waiting to be recorded together. A group is ready
 * once it holds `groupSize` answers (as many as can be marked ahead), no placement is left on the
 * wire (no answer is coming to join it) or RECORD_WITHIN_MS have passed since its first answer;
 * `gathered` waits until one is. The window is a plain timer, armed by a group's first answer:
 * a race against a sleep would fork two fibers per group.
 */
const makeAnswers = (groupSize: number) =>
  Effect.map(Effect.makeLatch(false), (ready) => {
    let waiting: Array<Answer> = []
    let onWire = 0
    let window: ReturnType<typeof setTimeout> | undefined
    return {
      /** A placement goes on the wire: its answer is coming. */
      sending: () => {
        onWire += 1
      },
      push: (order: OrderRow, outcome: Outcome, at: number): void => {
        onWire -= 1
        waiting.push({ order, outcome, at })
        if (waiting.length >= groupSize || onWire === 0) ready.unsafeOpen()
        else if (waiting.length === 1) window = setTimeout(() => ready.unsafeOpen(), RECORD_WITHIN_MS)
      },
      takeAll: () => {
        const taken = waiting
        waiting = []
        clearTimeout(window)
        window = undefined
        ready.unsafeClose()
        return taken
      },
      gathered: ready.await
    }
  })

export class Sender extends Effect.Service<Sender>()("svcbot/Sender", {
  scoped: Effect.gen(function* () {
    const client = yield* SvcClient
    const clock = yield* Effect.clock
    const journal = yield* OrderJournal
    const database = yield* Database
    const moves = yield* OrderMoves
    const cancels = yield* Cancels
    const accountBlock = yield* AccountBlock
    const settings = yield* EngineSettings
    // The key's budget sits beside its client (SvcClient.layerWith provides both); the engine's
    // layer names only the client as its requirement, so the budget is looked up here.
    const budget = yield* Effect.flatMap(Effect.serviceOption(Budget), (found) =>
      Option.isSome(found) ? Effect.succeed(found.value) : Effect.dieMessage("the sender needs the key's Budget beside its SvcClient (SvcClient.layerWith provides both)")
    )
    // A first sync now opens the write-ahead log for every later one: left to the first marked
    // group, the open came on top of that sync, before the first placement of every start. Should
    // it fail (a full disk), the start goes on: a group's own sync is what lets placements go out.
    yield* Effect.catchAllCause(database.syncToDisk, () => Effect.void)
    /** Groups being handed over to the senders once synced. */
    const handOvers = yield* FiberSet.make()
    /** Groups in the order they were marked: each reaches the senders after the one marked before it. */
    const markOrder = makeSequence()
    const outstanding = yield* makeOutstanding
    const answers = yield* makeAnswers(settings.execution.markGroupSize)

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

    // The marker's state: what waits to be marked, what is marked and waits for a sender, and the stop.
    const { markGroupSize, sendConcurrency } = settings.execution
    /** What the marker keeps marked ahead of the senders while the order budget could not take `markGroupSize` placements at once. */
    const shallowDepth = Math.min(markGroupSize, 2 * sendConcurrency)
    /**
     * How many placements may be marked and not yet sent now: `markGroupSize` only while the
     * exchange's order budget, as last reported, has room for that many at once. Once it binds,
     * placements go out at its pace, and a deep marked queue would hold back the first placement
     * of an instance that submits later: the turns choose among marked placements only.
     */
    const depthNow = Effect.map(budget.snapshot, (budgets) => {
      const rooms = [[budgets.ordersLimit10s, budgets.ordersUsed10s] as const, [budgets.ordersLimit1d, budgets.ordersUsed1d] as const]
      const room = budgets.ordersLimit10s === null ? 0 : Math.min(...rooms.map(([limit, used]) => (limit === null ? Number.POSITIVE_INFINITY : limit - used)))
      return room >= markGroupSize ? markGroupSize : shallowDepth
    })
    /** Marked placements not yet taken by a sender when the next group may be marked: a group is synced while half of the depth is still to go out. */
    let markAhead = Math.max(1, Math.floor(shallowDepth / 2))
    /** Placements journaled (state `intent`) and waiting to be marked, by instance, each instance's in journal order. */
    const awaitingMark = new Turns<string, number>()
    /** Placements marked and synced to disk, waiting for a sender, by instance. */
    const readyToSend = new Turns<string, OrderRow>()
    /** One for each placement put in `readyToSend`: a sender takes one, then the placement whose turn it is. */
    const readyCount = yield* Queue.unbounded<void>()
    /** Placements marked and not yet taken by a sender. */
    let markedWaiting = 0
    const markerWake = yield* Queue.sliding<void>(1)
    /** Set when the engine stops: from then on no placement is handed to a sender; each is withdrawn instead. */
    let withdrawing = false
    /** Placements withdrawn since the stop began: at its call, and by a group or a submit that was under way then. */
    let withdrawnCount = 0
    /** Marking a group and withdrawing take turns: a placement is either marked and sent, or withdrawn unsent, never both. */
    const marking = yield* Effect.makeSemaphore(1)

    /**
     * Ends placements that never reached a sender as `refused` with code STOPPING, in one commit:
     * nothing of them was sent, so the next start has nothing to send or reconcile for them.
     */
    const withdraw = (rows: ReadonlyArray<OrderRow>): Effect.Effect<void> =>
      Effect.gen(function* () {
        if (rows.length === 0) return
        const now = yield* Clock.currentTimeMillis
        const withdrawals = rows.map((row): Move => ({ orderId: row.orderId, event: "withdraw", patch: { code: STOPPING }, detail: WITHDRAWN }))
        // A write that fails (a full disk) must not stop the stop: the rows stay as they were, and its report counts them.
        const written = yield* Effect.exit(journal.transitionMany(withdrawals, now))
        if (Exit.isFailure(written)) {
          yield* logEvent("reconcile.mismatch", {
            problem: `${rows.length} placements could not be withdrawn in the journal: an intent among them is sent by the next start, a submitting one reconciled`,
            detail: Cause.pretty(written.cause)
          })
          return
        }
        const withdrawn: Array<OrderRow> = []
        for (const [i, m] of withdrawals.entries()) {
          const outcome = written.value[i]!
          if (outcome._tag === "Left") yield* moves.refused(m.orderId, outcome.left, m.detail)
          else withdrawn.push(outcome.right)
        }
        withdrawnCount += withdrawn.length
        yield* moves.announce(withdrawn, withdrawn.map(() => WITHDRAWN), now, true)
      })

    /**
     * Withdraws every placement not handed to a sender yet: marked ones waiting for a sender,
     * queued ones waiting to be marked, and journaled ones never queued (a submit interrupted
     * between its commit and its queueing). Runs holding `marking`, so no group is half marked.
     */
    const withdrawWaiting = Effect.gen(function* () {
      const taken = readyToSend.takeAll()
      yield* Queue.takeAll(readyCount)
      markedWaiting -= taken.length
      const queued = awaitingMark.takeAll().length
      yield* withdraw([...taken, ...(yield* journal.inStates(["intent"]))])
      outstanding.done(taken.length + queued)
    })

    /**
     * Hands the placements of a marked group to the senders once the commit is on disk: after a
     * power loss the journal still knows they may have been sent. A group marked while the one
     * before syncs may find its own sync ended first: it waits for its `place` in the sequence.
     */
    const handOver = (group: ReadonlyArray<number>, moved: ReadonlyArray<Either.Either<OrderRow, InvalidTransition>>, now: number, place: Place) =>
      Effect.gen(function* () {
        yield* database.syncToDisk
        yield* place.turn
        const sendable: Array<OrderRow> = []
        for (const [i, orderId] of group.entries()) {
          const outcome = moved[i]!
          if (outcome._tag === "Right") {
            sendable.push(outcome.right)
          } else {
            markedWaiting -= 1
            outstanding.done(1)
            yield* moves.refused(orderId, outcome.left, undefined)
          }
        }
        yield* moves.announce(sendable, [], now, false)
        // Only now may any of them be sent, unless the engine began to stop while the commit was synced.
        yield* marking.withPermits(1)(
          Effect.suspend(() => {
            if (!withdrawing) {
              for (const order of sendable) readyToSend.push(instanceOf(order), order)
              return Queue.offerAll(readyCount, sendable.map(() => undefined))
            }
            markedWaiting -= sendable.length
            return Effect.zipRight(withdraw(sendable), Effect.sync(() => outstanding.done(sendable.length)))
          })
        )
        // No sender will take the ones refused: room for the next group is made here.
        if (sendable.length < group.length) yield* Queue.offer(markerWake, undefined)
      }).pipe(Effect.ensuring(place.release))

    /**
     * Marks the next group of placements `submitting` in one commit and syncs it to disk off the
     * event loop, while the group before goes out. At most `markGroupSize` placements are marked
     * and not yet sent: a crash leaves at most those and the sends in flight marked, each resolved
     * by reconciliation (`unknown`, then found or proven not placed).
     */
    const markNextGroup = Effect.gen(function* () {
      // A placement queued after the stop began (its submit was under way) is withdrawn like the others.
      if (withdrawing) return yield* withdrawWaiting
      if (awaitingMark.size === 0) return
      const depth = yield* depthNow
      markAhead = Math.max(1, Math.floor(depth / 2))
      if (markedWaiting > markAhead) return
      // Senders with nothing to send get a group of one placement each at once; the marker fills
      // the rest of the buffer while those are on the wire.
      const group = awaitingMark.takeUpTo(markedWaiting === 0 ? Math.min(sendConcurrency, depth) : depth - markedWaiting)
      markedWaiting += group.length
      const now = yield* Clock.currentTimeMillis
      const moved = yield* Effect.exit(journal.transitionMany(
        group.map((orderId) => ({ orderId, event: "send" as const, patch: { sentAt: now } })),
        now
      ))
      if (Exit.isFailure(moved)) {
        // The group stays `intent`, never sent: the stop withdraws it with the rest, or the next start
        // sends it. The stop ends so a mark that waited for a failing storage; anything else is a
        // defect of the marker's own, which its supervision tells of before it marks the next group.
        markedWaiting -= group.length
        outstanding.done(group.length)
        if (!Option.exists(Cause.dieOption(moved.cause), isStorageFailure)) return yield* Effect.failCause(moved.cause)
        return
      }
      yield* FiberSet.run(handOvers, Effect.uninterruptible(handOver(group, moved.value, now, markOrder.take())))
    })
    yield* Effect.forkScoped(supervised("marker", Effect.forever(Effect.zipRight(Queue.take(markerWake), Effect.uninterruptible(marking.withPermits(1)(markNextGroup))))))

    /** The move that records what the service answered to a placement, and the block its refusal tells of, if any. */
    const moveOfAnswer = (order: OrderRow, outcome: Outcome, at: number): { readonly move: Move; readonly block?: PlacementBlock | undefined } => {
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

    /** One group of answers, recorded in one commit. */
    const record = (group: ReadonlyArray<Answer>) =>
      Effect.gen(function* () {
        const recorded: Array<Move> = []
        // In the order they came: an acceptance shows that a block was resolved, a refusal may tell of a new one.
        let block = yield* accountBlock.current
        for (const { order, outcome, at } of group) {
          const answer = moveOfAnswer(order, outcome, at)
          recorded.push(answer.move)
          if (answer.move.event === "accept" && block !== undefined && block.code !== STOPPING) {
            block = undefined
            yield* accountBlock.lifted
          } else if (answer.block !== undefined) {
            block = answer.block
            yield* accountBlock.noted(answer.block)
          }
        }
        // A write that fails (a full disk) must not stop the recording of later answers.
        const written = yield* Effect.exit(moves.moveMany(recorded))
        if (Exit.isSuccess(written)) {
          // Its cancel was asked for while the placement was on the wire: the order has a name to cancel by now.
          for (const row of written.value) if (row?.state === "accepted" && row.cancelRequested) yield* cancels.sendInBackground(row)
        } else {
          yield* logEvent("reconcile.mismatch", {
            problem: `the answers to ${group.length} placements could not be written to the journal: they stay submitting until the next start reconciles them`,
            detail: Cause.pretty(written.cause)
          })
        }
      })
    /**
     * Records the answers that came since the last time in one commit. An acceptance needs no
     * sync (a power loss that drops it leaves the order `submitting`, found again by
     * reconciliation), so a commit per answer would only cost time.
     */
    const recordAnswers = Effect.suspend(() => {
      const group = answers.takeAll()
      if (group.length === 0) return Effect.void
      // Answered, recorded or not: a defect while recording them must not leave the stop waiting for them.
      return Effect.ensuring(record(group), Effect.sync(() => outstanding.done(group.length)))
    })
    yield* Effect.forkScoped(supervised("answer recorder", Effect.forever(Effect.zipRight(answers.gathered, Effect.uninterruptible(recordAnswers)))))

    /** Sends the placement whose turn it is, once, and leaves its answer to be recorded. */
    const sendTurn = Effect.suspend(() => {
      const order = readyToSend.take()
      // The stop withdrew it meanwhile.
      if (order === undefined) return Effect.void
      markedWaiting -= 1
      answers.sending()
      // When few marked placements are left and more wait, the next group may be marked.
      if (markedWaiting <= markAhead && awaitingMark.size > 0) Queue.unsafeOffer(markerWake, undefined)
      return Effect.matchCause(place(order), {
        onFailure: (cause) => answers.push(order, Exit.failCause(cause), clock.unsafeCurrentTimeMillis()),
        onSuccess: (accepted) => answers.push(order, Exit.succeed(accepted), clock.unsafeCurrentTimeMillis())
      })
    })

    /**
     * One of `sendConcurrency` senders: sends marked placements one at a time. It takes the
     * placement whose turn it is only once no placement waits for the budget, and goes on to the
     * budget in the same step, so the turn is not taken early. Each round waits on the wire or
     * for a placement, so the loop does without `Effect.forever`'s yield after every round.
     */
    const sender: Effect.Effect<never> = Effect.flatMap(Queue.take(readyCount), () =>
      Effect.flatMap(budget.placementTurn, () => Effect.flatMap(sendTurn, () => sender))
    )
    const senders = yield* FiberSet.make()
    for (let i = 0; i < sendConcurrency; i++) yield* FiberSet.run(senders, sender)

    return {
      /** Queues journaled placements (state `intent`) to be marked, synced and sent, each once. */
      enqueue: (orders: ReadonlyArray<OrderRow>): Effect.Effect<void> =>
        Effect.suspend(() => {
          if (orders.length === 0) return Effect.void
          outstanding.add(orders.length)
          for (const order of orders) awaitingMark.push(instanceOf(order), order.orderId)
          return Queue.offer(markerWake, undefined)
        }),
      /**
       * Withdraws every placement not yet handed to a sender (`refused`, code STOPPING), now and
       * whenever a submit under way queues one later. Placements a sender has taken may be on the
       * wire: they are left to their answer, or to reconciliation.
       */
      withdraw: marking.withPermits(1)(
        Effect.suspend(() => {
          withdrawing = true
          return withdrawWaiting
        })
      ),
      /** Waits until every placement queued so far has its answer recorded (a withdrawn one needs none). */
      awaitIdle: Effect.zipRight(outstanding.awaitIdle, FiberSet.awaitEmpty(handOvers)),
      /**
       * Ends the senders at the end of a stop and records the answers already heard: from then on
       * nothing of this run moves a placement, so the stop's account of the journal stays true. A
       * placement a sender still held stays `submitting`, for the next start's reconcile.
       */
      endSends: Effect.zipRight(FiberSet.clear(senders), recordAnswers),
      /** How many placements the stop withdrew, counting those a group or a submit under way at its call withdrew later. */
      withdrawn: Effect.sync(() => withdrawnCount)
    }
  })
}) {}
