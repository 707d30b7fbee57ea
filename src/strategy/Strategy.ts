/**
 * The strategy plugin API. A strategy is a set of pure, synchronous handlers
 * `(state, event, view) -> { state, intents }` with no I/O, so the same code runs
 * in backtests (in-process), paper trading and live trading. The host (daemon) and
 * the backtester build the read-only view, call the handlers, journal the intents
 * and persist the state between restarts.
 */
import { Data, Either, ParseResult, Schema, SchemaAST } from "effect"
import { LosslessNumber } from "lossless-json"
import { Decimal, fromJsNumber, fromString, InvalidDecimal, NOT_DECIMAL_TEXT } from "../domain/Decimal.js"
import { DecimalFromString } from "../domain/DecimalSchema.js"
import type { Intent } from "../domain/Intent.js"
import type { Liquidity, OrderKind, OrderType, Side } from "../svc/Dialect.js"

// ---------------------------------------------------------------------------
// The view

export interface Balance {
  /** Free to trade (the wallet's `balance`). */
  readonly free: Decimal
  /** Held by open orders (the wallet's `locked`). */
  readonly locked: Decimal
}

export interface PairRules {
  readonly symbol: string
  readonly base: string
  readonly quote: string
  readonly status: "trading" | "halted"
  readonly tickSize: Decimal
  readonly stepSize: Decimal
  readonly minBaseQty: Decimal
  readonly minNotional: Decimal
}

/** An order of this strategy instance that has not reached a final kind. */
export interface OpenOrder {
  readonly tag: string
  /** Absent while the intent is journaled but its placement not yet accepted. */
  readonly clientOrderId?: string
  readonly symbol: string
  readonly side: Side
  readonly type: OrderType
  /** Zero for a market buy, which is sized in quote. */
  readonly baseQty: Decimal
  readonly filledBaseQty: Decimal
  readonly limitPrice?: Decimal
  readonly stopPrice?: Decimal
  readonly kind: OrderKind
}

/**
 * What a handler may look at. The host builds it; nothing in it may be mutated.
 * `openOrders` holds the orders of this instance only, keyed by tag, from the
 * moment an intent is journaled (kind `pending`, no clientOrderId) until the order
 * reaches a final kind.
 */
export interface StrategyView<P = unknown> {
  /** The instance's validated params (config `params`), so state never has to copy them. */
  readonly params: P
  /** The instance's configured symbol (config `symbol`). */
  readonly symbol: string
  /** Current time in milliseconds since the epoch (tape time in a backtest). */
  readonly now: number
  /** Spot wallet per asset; an absent asset holds nothing. */
  readonly balances: ReadonlyMap<string, Balance>
  readonly openOrders: ReadonlyMap<string, OpenOrder>
  /** Last traded price per symbol. */
  readonly lastPrices: ReadonlyMap<string, Decimal>
  readonly pairs: ReadonlyMap<string, PairRules>
}

// ---------------------------------------------------------------------------
// Events

export interface CandleEvent {
  readonly symbol: string
  readonly interval: string
  /** Open time in milliseconds; the candle is delivered once it has closed. */
  readonly openTime: number
  readonly open: Decimal
  readonly high: Decimal
  readonly low: Decimal
  readonly close: Decimal
  readonly volume: Decimal
  /**
   * True for the history an instance is given before its first live candle. Warm-up feeds
   * indicators only: intents a handler returns for a warm-up candle are dropped by the host.
   */
  readonly warmup?: boolean
}

export interface TickerEvent {
  readonly symbol: string
  readonly price: Decimal
  readonly time: number
}

/** The name of the timer driven by the instance's config `schedule` (a cron expression). */
export const SCHEDULE_TIMER = "schedule"

export interface TimerEvent {
  readonly name: string
  /** The time the cron expression fired for, in milliseconds. */
  readonly scheduledAt: number
}

/**
 * How an order of the instance progressed. Beyond the server's kinds: `refused`
 * (the server or the pre-trade risk check refused the placement; `code` says why)
 * and `not_placed` (a placement whose answer was lost was proven never accepted).
 */
export const OrderUpdateKind = Schema.Literal("pending", "resting", "fill", "rejected", "cancelled", "refused", "not_placed", "lost")
export type OrderUpdateKind = typeof OrderUpdateKind.Type

const FINAL_UPDATE_KINDS: ReadonlySet<OrderUpdateKind> = new Set<OrderUpdateKind>(["fill", "rejected", "cancelled", "refused", "not_placed", "lost"])

/** After a final update the order is gone: its tag may be reused and its funds are free. */
export const isFinalUpdate = (kind: OrderUpdateKind): boolean => FINAL_UPDATE_KINDS.has(kind)

