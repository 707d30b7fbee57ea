/**
 * A strategy of the user's own, kept outside svcbot's tree as the container
 * mounts it at /strategies: the example plugin copied into a temp folder, run by
 * `svcbot backtest --strategy FILE` and by a daemon config naming the file, both
 * from the checkout (tsx registered by the launcher) and from the production
 * build laid out as in the image (compiled loader, tsx registered by it).
 */
import { execFile } from "node:child_process"
import { copyFileSync, cpSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { events, killAll, ROOT, svcbot } from "../support/daemon.js"

const ENV = { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "" }
const plugins = mkdtempSync(join(tmpdir(), "svcbot-user-strategies-"))
const image = mkdtempSync(join(tmpdir(), "svcbot-image-"))
const PLUGIN = join(plugins, "breakout.ts")
const PARAMS = JSON.stringify({ lookback: 20, quoteQty: "500" })

afterAll(() => {
  killAll()
  rmSync(plugins, { recursive: true, force: true })
  rmSync(image, { recursive: true, force: true })
})

const exec = (file: string, args: ReadonlyArray<string>, cwd: string): Promise<{ code: number; stdout: string; stderr: string }> =>
  new Promise((done) => {
    execFile(file, args, { cwd, env: ENV, timeout: 240_000, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) =>
      done({ code: error === null ? 0 : typeof error.code === "number" ? error.code : -1, stdout, stderr })
    )
  })

/** `svcbot backtest` of a plugin file, from the checkout or from the image layout. */
const backtest = (root: string, plugin: string, db: string) =>
  exec(process.execPath, [join(root, "bin/svcbot.js"), "backtest", "--strategy", plugin, "--params", PARAMS, "--synthetic", "7:3000", "--db", db, "--json"], root)

interface BacktestOut {
  readonly strategy: string
  readonly sourceHash: string
  readonly metrics: Readonly<Record<string, unknown>>
  readonly fills: ReadonlyArray<unknown>
}

beforeAll(() => copyFileSync(join(ROOT, "examples/strategies/breakout.ts"), PLUGIN))

describe("a strategy plugin from a folder outside the source tree", () => {
  let checkoutRun: ReturnType<typeof backtest> | undefined
  /** The checkout's backtest, run once for the tests that read it. */
  const fromCheckout = () => (checkoutRun ??= backtest(ROOT, PLUGIN, join(plugins, "checkout.db")))

  it("backtests through the CLI from the checkout", async () => {
    const result = await fromCheckout()
    expect(result.stderr, result.stderr).toBe("")
    expect(result.code).toBe(0)
    const out = JSON.parse(result.stdout) as BacktestOut
    expect(out.strategy).toBe("breakout")
    expect(out.fills.length, "the breakout traded on the synthetic tape").toBeGreaterThan(0)
  })

  it("runs in the daemon when a config names the file", async () => {
    const config = join(plugins, "config.json")
    writeFileSync(
      config,
      JSON.stringify({
        mode: "paper",
        venue: { embedded: true, tape: "synthetic:42", tickMs: 500, settleMs: 50 },
        database: { path: join(plugins, "daemon.db") },
        strategies: [{ id: "mine", strategy: PLUGIN, symbol: "BTCUSDT", candleInterval: "1m", params: { lookback: 20, quoteQty: "100" }, allocation: { USDT: "1000" } }]
      })
    )
    const run = svcbot(["run", "--config", config, "--for", "6s"])
    expect(await run.exit, run.stderr.join("")).toBe(0)
    const logged = events(run)
    expect(logged.find((e) => e.event === "strategy.started")).toMatchObject({ strategy: "mine", plugin: "breakout", symbol: "BTCUSDT" })
    expect(logged.filter((e) => e.event === "strategy.error")).toEqual([])
  })

  describe("in the image's layout (compiled, no TypeScript sources)", () => {
    beforeAll(async () => {
      const build = await exec(process.execPath, [join(ROOT, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.build.json", "--outDir", join(image, "dist")], ROOT)
      expect(build.stdout + build.stderr, "tsc -p tsconfig.build.json").toBe("")
      for (const part of ["bin", "package.json"]) cpSync(join(ROOT, part), join(image, part), { recursive: true })
      cpSync(join(ROOT, "migrations"), join(image, "dist/migrations"), { recursive: true })
      symlinkSync(join(ROOT, "node_modules"), join(image, "node_modules"), "dir")
    }, 240_000)

    it("compiles the .ts plugin and backtests it to the same result as the checkout", async () => {
      const result = await backtest(image, PLUGIN, join(plugins, "image.db"))
      expect(result.stderr, result.stderr).toBe("")
      expect(result.code).toBe(0)
      const fromImage = JSON.parse(result.stdout) as BacktestOut
      const checkout = JSON.parse((await fromCheckout()).stdout) as BacktestOut
      expect(fromImage.sourceHash).toBe(checkout.sourceHash)
      expect(fromImage.metrics).toEqual(checkout.metrics)
      expect(fromImage.fills).toEqual(checkout.fills)
    })

    it("loads a plain .js plugin as an ES module, with effect resolved from svcbot's own packages", async () => {
      const plugin = join(plugins, "hold.js")
      writeFileSync(
        plugin,
        [
          'import { Schema } from "effect"',
          'import { defineStrategy, result } from "svcbot/strategy"',
          "const State = Schema.Struct({ candles: Schema.Number })",
          'export default defineStrategy({ name: "hold", version: "1.0.0", params: Schema.Struct({}), state: State, init: () => ({ candles: 0 }),',
          "  onCandle: (state) => result({ candles: state.candles + 1 }) })",
          ""
        ].join("\n")
      )
      const result = await exec(process.execPath, [join(image, "bin/svcbot.js"), "backtest", "--strategy", plugin, "--synthetic", "7:300", "--db", join(plugins, "hold.db"), "--json"], image)
      expect(result.stderr, result.stderr).toBe("")
      expect(result.code).toBe(0)
      expect(JSON.parse(result.stdout)).toMatchObject({ strategy: "hold", metrics: { candles: 300, fills: 0 } })
    })

    const refused = async (name: string, source: string | undefined) => {
      const plugin = join(plugins, name)
      if (source !== undefined) writeFileSync(plugin, source)
      const result = await backtest(image, plugin, join(plugins, "refused.db"))
      expect(result.code, result.stdout).toBe(2)
      expect(result.stderr).toContain(plugin)
      return result.stderr
    }

    it("names a missing file and what its folder holds", async () => {
      expect(await refused("missing.ts", undefined)).toMatch(/does not exist; .* holds breakout\.ts/)
      expect(await refused("../no-such-folder/x.ts", undefined)).toMatch(/the folder .*no-such-folder does not exist \(in a container, mount your strategies folder there/)
    })

    it("names a file that exports no strategy, with the export it needs", async () => {
      expect(await refused("nothing.ts", "export const answer = 42\n")).toMatch(/exports no strategy: end it with `export default defineStrategy/)
    })

    it("names a file that does not compile, with the line", async () => {
      const stderr = await refused("broken.ts", 'import { defineStrategy } from "svcbot/strategy"\nexport default defineStrategy({ name: "broken"\n')
      expect(stderr).toMatch(/does not compile: .*broken\.ts:3:0: ERROR/s)
      expect(stderr).toContain("fix the syntax at the line shown")
    })

    it("names an import that cannot be found, with the modules a plugin may import", async () => {
      const stderr = await refused("typo.ts", 'import { defineStrategy } from "svcbot/strategies"\nexport default defineStrategy\n')
      expect(stderr).toMatch(/imports a module that cannot be found: svcbot has no module "svcbot\/strategies"/)
      expect(stderr).toContain("a plugin may import svcbot/strategy, svcbot/strategy/orders")
    })
  })

  it("the example type-checks against the strategy API", async () => {
    const result = await exec(process.execPath, [join(ROOT, "node_modules/typescript/bin/tsc"), "-p", "examples/strategies"], ROOT)
    expect(result.stdout + result.stderr).toBe("")
    expect(result.code).toBe(0)
  })
})
