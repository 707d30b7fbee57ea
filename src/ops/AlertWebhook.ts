/**
 * The alert webhook: a generic JSON POST to an operator's URL for the events that
 * need a human now (the key stopped working, the account is blocked, the kill
 * switch fired, the ledger disagrees with the exchange). Logs remain the record;
 * the webhook only wakes someone up, so it is best effort: a bounded queue, a
 * bounded number of attempts, and `alert.failed` when a delivery gives up.
 *
 * Hooking it up needs no call sites: `AlertWebhook.logHook` adds an Effect logger
 * that picks alert events out of the ordinary `logEvent` lines.
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { Chunk, Clock, Data, Duration, Effect, Fiber, FiberRef, FiberRefs, HashSet, Layer, Logger, LogLevel, Queue, Redacted, Ref, Schedule } from "effect"
import { Decimal, toJsonNumber } from "../domain/Decimal.js"
import { stringify } from "../domain/Json.js"
import { EventCatalog, isEventName, type EventName } from "../log/Events.js"
import { lineOf, logEvent } from "../log/Logger.js"
import { maskKeyFields, registerSecret, scrub } from "../log/Redaction.js"

/** The events that page an operator unless the configuration names others. */
export const DEFAULT_ALERT_EVENTS: ReadonlyArray<EventName> = [
  "auth.invalid",
  "account.blocked",
  "risk.kill-switch",
  "reconcile.mismatch",
  "order.lost",
  "strategy.paused",
  "engine.loop-failed"
]

export interface AlertWebhookOptions {
  /** The receiver. Chat webhook URLs carry their token in the path, so the URL is treated as a secret. */
  readonly url: string | Redacted.Redacted<string>
  readonly events?: ReadonlyArray<EventName>
  /** Attempts per alert, the first included. */
  readonly maxAttempts?: number
  /** First retry delay; later delays double up to `maxRetryDelayMs`, with jitter. */
  readonly retryBaseMs?: number
  readonly maxRetryDelayMs?: number
  readonly attemptTimeoutMs?: number
  /** Alerts waiting for delivery; more are dropped rather than held in memory without bound. */
  readonly queueCapacity?: number
  /** Names this daemon in the payload when several report to one receiver. */
  readonly instance?: string
  /** How long shutdown waits for queued alerts (a kill switch at shutdown must still be sent). */
  readonly flushTimeoutMs?: number
}

/** The JSON body POSTed for one alert. */
export interface AlertPayload {
  readonly source: "svcbot"
  readonly instance?: string
  readonly event: EventName
  readonly level: string
  readonly meaning: string
  readonly time: string
  /** One line for chat receivers (Slack and Mattermost show `text`). */
  readonly text: string
  readonly fields: Record<string, unknown>
}

export class AlertWebhookUrlInvalid extends Data.TaggedError("AlertWebhookUrlInvalid")<{
  readonly problem: string
}> {}

export class AlertDeliveryFailed extends Data.TaggedError("AlertDeliveryFailed")<{
  readonly reason: string
  /** 5xx, 408, 429, timeouts and network errors are worth another attempt; other answers are final. */
  readonly retryable: boolean
}> {}

/** Field names whose values are never sent, whatever they hold. */
const SECRET_FIELD = /secret|signature|password|passphrase|token|authorization|cookie|credential|private/i
const MAX_DEPTH = 4

const sanitizeValue = (value: unknown, depth: number): unknown => {
  if (value === null || typeof value === "string" || typeof value === "boolean") return value
  if (typeof value === "number") return Number.isFinite(value) ? value : String(value)
  if (typeof value === "bigint") return value.toString()
  if (typeof value !== "object") return undefined
  if (value instanceof Date) return value.toISOString()
  if (value instanceof Error) return { name: value.name, message: value.message }
  if (Redacted.isRedacted(value)) return undefined
  // Amounts travel as exact decimal strings, as in the API's own answers.
  if (Decimal.isDecimal(value)) return toJsonNumber(value)
  if (depth >= MAX_DEPTH) return "[truncated]"
  if (Array.isArray(value)) return value.map((item) => sanitizeValue(item, depth + 1) ?? null)
  const prototype = Object.getPrototypeOf(value)
  // Other value classes (ids, branded wrappers) are written by their own string form.
  if (prototype !== Object.prototype && prototype !== null) return String(value)
  return sanitizeFields(value as Record<string, unknown>, depth + 1)
}

/**
 * The fields of a log line made safe to leave the machine: secret-named fields
 * dropped, key ids shortened, anything that is not plain data reduced to text.
 * Registered secret values are scrubbed later from the serialized body.
 */
