/**
 * A usage error, as the built CLI answers it: what was wrong (from the parser), one line
 * pointing at the right `--help`, exit code 2, and nothing else: no log line, no internals.
 */
import { afterAll, describe, expect, it } from "vitest"
import { killAll, svcbot } from "../support/daemon.js"

afterAll(killAll)

const usage = async (args: ReadonlyArray<string>) => {
  const run = svcbot(args)
  const code = await run.exit
  return { code, stdout: run.lines, stderr: run.stderr.join("") }
}

describe("usage errors", () => {
  it("a malformed option: the problem, the command's --help, exit 2", async () => {
    const { code, stdout, stderr } = await usage(["backtest", "--strategy", "sma-crossover", "--settle-ms", "abc"])
    expect(code).toBe(2)
    expect(stderr).toContain("'abc' is not a integer")
    expect(stderr).toContain("svcbot: see 'svcbot backtest --help' for the usage")
    expect(stderr).not.toContain('"event"')
    expect(stdout).toEqual([])
  })

  it("a check of the command's own: its one line naming the fix, exit 2", async () => {
    const { code, stderr } = await usage(["backtest", "--synthetic", "1:10"])
    expect(code).toBe(2)
    expect(stderr.trim()).toBe("svcbot: give --strategy NAME (a shipped strategy or a plugin file), or --config FILE --instance NAME")
  })

  it("an unknown command: the commands there are, svcbot --help, exit 2", async () => {
    const { code, stderr } = await usage(["frobnicate"])
    expect(code).toBe(2)
    expect(stderr).toContain("Invalid subcommand for svcbot - use one of 'run'")
    expect(stderr).toContain("svcbot: see 'svcbot --help' for the usage")
    expect(stderr).not.toContain('"event"')
  })
})
