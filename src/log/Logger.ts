/**
 * pino as the Effect logger. One JSON line per event on stdout (pretty on a TTY),
 * `event` naming an entry of the catalog, its fields and any annotations as fields.
 * Secrets are censored by path, scrubbed by value, and key ids shortened to 12 characters.
 */
import { Cause, Clock, Context, Effect, FiberRef, HashMap, HashSet, Inspectable, Layer, Logger, LogLevel } from "effect"
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

/**
 * Where `redactPaths` censor, as a tree: keys by name, any key (`*`), and whether a path ends here.
 * The names are an array as well as a map: a line walks them without allocating an iterator.
 */
interface CensorNode {
  readonly named: Map<string, CensorNode>
  readonly namedList: Array<readonly [string, CensorNode]>
  any: CensorNode | undefined
  censored: boolean
}

const censorNode = (): CensorNode => ({ named: new Map(), namedList: [], any: undefined, censored: false })

const censorTree: CensorNode = censorNode()
for (const path of redactPaths) {
  let node = censorTree
  // `*.headers["x-svc-signature"]` is `*`, `headers`, `x-svc-signature`.
  for (const [, quoted, plain] of path.matchAll(/\["([^"]+)"\]|([^.[\]]+)/g)) {
    const name = quoted ?? plain!
    if (name === "*") node = node.any ??= censorNode()
    else {
      let child = node.named.get(name)
      if (child === undefined) {
        child = censorNode()
        node.named.set(name, child)
        node.namedList.push([name, child])
      }
      node = child
    }
  }
  node.censored = true
}

/** `source` with what `node` names censored; copied where it changes, so the caller's fields are never written to. */
const censorIn = (source: Record<string, unknown>, node: CensorNode): Record<string, unknown> => {
  let out = source
  for (let i = 0; i < node.namedList.length; i++) out = censorKey(source, out, node.namedList[i]![0], node.namedList[i]![1])
  if (node.any !== undefined) for (const key in source) out = censorKey(source, out, key, node.any)
  return out
}

/** `out` (`source`, or its copy once something was censored) with its `key` censored as `node` says. */
const censorKey = (source: Record<string, unknown>, out: Record<string, unknown>, key: string, node: CensorNode): Record<string, unknown> => {
  const current = out[key]
  if (current === undefined || !Object.hasOwn(out, key)) return out
  const next = node.censored ? REDACTED : current !== null && typeof current === "object" ? censorIn(current as Record<string, unknown>, node) : current
  if (next === current) return out
  const copy = out !== source ? out : Array.isArray(source) ? ([...source] as unknown as Record<string, unknown>) : { ...source }
  copy[key] = next
  return copy
}