export const sanitizeFields = (fields: Record<string, unknown>, depth = 0): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  for (const [name, value] of Object.entries(maskKeyFields(fields))) {
    if (SECRET_FIELD.test(name)) continue
    const safe = sanitizeValue(value, depth)
    if (safe !== undefined) out[name] = safe
  }
  return out
}

export const makePayload = (event: EventName, fields: Record<string, unknown>, time: Date, instance?: string): AlertPayload => {
  const { level, meaning } = EventCatalog[event]
  return {
    source: "svcbot",
    ...(instance === undefined ? {} : { instance }),
    event,
    level,
    meaning,
    time: time.toISOString(),
    text: `[svcbot${instance === undefined ? "" : ` ${instance}`}] ${event}: ${meaning}`,
    fields: sanitizeFields(fields)
  }
}

/** The exact bytes sent: registered secrets are scrubbed from the whole body as a last line of defence. */
export const payloadBody = (payload: AlertPayload): string => scrub(stringify(payload))

const parseReceiver = (url: string): Effect.Effect<string, AlertWebhookUrlInvalid> =>
  Effect.try({
    try: () => new URL(url),
    catch: () => new AlertWebhookUrlInvalid({ problem: "alerts.webhookUrl is not an absolute URL (e.g. https://hooks.example.com/...)" })
  }).pipe(
    Effect.filterOrFail(
      (parsed) => parsed.protocol === "https:" || parsed.protocol === "http:",
      () => new AlertWebhookUrlInvalid({ problem: "alerts.webhookUrl must be an http or https URL" })
    ),
    Effect.map((parsed) => parsed.host)
  )

/**
 * The loggers of the fiber that raised an alert. The delivery fiber is forked when the
 * layer is built, possibly before the application's logger is installed; its
 * alert.sent and alert.failed lines go where the alert event itself went.
 */
interface LogContext {
  readonly loggers: HashSet.HashSet<Logger.Logger<unknown, unknown>>
  readonly minimumLevel: LogLevel.LogLevel
}

interface QueuedAlert {
  readonly event: EventName
  readonly fields: Record<string, unknown>
  readonly time: Date
  readonly log: LogContext
}

const currentLogContext: Effect.Effect<LogContext> = Effect.all({
  loggers: FiberRef.get(FiberRef.currentLoggers),
  minimumLevel: FiberRef.get(FiberRef.currentMinimumLogLevel)
})

const withLogContext = (log: LogContext) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  effect.pipe(Effect.locally(FiberRef.currentLoggers, log.loggers), Effect.locally(FiberRef.currentMinimumLogLevel, log.minimumLevel))

const describeError = (cause: unknown): string => {
  if (typeof cause === "object" && cause !== null && "_tag" in cause) {
    const tag = String(cause._tag)
    const reason = "reason" in cause ? String(cause.reason) : undefined
    return reason === undefined ? tag : `${tag}: ${reason}`
  }
  return String(cause)
}

