/**
 * pino as the Effect logger. One JSON line per event on stdout (pretty on a TTY),
 * `event` naming an entry of the catalog, annotations as fields. Secrets are
 * censored by path, scrubbed by value, and key ids shortened to 12 characters.
 */
import { Effect, FiberRef, HashMap, HashSet, Layer, Logger, LogLevel } from "effect"
import { pino, type DestinationStream, type Logger as Pino } from "pino"
import pretty from "pino-pretty"
import { EventCatalog, type EventLevel, type EventName } from "./Events.js"
import { maskKeyFields, redactPaths, REDACTED, scrub } from "./Redaction.js"

export interface LoggerOptions {
  /** Where lines go; stdout when absent. Tests pass a capturing stream. */
  readonly destination?: DestinationStream
  /** Human-readable output; defaults to true when stdout is a TTY and no destination is given. */
  readonly pretty?: boolean
  readonly level?: EventLevel
}

/** Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org) or the terminal is dumb. */
export const colourOn = (stream: { readonly isTTY?: boolean }, env: Readonly<Record<string, string | undefined>>): boolean =>
  stream.isTTY === true && (env.NO_COLOR === undefined || env.NO_COLOR === "") && env.TERM !== "dumb"

export const makePino = (options: LoggerOptions = {}): Pino => {
  const usePretty = options.pretty ?? (options.destination === undefined && process.stdout.isTTY === true)
  const destination: DestinationStream =
    options.destination ??
    (usePretty ? pretty({ colorize: colourOn(process.stdout, process.env), singleLine: true, messageKey: "event" }) : pino.destination({ dest: 1, sync: true }))
  return pino(
    {
      level: options.level ?? "info",
      base: null,
      messageKey: "event",
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: [...redactPaths], censor: REDACTED },
      formatters: {
        level: (label) => ({ level: label }),
        log: (object) => maskKeyFields(object)
      },
      hooks: { streamWrite: scrub }
    },
    destination
  )
}

const pinoLevel = (level: LogLevel.LogLevel): EventLevel | undefined => {
  switch (level._tag) {
    case "Fatal":
      return "fatal"
    case "Error":
      return "error"
    case "Warning":
      return "warn"
    case "Info":
      return "info"
    case "Debug":
    case "Trace":
      return "debug"
    default:
      return undefined
  }
}

/** An Effect Logger writing through `target`: the message is the event name, annotations become fields. */
export const effectLogger = (target: Pino) =>
  Logger.make<unknown, void>(({ annotations, cause, logLevel, message }) => {
    const level = pinoLevel(logLevel)
    if (level === undefined) return
    const fields: Record<string, unknown> = {}
    for (const [key, value] of HashMap.toEntries(annotations)) fields[key] = value
    const parts = Array.isArray(message) ? message : [message]
    const [first, ...rest] = parts
    if (rest.length > 0) fields.detail = rest.length === 1 ? rest[0] : rest
    if (cause._tag !== "Empty") fields.cause = String(cause)
    target[level](fields, typeof first === "string" ? first : String(first))
  })

/**
 * pino in place of every logger installed before (Effect's default, or a pino
 * layer an outer command installed): two loggers would print every line twice.
 * Hooks that watch the log stream (`Logger.add`) go on top of this layer.
 */
export const layer = (options: LoggerOptions = {}): Layer.Layer<never> =>
  Layer.merge(
    Layer.scopedDiscard(Effect.locallyScoped(FiberRef.currentLoggers, HashSet.make(effectLogger(makePino(options))))),
    Logger.minimumLogLevel(options.level === "debug" ? LogLevel.Debug : LogLevel.Info)
  )

const effectLevel: Record<EventLevel, LogLevel.LogLevel> = {
  debug: LogLevel.Debug,
  info: LogLevel.Info,
  warn: LogLevel.Warning,
  error: LogLevel.Error,
  fatal: LogLevel.Fatal
}

/** Writes one catalog event at its catalog level with the given fields. */
export const logEvent = (event: EventName, fields: Record<string, unknown> = {}): Effect.Effect<void> =>
  Effect.logWithLevel(effectLevel[EventCatalog[event].level], event).pipe(Effect.annotateLogs(fields))
