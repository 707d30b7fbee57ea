/**
 * svcbot's help, as users get it: the built CLI spawned with --help (program name in the usage
 * line, examples, defaults, no escape codes when piped), and every command of the real command
 * tree rendered and its examples parsed. The tree is the one apps/bot/main.ts runs for a command
 * line naming no subcommand: every subcommand.
 */
import { NodeContext } from "@effect/platform-node"
import { Effect } from "effect"
import { execFile } from "node:child_process"
import { existsSync } from "node:fs"
import { afterAll, describe, expect, it } from "vitest"
import { killAll, svcbot } from "../support/daemon.js"
import { request } from "../../src/cli/App.js"
import { svcbotCommand } from "../../src/cli/Commands.js"
import { allCommands, commandTree, renderHelp, styleFor } from "../../src/cli/Help.js"

const root = await svcbotCommand([])
const tree = commandTree(root.descriptor)
const leaves = allCommands(tree).filter((command) => command.children.length === 0)
const plain = { width: 100, color: false }

afterAll(killAll)

const spawnHelp = async (args: ReadonlyArray<string>, env: Record<string, string> = {}) => {
  const run = svcbot(args, env)
  const code = await run.exit
  return { code, stdout: run.lines.join("\n"), stderr: run.stderr.join("") }
}

/** Shell-like words of an example: quotes group, leading VAR=value assignments are the environment. */
const wordsOf = (example: string): Array<string> =>
  [...example.matchAll(/'([^']*)'|"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? m[2] ?? m[3]!).filter((word, i, all) => !all.slice(0, i + 1).every((w) => /^[A-Z_]+=/.test(w)))

describe("svcbot --help (spawned, piped)", () => {
  it("lists every command with its one-line summary under the program's name, without escape codes", async () => {
    const { code, stdout, stderr } = await spawnHelp(["--help"])
    expect(code).toBe(0)
    expect(stderr).toBe("")
    expect(stdout).not.toMatch(/\x1b\[/)
    expect(stdout).toContain("$ svcbot COMMAND [options]")
    for (const leaf of leaves) expect(stdout).toMatch(new RegExp(`^  ${leaf.path.slice(1).join(" ")} +\\S`, "m"))
    for (const boilerplate of ["A user-defined piece of text", "This setting is optional", "--wizard", "--completions", "--log-level"]) expect(stdout).not.toContain(boilerplate)
  })

  it("shows a command's usage as `$ svcbot backtest`, each flag's default and choices, and examples", async () => {
    const { code, stdout } = await spawnHelp(["backtest", "--help"], { NO_COLOR: "1" })
    expect(code).toBe(0)
    expect(stdout).not.toMatch(/\x1b\[/)
    expect(stdout).toContain("$ svcbot backtest [options]")
    expect(stdout).toMatch(/--settle-ms MS +milliseconds between acceptance and settlement, as on svc-venue\s+\(default: 50\)/)
    expect(stdout).toMatch(/--symbol SYMBOL .*\(default: BTCUSDT\)/s)
    expect(stdout).toContain("$ svcbot backtest --strategy sma-crossover --synthetic 42:10080")
  })

  it("answers a sub-subcommand's --help, and the choices of a flag", async () => {
    const schema = await spawnHelp(["config", "schema", "--help"])
    expect(schema.code).toBe(0)
    expect(schema.stdout).toContain("$ svcbot config schema [options]")
    expect(schema.stdout).toContain("$ svcbot config schema > config/svcbot.schema.json")
    const promote = await spawnHelp(["promote", "-h"])
    expect(promote.stdout).toContain("$ svcbot promote NAME --to paper|live [options]")
    expect(promote.stdout).toMatch(/--to paper\|live +the stage to promote to \(required; one of paper, live\)/)
  })
})

describe("every command's help", () => {
  it("covers the whole command tree", () => {
    expect(leaves.map((leaf) => leaf.path.join(" "))).toEqual(expect.arrayContaining(["svcbot run", "svcbot backtest", "svcbot config schema", "svcbot venue", "svcbot doctor"]))
  })

  it.each(leaves.map((leaf) => [leaf.path.join(" "), leaf] as const))("%s: a summary, two or three examples, every flag described", (_, leaf) => {
    const text = renderHelp(leaf, "0.1.0", plain).replace(/\s+/g, " ")
    expect(text).toContain(`$ ${leaf.path.join(" ")}`)
    expect(leaf.summary).not.toBe("")
    expect(leaf.examples.length).toBeGreaterThanOrEqual(2)
    expect(leaf.examples.length).toBeLessThanOrEqual(3)
    for (const flag of leaf.flags) {
      expect(flag.description, `${leaf.path.join(" ")} ${flag.names[0]}`).not.toBe("")
      if (flag.defaultValue !== undefined) expect(text).toContain(`default: ${flag.defaultValue}`)
    }
  })

  it.each(leaves.flatMap((leaf) => leaf.examples.map((example) => [example] as const)))("the example `%s` parses", async (example) => {
    const words = wordsOf(example)
    const redirect = words.indexOf(">")
    const args = (redirect < 0 ? words : words.slice(0, redirect)).slice(1)
    const asked = await Effect.runPromise(request(root.descriptor, args).pipe(Effect.provide(NodeContext.layer)))
    expect(asked._tag === "Usage" ? asked.problem : asked._tag).toBe("Run")
  })
})

/** `svcbot ARGS` on a pseudo-terminal (util-linux `script`), as a user at a terminal runs it. */
const onTerminal = (args: string, env: Record<string, string>): Promise<string> =>
  new Promise((done, fail) =>
    execFile("script", ["-qec", `node bin/svcbot.js ${args}`, "/dev/null"], { env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...env }, timeout: 60_000 }, (error, stdout) =>
      error === null ? done(stdout) : fail(error)
    )
  )

describe("colour", () => {
  it.skipIf(!existsSync("/usr/bin/script"))("on a terminal: bold headings, none with NO_COLOR set", async () => {
    expect(await onTerminal("config --help", {})).toContain("\x1b[1mUsage:")
    expect(await onTerminal("config --help", { NO_COLOR: "1" })).not.toMatch(/\x1b\[/)
  })


  it("only on a terminal, and never with NO_COLOR set", () => {
    expect(styleFor({ isTTY: true }, {}).color).toBe(true)
    expect(styleFor({ isTTY: true }, { NO_COLOR: "1" }).color).toBe(false)
    expect(styleFor({ isTTY: false }, {}).color).toBe(false)
    expect(styleFor({}, {}).color).toBe(false)
    const backtest = leaves.find((leaf) => leaf.name === "backtest")!
    expect(renderHelp(backtest, "0.1.0", { width: 100, color: true })).toContain("\x1b[1m")
    expect(renderHelp(backtest, "0.1.0", plain)).not.toMatch(/\x1b\[/)
  })
})