export interface OrderUpdateEvent {
  readonly tag: string
  readonly clientOrderId?: string
  readonly kind: OrderUpdateKind
  /** The reject or refusal code (e.g. SPOT_INSUFFICIENT_FUNDS). */
  readonly code?: string
  readonly filledBaseQty: Decimal
  readonly avgPrice?: Decimal
}

export interface FillEvent {
  readonly tag: string
  readonly fillId: string
  readonly side: Side
  readonly price: Decimal
  readonly baseQty: Decimal
  readonly quoteQty: Decimal
  readonly fee: Decimal
  readonly feeAsset: string
  readonly liquidity: Liquidity
  readonly time: number
}

// ---------------------------------------------------------------------------
// Definitions

export interface HandlerResult<S> {
  readonly state: S
  readonly intents: ReadonlyArray<Intent>
}

/**
 * A handler owns the state it is given: it may return a new object or the same
 * object updated in place (an O(1) indicator window cannot be copied per candle).
 * The caller must use only the returned state afterwards.
 */
export type Handler<S, E, P> = (state: S, event: E, view: StrategyView<P>) => HandlerResult<S>

/**
 * Series a strategy draws over the price in a backtest report, by name (the legend's): each reads
 * its value from the state after a candle, undefined while it has none (an average still filling).
 * They are read only when a report is written; a run without one never calls them.
 */
export type StrategyPlots<S> = Readonly<Record<string, (state: S) => number | Decimal | undefined>>

export interface StrategyDefinition<P = any, S = any> {
  /** Lower-case words joined by `-`; the file name under `strategies/`. */
  readonly name: string
  readonly version: string
  /** Validates config `params`; see `decodeParams` and the `Param` field schemas. */
  readonly params: Schema.Schema<P, any>
  /**
   * Encodes the state to JSON-safe values and back; the host stores
   * `serializeState` and restores with `deserializeState`. Decimals go through
   * `DecimalFromString`.
   */
  readonly state: Schema.Schema<S, any>
  /** Called only when the instance has no stored state. Orders are placed from the first event on. */
  readonly init: (params: P, view: StrategyView<P>) => S
  /** Symbols whose prices the strategy reads besides the configured one (default: none). */
  readonly symbols?: (params: P) => ReadonlyArray<string>
  readonly onCandle?: Handler<S, CandleEvent, P>
  readonly onTicker?: Handler<S, TickerEvent, P>
  readonly onTimer?: Handler<S, TimerEvent, P>
  readonly onOrderUpdate?: Handler<S, OrderUpdateEvent, P>
  readonly onFill?: Handler<S, FillEvent, P>
  /** Indicator series the backtest report draws over the price (see `StrategyPlots`). */
  readonly plots?: StrategyPlots<S>
}

const STRATEGY_NAME = /^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$/

export class InvalidStrategyDefinition extends Data.TaggedError("InvalidStrategyDefinition")<{ readonly message: string }> {}

/** Checks the definition's shape once, at load, so a broken plugin fails by name instead of mid-run. */
export const defineStrategy = <P, S>(definition: StrategyDefinition<P, S>): StrategyDefinition<P, S> => {
  if (!STRATEGY_NAME.test(definition.name)) {
    throw new InvalidStrategyDefinition({ message: `strategy name ${JSON.stringify(definition.name)} must be lower-case words joined by "-"` })
  }
  if (definition.version.trim() === "") {
    throw new InvalidStrategyDefinition({ message: `strategy ${definition.name} needs a version` })
  }
  const handlers = [definition.onCandle, definition.onTicker, definition.onTimer, definition.onOrderUpdate, definition.onFill]
  if (handlers.every((handler) => handler === undefined)) {
    throw new InvalidStrategyDefinition({ message: `strategy ${definition.name} defines no handler (onCandle, onTicker, onTimer, onOrderUpdate, onFill)` })
  }
  for (const [series, read] of Object.entries(definition.plots ?? {})) {
    if (typeof read !== "function") {
      throw new InvalidStrategyDefinition({ message: `strategy ${definition.name}: plot "${series}" must be a function from the state to a number, a Decimal or undefined` })
    }
  }
  return definition
}

/** The shared empty intent list, so a handler that does nothing allocates nothing for it. */
export const NO_INTENTS: ReadonlyArray<Intent> = Object.freeze([])

export const result = <S>(state: S, intents: ReadonlyArray<Intent> = NO_INTENTS): HandlerResult<S> => ({ state, intents })

// ---------------------------------------------------------------------------
// Schemas for params and state

const DecimalFromSelf = Schema.typeSchema(DecimalFromString)

/** Decimals in state are stored as their exact decimal strings. */
export { DecimalFromString }

