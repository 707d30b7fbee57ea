/**
 * A cluster batch request and its answer are read to the exact form svcbot writes, field by
 * field, and a message with any field out of that form is refused whole: the worker uses
 * none of it (a dataset hash becomes a file name, a strategy reference a file it imports).
 */
import { Either, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { canonicalParams } from "../../src/domain/Hash.js"
import { MAX_BATCH } from "../../src/optimize/Batches.js"
import { TrialAnswer, TrialsAnswer, TrialsRequest } from "../../src/optimize/TrialMessages.js"

const HASH = "a".repeat(64)
const request = {
  runId: 7,
  study: {
    strategy: "sma-crossover",
    sourceHash: "0123456789abcdef".repeat(4),
    dataHash: "fedcba9876543210".repeat(4),
    symbol: "BTCUSDT",
    balances: { USDT: "10000", BTC: "0" },
    fees: { maker: "0.001", taker: "0.001" },
    settleDelayMs: 50,
    schedule: "0 */4 * * *"
  },
  trials: [{ key: HASH, params: canonicalParams({ fastPeriod: 5, slowPeriod: 20, entry: "market", quoteQty: "100" }), fromMs: 1_704_067_200_000, toMs: 1_704_672_000_000 }]
}

const decodeRequest = Schema.decodeUnknownEither(TrialsRequest)
const decodeAnswer = Schema.decodeUnknownEither(TrialAnswer)
const decodeBatchAnswer = Schema.decodeUnknownEither(TrialsAnswer)

/** The request with one field of the study or the trial replaced. */
const withStudy = (field: string, value: unknown) => ({ ...request, study: { ...request.study, [field]: value } })
const withTrial = (field: string, value: unknown) => ({ ...request, trials: [...request.trials, { ...request.trials[0]!, [field]: value }] })

describe("a cluster batch request", () => {
  it("is read as svcbot writes it: a shipped strategy's name or a plugin path, hashes, a pair, amounts, canonical params", () => {
    expect(decodeRequest(request)).toEqual(Either.right(request))
    for (const strategy of ["grid", "examples/strategies/breakout.ts", "/strategies/breakout.mjs", "./my plugins/ma.js"]) {
      expect(Either.isRight(decodeRequest(withStudy("strategy", strategy))), strategy).toBe(true)
    }
  })

  const refused: ReadonlyArray<readonly [string, unknown]> = [
    ["a dataset hash that climbs out of the cache folder", withStudy("dataHash", "../../../home/svcbot/.ssh/authorized_keys")],
    ["a dataset hash with a path in it", withStudy("dataHash", `${"a".repeat(60)}/../x`)],
    ["a dataset hash in upper case", withStudy("dataHash", "A".repeat(64))],
    ["a dataset hash one digit short", withStudy("dataHash", "a".repeat(63))],
    ["a dataset hash one digit long", withStudy("dataHash", "a".repeat(65))],
    ["an empty dataset hash", withStudy("dataHash", "")],
    ["a source hash that is not hex", withStudy("sourceHash", "g".repeat(64))],
    ["a trial key that is not a hash", withTrial("key", "../../etc/passwd")],
    ["a trial key with a trailing newline", withTrial("key", `${HASH}\n`)],
    ["a strategy that is neither a name nor a plugin file", withStudy("strategy", "/etc/passwd")],
    ["a strategy path with a control character", withStudy("strategy", "/strategies/a\u0000.ts")],
    ["a strategy path beyond any real one", withStudy("strategy", `/${"d/".repeat(600)}x.ts`)],
    ["a symbol that is not a pair", withStudy("symbol", "btc/usdt")],
    ["a balance that is not an amount", withStudy("balances", { USDT: "1e400x" })],
    ["a balance of an asset that is not one", withStudy("balances", { "../x": "1" })],
    ["a fee that is not an amount", withStudy("fees", { maker: "cheap", taker: "0.001" })],
    ["a settle delay beyond a minute", withStudy("settleDelayMs", 3_600_000)],
    ["a schedule that is not cron", withStudy("schedule", "whenever")],
    ["params that are not JSON", withTrial("params", "{fastPeriod: 5}")],
    ["params that are not canonical", withTrial("params", '{ "slowPeriod": 20, "fastPeriod": 5 }')],
    ["params beyond 64 KiB", withTrial("params", JSON.stringify({ pad: "x".repeat(70_000) }))],
    ["a slice time that is not an integer", withTrial("fromMs", 1.5)],
    ["a negative slice time", withTrial("toMs", -1)],
    ["a run id that is not positive", { ...request, runId: 0 }],
    ["no trials", { ...request, trials: [] }],
    [`more than ${MAX_BATCH} trials`, { ...request, trials: Array.from({ length: MAX_BATCH + 1 }, () => request.trials[0]) }]
  ]
  for (const [what, message] of refused) {
    it(`is refused whole with ${what}`, () => {
      expect(Either.isLeft(decodeRequest(message))).toBe(true)
    })
  }
})

describe("a cluster trial answer", () => {
  it("is read with its key, its metrics as metricsToJson writes them, or its error", () => {
    const answer = { key: HASH, metrics: { trades: 4, sharpe: 1.25, netProfit: "12.5", maxDrawdownPct: null } }
    expect(decodeAnswer(answer)).toEqual(Either.right(answer))
    expect(Either.isRight(decodeAnswer({ key: HASH, error: "no candles open in the slice" }))).toBe(true)
  })

  it("is refused with a key that is not a hash, a metric that is not a name or an amount, or an error beyond 64 KiB", () => {
    for (const answer of [
      { key: "../x", metrics: {} },
      { key: HASH, metrics: { "net profit": 1 } },
      { key: HASH, metrics: { netProfit: "lots" } },
      { key: HASH, error: "x".repeat(64 * 1024 + 1) }
    ]) {
      expect(Either.isLeft(decodeAnswer(answer)), JSON.stringify(answer).slice(0, 80)).toBe(true)
    }
  })
})

describe("a cluster batch answer", () => {
  const answer = { worker: "10.0.0.7:34431", ran: 1, ms: 35.5, results: [{ key: HASH, error: "no candles open in the slice" }] }

  it("is read with the worker, the trials it ran, their time and a result per trial", () => {
    expect(decodeBatchAnswer(answer)).toEqual(Either.right(answer))
  })

  it("is refused with a time that is negative or not finite, a count beyond a batch, or a result that is not one", () => {
    for (const wrong of [
      { ...answer, ms: -1 },
      { ...answer, ms: Number.POSITIVE_INFINITY },
      { ...answer, ran: MAX_BATCH + 1 },
      { ...answer, worker: "" },
      { ...answer, results: [{ key: "../x" }] }
    ]) {
      expect(Either.isLeft(decodeBatchAnswer(wrong)), JSON.stringify(wrong).slice(0, 80)).toBe(true)
    }
  })

  it("is written by the worker as it built it, and checked where it is read", () => {
    const withMetrics = { ...answer, results: [{ key: HASH, metrics: { netPnl: "12.5", trades: 3, sharpe: null } }] }
    expect(Schema.encodeSync(TrialsAnswer)(withMetrics)).toEqual(withMetrics)
    expect(decodeBatchAnswer(Schema.encodeSync(TrialsAnswer)(withMetrics))).toEqual(Either.right(withMetrics))
    const unreadable = { ...answer, results: [{ key: HASH, metrics: { netPnl: "1e999999999" } }] }
    expect(Schema.encodeSync(TrialsAnswer)(unreadable)).toEqual(unreadable)
    expect(Either.isLeft(decodeBatchAnswer(unreadable))).toBe(true)
  })
})