let timeMs = Number.NaN
let timeField = ""
/** pino's ISO time field, built once per millisecond: a burst of lines shares one. */
const isoTime = (): string => {
  const now = Date.now()
  if (now !== timeMs) {
    timeMs = now
    timeField = `,"time":"${new Date(now).toISOString()}"`
  }
  return timeField
}

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
      timestamp: isoTime,
      formatters: {
        level: (label) => ({ level: label }),
        // pino's own `redact` option censored the same paths at about 10 us a line: its wildcard
        // paths put every field through its redactor.
        log: (object) => maskKeyFields(censorIn(object, censorTree))
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

/**
 * The message `logEvent` hands to Effect's loggers: the event and its fields travel
 * together, so a line costs no log annotations (a HashMap copied per line and read
 * back into an object by every logger).
 */
export class EventLine {
  constructor(
    readonly event: EventName,
    readonly fields: Record<string, unknown>
  ) {}

  /** Effect's own loggers (a test or tool run without this module's layer) print a message with JSON.stringify. */
  toJSON(): Record<string, unknown> {
    return { event: this.event, ...this.fields }
  }
}

/** A log line as every logger here reads it: the event's name and its fields. */
export interface LogLine {
  readonly event: string
  readonly fields: Readonly<Record<string, unknown>>
}

/**
 * Reads one log line from what an Effect Logger is given. Annotations set around the
 * call (`Effect.annotateLogs`) come first and the event's own fields win over them,
 * as when `logEvent` annotated its fields. svcbot writes only catalog events; any other
 * message comes from a library it runs on (the cluster's runner, for one) and is the
 * catalog's `library.log`, its text as `message` (none for a cause logged alone) and any
 * further parts as `detail`, so every line's `event` stays a name dashboards know.
 */
export const lineOf = (message: unknown, annotations: HashMap.HashMap<string, unknown>): LogLine => {
  const parts: ReadonlyArray<unknown> = Array.isArray(message) ? message : [message]
  const first = parts[0]
  if (first instanceof EventLine && parts.length === 1 && HashMap.isEmpty(annotations)) return first
  const fields: Record<string, unknown> = {}
  for (const [key, value] of HashMap.toEntries(annotations)) fields[key] = value
  if (first instanceof EventLine) Object.assign(fields, first.fields)
  if (parts.length > 1) fields.detail = parts.length === 2 ? parts[1] : parts.slice(1)
  if (first instanceof EventLine) return { event: first.event, fields }
  // A failure logged with its cause alone (the runtime reporting a defect) has no text: the cause says it all.
  if (parts.length > 0) fields.message = typeof first === "string" ? first : String(first)
  return { event: "library.log", fields }
}

/** An Effect Logger writing through `target`: one JSON line per log line, its event as the message. */
export const effectLogger = (target: Pino) =>
  Logger.make<unknown, void>(({ annotations, cause, logLevel, message }) => {
    const level = pinoLevel(logLevel)
    if (level === undefined) return
    const line = lineOf(message, annotations)
    // The fields may be the caller's own object: a cause goes on a copy.
    target[level](cause._tag === "Empty" ? line.fields : { ...line.fields, cause: String(cause) }, line.event)
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

/** A catalog event and its fields, as `logEvents` takes them. */
export type EventLineInput = readonly [event: EventName, fields: Record<string, unknown>]

/**
 * Writes catalog events in one fiber step, each at its catalog level: the lines of a batch (a
 * submit's intents, a commit's order changes) go to the fiber's loggers directly, as the fiber's
 * own `log` hands them over. `Effect.logWithLevel` per line cost two fiber steps and an effect built for each.
 */
export const logEvents = (lines: ReadonlyArray<EventLineInput>): Effect.Effect<void> =>
  lines.length === 0
    ? Effect.void
    : Effect.withFiberRuntime((fiber) => {
        const minimum = fiber.getFiberRef(FiberRef.currentMinimumLogLevel)
        const loggers = fiber.getFiberRef(FiberRef.currentLoggers)
        if (HashSet.size(loggers) === 0) return Effect.void
        // What the fiber's own `log` hands each logger, read once for the batch.
        const spans = fiber.getFiberRef(FiberRef.currentLogSpan)
        const annotations = fiber.getFiberRef(FiberRef.currentLogAnnotations)
        const context = fiber.getFiberRefs()
        const date = new Date(Context.get(fiber.currentDefaultServices, Clock.Clock).unsafeCurrentTimeMillis())
        const fiberId = fiber.id()
        Inspectable.withRedactableContext(context, () => {
          for (const [event, fields] of lines) {
            const logLevel = effectLevel[EventCatalog[event].level]
            if (LogLevel.greaterThan(minimum, logLevel)) continue
            const message = new EventLine(event, fields)
            for (const logger of loggers) logger.log({ fiberId, logLevel, message, cause: Cause.empty, context, spans, annotations, date })
          }
        })
        return Effect.void
      })

/**
 * Writes one catalog event at its catalog level with the given fields. A line below
 * the minimum level is dropped before anything is built for it.
 */
export const logEvent = (event: EventName, fields: Record<string, unknown> = {}): Effect.Effect<void> => logEvents([[event, fields]])