export class AlertWebhook extends Effect.Service<AlertWebhook>()("svcbot/AlertWebhook", {
  scoped: (options: AlertWebhookOptions) =>
    Effect.gen(function* () {
      const client = yield* HttpClient.HttpClient
      const url = Redacted.isRedacted(options.url) ? Redacted.value(options.url) : options.url
      // Only the host is ever logged: the path of a chat webhook is its credential.
      const receiver = yield* parseReceiver(url)
      registerSecret(url)
      const alertEvents: ReadonlySet<string> = new Set(options.events ?? DEFAULT_ALERT_EVENTS)
      const maxAttempts = Math.max(1, options.maxAttempts ?? 5)
      const attemptTimeout = Duration.millis(options.attemptTimeoutMs ?? 5000)
      const retrySchedule = Schedule.exponential(Duration.millis(options.retryBaseMs ?? 500)).pipe(
        Schedule.union(Schedule.spaced(Duration.millis(options.maxRetryDelayMs ?? 30_000))),
        Schedule.jittered,
        Schedule.intersect(Schedule.recurs(maxAttempts - 1))
      )

      const attempt = (body: string): Effect.Effect<number, AlertDeliveryFailed> =>
        client
          .execute(
            HttpClientRequest.post(url).pipe(
              HttpClientRequest.setHeader("user-agent", "svcbot-alerts"),
              HttpClientRequest.bodyText(body, "application/json")
            )
          )
          .pipe(
            Effect.flatMap((response) => Effect.as(Effect.ignore(response.text), response.status)),
            Effect.mapError((error) => new AlertDeliveryFailed({ reason: describeError(error), retryable: true })),
            Effect.timeoutFail({
              duration: attemptTimeout,
              onTimeout: () => new AlertDeliveryFailed({ reason: `no answer within ${Duration.format(attemptTimeout)}`, retryable: true })
            }),
            Effect.filterOrElse(
              (status) => status >= 200 && status < 300,
              (status) =>
                Effect.fail(
                  new AlertDeliveryFailed({
                    reason: `HTTP ${status}`,
                    retryable: status >= 500 || status === 408 || status === 429
                  })
                )
            )
          )

      /** Delivers one alert now, with retries; the outcome is logged as alert.sent or alert.failed. */
      const send = (event: EventName, fields: Record<string, unknown> = {}, time?: Date): Effect.Effect<boolean> =>
        Effect.gen(function* () {
          const at = time ?? new Date(yield* Clock.currentTimeMillis)
          const body = payloadBody(makePayload(event, fields, at, options.instance))
          let attempts = 0
          return yield* Effect.suspend(() => {
            attempts += 1
            return attempt(body)
          }).pipe(
            Effect.retry({ schedule: retrySchedule, while: (error) => error.retryable }),
            Effect.matchEffect({
              onSuccess: (status) => Effect.as(logEvent("alert.sent", { alert: event, receiver, status, attempts }), true),
              onFailure: (error) => Effect.as(logEvent("alert.failed", { alert: event, receiver, attempts, reason: error.reason }), false)
            })
          )
        })

      const deliver = (alert: QueuedAlert) => send(alert.event, alert.fields, alert.time).pipe(withLogContext(alert.log))
      const queue = yield* Queue.dropping<QueuedAlert>(options.queueCapacity ?? 100)
      const inFlight = yield* Ref.make<QueuedAlert | undefined>(undefined)
      const takeNext = Effect.uninterruptibleMask((restore) => restore(Queue.take(queue)).pipe(Effect.tap((alert) => Ref.set(inFlight, alert))))
      const worker = yield* Effect.forkScoped(
        Effect.forever(takeNext.pipe(Effect.flatMap(deliver), Effect.zipRight(Ref.set(inFlight, undefined))))
      )
      // At shutdown the alert being delivered is sent again from the start rather than lost
      // (a receiver may see it twice), then the queue is drained, all within a bound.
      yield* Effect.addFinalizer(() =>
        Fiber.interrupt(worker).pipe(
          Effect.zipRight(Effect.zip(Ref.get(inFlight), Queue.takeAll(queue))),
          Effect.flatMap(([current, pending]) =>
            Effect.forEach([...(current === undefined ? [] : [current]), ...Chunk.toReadonlyArray(pending)], deliver, { discard: true })
          ),
          Effect.timeout(Duration.millis(options.flushTimeoutMs ?? 10_000)),
          Effect.ignore
        )
      )

      const isAlertEvent = (event: string): event is EventName => alertEvents.has(event) && isEventName(event)

      /** Queues the event for delivery when it is an alert event; never waits for the receiver. */
      const notify = (event: EventName, fields: Record<string, unknown> = {}): Effect.Effect<void> =>
        isAlertEvent(event)
          ? Effect.flatMap(Effect.zip(Clock.currentTimeMillis, currentLogContext), ([now, log]) => Queue.offer(queue, { event, fields, time: new Date(now), log }))
          : Effect.void

      /** An Effect logger that queues every alert event logged through `logEvent`. */
      const logger = Logger.make<unknown, void>(({ annotations, context, date, message }) => {
        const line = lineOf(message, annotations)
        if (!isAlertEvent(line.event)) return
        const log: LogContext = {
          loggers: FiberRefs.getOrDefault(context, FiberRef.currentLoggers),
          minimumLevel: FiberRefs.getOrDefault(context, FiberRef.currentMinimumLogLevel)
        }
        // The fields may be the caller's own object, and the alert is sent later: it keeps a copy.
        queue.unsafeOffer({ event: line.event, fields: { ...line.fields }, time: date, log })
      })

      return { send, notify, logger, events: alertEvents } as const
    })
}) {
  /** Adds the service's logger to the running program, so alert events logged anywhere are delivered. */
  static readonly logHook: Layer.Layer<never, never, AlertWebhook> = Layer.unwrapEffect(
    Effect.map(AlertWebhook, (alerts) => Logger.add(alerts.logger))
  )

  /** The service plus its log hook: what the daemon provides when `alerts.webhookUrl` is set. */
  static readonly layer = (options: AlertWebhookOptions): Layer.Layer<AlertWebhook, AlertWebhookUrlInvalid, HttpClient.HttpClient> =>
    AlertWebhook.logHook.pipe(Layer.provideMerge(AlertWebhook.Default(options)))
}