const parseDecimal = (text: string, ast: SchemaAST.AST, actual: unknown) => {
  try {
    return ParseResult.succeed(fromString(text))
  } catch (error) {
    if (!(error instanceof InvalidDecimal)) throw error
    const shown = JSON.stringify(text.length > 64 ? `${text.slice(0, 64)}...` : text)
    const problem = error.problem === NOT_DECIMAL_TEXT ? "is not a decimal number such as 12.345" : `is beyond the bounds of an amount (${error.problem})`
    return ParseResult.fail(new ParseResult.Type(ast, actual, `${shown} ${problem}`))
  }
}

/**
 * A config number read exactly: a decimal string ("0.5"), a JSON number token
 * kept by lossless-json, or a plain JSON number (read by its shortest text).
 */
const ConfigNumber = Schema.Union(Schema.String, Schema.Number, Schema.instanceOf(LosslessNumber)).annotations({
  message: () => "expected a number such as 0.5 or a decimal string such as \"0.5\""
})

const configText = (value: string | number | LosslessNumber): string | undefined =>
  typeof value === "string" ? value : typeof value === "number" ? (Number.isFinite(value) ? fromJsNumber(value).toFixed() : undefined) : value.value

const DecimalParamBase = Schema.transformOrFail(ConfigNumber, DecimalFromSelf, {
  strict: true,
  decode: (value, _, ast) => {
    const text = configText(value)
    return text === undefined ? ParseResult.fail(new ParseResult.Type(ast, value, "not a finite number")) : parseDecimal(text, ast, value)
  },
  encode: (value) => ParseResult.succeed(value.toFixed())
})

const IntParamBase = Schema.transformOrFail(ConfigNumber, Schema.Number, {
  strict: true,
  decode: (value, _, ast) => {
    const text = configText(value)
    const n = text === undefined ? Number.NaN : Number(text)
    return Number.isSafeInteger(n) && /^-?\d+$/.test(text ?? "")
      ? ParseResult.succeed(n)
      : ParseResult.fail(new ParseResult.Type(ast, value, `${JSON.stringify(text ?? String(value))} is not a whole number`))
  },
  encode: (n) => ParseResult.succeed(n)
})

interface Bounds {
  readonly min?: string | number
  readonly max?: string | number
}

const inBounds = (value: Decimal, bounds: Bounds): string | true => {
  if (bounds.min !== undefined && value.lt(bounds.min)) return `${value.toFixed()} is below the minimum ${bounds.min}`
  if (bounds.max !== undefined && value.gt(bounds.max)) return `${value.toFixed()} is above the maximum ${bounds.max}`
  return true
}

/**
 * Field schemas for strategy params. Each takes a `description` that says what
 * the field is and what values it takes; `decodeParams` prints it as the fix
 * next to each problem. An optional field is
 * `Schema.optionalWith(field, { exact: true, default? })`: params come from JSON,
 * which has no `undefined`, and without `exact` a bad value is also reported as
 * "Expected undefined".
 */
export const Param = {
  /** An exact decimal (prices, quantities, amounts, weights). */
  decimal: (description: string, bounds: Bounds & { readonly positive?: boolean } = {}) =>
    DecimalParamBase.pipe(
      Schema.filter((value) => (bounds.positive === true && value.lte(0) ? `${value.toFixed()} must be greater than 0` : inBounds(value, bounds))),
      Schema.annotations({ description })
    ),
  /** A whole number (periods, counts, basis points, milliseconds). */
  int: (description: string, bounds: { readonly min: number; readonly max: number }) =>
    IntParamBase.pipe(
      Schema.filter((n) => inBounds(new Decimal(n), bounds)),
      Schema.annotations({ description })
    ),
  /** One of a few words. */
  choice: <const L extends readonly [string, ...Array<string>]>(description: string, ...choices: L) =>
    Schema.String.pipe(
      Schema.filter((value): value is L[number] => (choices as ReadonlyArray<string>).includes(value), {
        description,
        message: (issue) => `${JSON.stringify(issue.actual)} is not one of ${choices.map((c) => JSON.stringify(c)).join(", ")}`
      })
    ),
  /** An asset ticker such as "BTC". */
  asset: (description: string) =>
    Schema.String.pipe(
      Schema.pattern(/^[A-Z0-9]{2,12}$/, { message: (issue) => `${JSON.stringify(issue.actual)} is not an asset ticker such as "BTC"` }),
      Schema.annotations({ description })
    )
}

// ---------------------------------------------------------------------------
// Params and state at the host boundary

export class InvalidStrategyParams extends Data.TaggedError("InvalidStrategyParams")<{
  readonly instanceId: string
  /** One line per problem: `strategies[<id>].params.<field>: <problem> (<fix>)`. */
  readonly problems: ReadonlyArray<string>
}> {
  override get message(): string {
    return this.problems.join("\n")
  }
}

