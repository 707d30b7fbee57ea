import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { heatMapOf, renderPage } from "../../src/optimize/Page.js"
import type { StoredResult } from "../../src/optimize/Results.js"
import type { RunOutcome } from "../../src/optimize/Summary.js"

const result = (fast: number, slow: number, qty: string, pnl: string | null, toMs = 100): StoredResult => ({
  key: `${fast}-${slow}-${qty}-${toMs}`,
  params: JSON.stringify({ fastPeriod: fast, quoteQty: qty, slowPeriod: slow }),
  fromMs: 0,
  toMs,
  ...(pnl === null ? { error: "refused" } : { metrics: { pnl } })
})

describe("the heat map", () => {
  const rows = [
    result(3, 20, "100", "5"),
    result(3, 20, "200", "7"),
    result(5, 20, "100", "-2"),
    result(3, 40, "100", null),
    result(5, 40, "200", "1"),
    // A longer window that fewer candidates reached (a later halving slice) is not the one mapped.
    result(3, 20, "200", "99", 200)
  ]

  it("maps the window most candidates ran, each cell the best over the other params", () => {
    const map = Either.getOrThrow(heatMapOf(rows, "profit"))
    expect(map).toMatchObject({ x: "fastPeriod", y: "quoteQty", window: { fromMs: 0, toMs: 100 }, xs: ["3", "5"], ys: ["100", "200"] })
    const bySlow = Either.getOrThrow(heatMapOf(rows, "profit", ["fastPeriod", "slowPeriod"]))
    expect(bySlow.ys).toEqual(["20", "40"])
    expect(Object.fromEntries([...bySlow.cells].map(([k, c]) => [k, c.value]))).toEqual({ "3|20": 7, "5|20": -2, "3|40": null, "5|40": 1 })
    expect(bySlow.cells.get("3|20")!.params).toBe(rows[1]!.params)
  })

  it("names the params there are when asked for one that is not", () => {
    const bad = heatMapOf(rows, "profit", ["fastPeriod", "slow"])
    expect(Either.isLeft(bad) && bad.left.message).toBe('--heatmap: "slow" is not a param of this run; its params are fastPeriod, quoteQty, slowPeriod')
    const flat = heatMapOf([result(3, 20, "100", "1")], "profit")
    expect(Either.isLeft(flat) && flat.left.message).toBe("no param takes more than one value, so there is nothing to map")
  })

  it("is drawn on a page that loads nothing and runs no script, with every tried cell and the folds", () => {
    const outcome: RunOutcome = {
      runId: 4,
      strategy: "sma-crossover",
      symbol: "BTCUSDT",
      data: "synthetic:1:100",
      objective: "profit",
      window: { fromMs: 0, toMs: 100 },
      candidates: 5,
      trials: 6,
      search: { method: "grid" },
      seed: 1,
      constraints: {},
      ranked: [{ params: rows[1]!.params, rung: 0, window: { fromMs: 0, toMs: 100 }, metrics: { pnl: "7" }, objective: "7", violations: [], feasible: true }],
      walkForward: {
        spec: "1h:1h",
        overfitFolds: 1,
        folds: [
          {
            index: 0,
            train: { fromMs: 0, toMs: 50 },
            test: { fromMs: 50, toMs: 100 },
            params: rows[1]!.params,
            feasible: true,
            inSample: { objective: "4", perWindow: "4" },
            outOfSample: { objective: "1", perWindow: "1" },
            retention: 0.25,
            overfit: true,
            trials: 6
          }
        ]
      }
    }
    const page = renderPage(outcome, heatMapOf(rows, "profit", ["fastPeriod", "slowPeriod"]))
    expect(page).toContain(`<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">`)
    expect(page).not.toMatch(/<script|src=|href=/)
    expect(page.match(/<rect [^>]*><title>fastPeriod/g)).toHaveLength(4)
    expect(page).toContain("<title>fastPeriod 3, slowPeriod 40: profit -\n")
    expect(page).toContain("Walk-forward 1h:1h")
    expect(page).toContain('<tr class="bad"><td>1</td>')
    expect(page).toContain("<td>25 %</td><td>OVERFIT</td>")
  })
})