/** The description of the top-level field of the params struct that `path` starts in. */
const fieldDescription = (ast: SchemaAST.AST, field: PropertyKey | undefined): string | undefined => {
  switch (ast._tag) {
    case "Refinement":
    case "Transformation":
      return fieldDescription(ast.from, field)
    case "TypeLiteral": {
      const property = ast.propertySignatures.find((p) => p.name === field)
      if (property === undefined) return undefined
      const own = SchemaAST.getDescriptionAnnotation(property)
      return own._tag === "Some" ? own.value : descriptionOf(property.type)
    }
    default:
      return undefined
  }
}

const descriptionOf = (ast: SchemaAST.AST): string | undefined => {
  const own = SchemaAST.getDescriptionAnnotation(ast)
  if (own._tag === "Some") return own.value
  if (ast._tag === "Union") {
    // a field made optional without `exact: true` shows up as `T | undefined`
    for (const member of ast.types) {
      const found = descriptionOf(member)
      if (found !== undefined) return found
    }
  }
  return ast._tag === "Refinement" || ast._tag === "Transformation" ? descriptionOf(ast.from) : undefined
}

const knownFields = (ast: SchemaAST.AST): ReadonlyArray<string> =>
  ast._tag === "TypeLiteral"
    ? ast.propertySignatures.map((p) => String(p.name))
    : ast._tag === "Refinement" || ast._tag === "Transformation"
      ? knownFields(ast.from)
      : []

const formatPath = (path: ReadonlyArray<PropertyKey>): string =>
  path.map((key) => (typeof key === "number" ? `[${key}]` : `.${String(key)}`)).join("")

/**
 * Validates an instance's raw `params` (as read from config) with the strategy's
 * schema. Unknown fields are errors, so a misspelt param is never silently ignored.
 */
export const decodeParams = <P>(
  definition: StrategyDefinition<P, any>,
  instanceId: string,
  raw: unknown
): Either.Either<P, InvalidStrategyParams> => {
  const decoded = Schema.decodeUnknownEither(definition.params, { errors: "all", onExcessProperty: "error" })(raw ?? {})
  if (Either.isRight(decoded)) return Either.right(decoded.right)
  const prefix = `strategies[${instanceId}].params`
  const fields = knownFields(definition.params.ast)
  const problems = ParseResult.ArrayFormatter.formatErrorSync(decoded.left).map((issue) => {
    const where = `${prefix}${formatPath(issue.path)}`
    if (issue._tag === "Unexpected") {
      return `${where}: is not a parameter of ${definition.name} (remove it; ${definition.name} takes ${fields.join(", ")})`
    }
    const description = fieldDescription(definition.params.ast, issue.path[0])
    const problem = issue._tag === "Missing" ? "is missing" : issue.message
    const fix = description === undefined ? `see the ${definition.name} section of docs/strategies.md` : `${issue._tag === "Missing" ? "add it: " : "expected "}${description}`
    return `${where}: ${problem} (${fix})`
  })
  return Either.left(new InvalidStrategyParams({ instanceId, problems }))
}

export class InvalidStoredState extends Data.TaggedError("InvalidStoredState")<{ readonly strategy: string; readonly message: string }> {}

/**
 * The state as JSON text, for the host to store after a handler ran. Throws
 * `InvalidStoredState` when a handler returned a state its own schema cannot
 * encode: a bug of the strategy, to be treated like a handler that threw.
 */
/** Each state schema's encoder, made once: making it again for every save cost 9 of the 23 µs a save of sma-crossover's state takes. */
const stateEncoders = new WeakMap<Schema.Schema<any, any>, (state: any) => Either.Either<unknown, ParseResult.ParseError>>()

export const serializeState = <S>(definition: StrategyDefinition<any, S>, state: S): string => {
  let encode = stateEncoders.get(definition.state)
  if (encode === undefined) {
    encode = Schema.encodeEither(definition.state)
    stateEncoders.set(definition.state, encode)
  }
  const encoded = encode(state)
  if (Either.isLeft(encoded)) {
    throw new InvalidStoredState({ strategy: definition.name, message: `the state does not match its schema: ${ParseResult.TreeFormatter.formatErrorSync(encoded.left)}` })
  }
  return JSON.stringify(encoded.right)
}

/**
 * Restores a stored state. A state written by an older version of the strategy
 * that no longer decodes is an error the host handles (e.g. start fresh with `init`).
 */
export const deserializeState = <S>(definition: StrategyDefinition<any, S>, text: string): Either.Either<S, InvalidStoredState> => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (error) {
    return Either.left(new InvalidStoredState({ strategy: definition.name, message: `stored state is not JSON: ${String(error)}` }))
  }
  return Schema.decodeUnknownEither(definition.state)(json).pipe(
    Either.mapLeft((error) => new InvalidStoredState({ strategy: definition.name, message: ParseResult.TreeFormatter.formatErrorSync(error) }))
  )
}
