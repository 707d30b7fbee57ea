import { Command } from "@effect/cli"
import { NodeContext } from "@effect/platform-node"
import { Effect, Option } from "effect"
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest"
import { clientCommands, doctorChecks } from "../../src/cli/client.js"
import { parse } from "../../src/domain/Json.js"
import { devReadKey } from "../../src/venue/Accounts.js"
import { startVenue, type TestVenue } from "../support/venue.js"

const svcbot = Command.make("svcbot").pipe(Command.withSubcommands([...clientCommands]))
const cli = Command.run(svcbot, { name: "svcbot", version: "test" })

/** Runs `svcbot ARGS` in-process with the given key variables and returns what it printed. */
const runCli = async (args: ReadonlyArray<string>, env: Readonly<Record<string, string>>) => {
  const printed: Array<string> = []
  const spy = vi.spyOn(console, "log").mockImplementation((...parts: Array<unknown>) => void printed.push(parts.join(" ")))
  const saved = { ...process.env }
  Object.assign(process.env, env)
  try {
    await Effect.runPromise(cli(["node", "svcbot", ...args]).pipe(Effect.provide(NodeContext.layer)))
  } finally {
    spy.mockRestore()
    for (const name of Object.keys(env)) if (saved[name] === undefined) delete process.env[name]
    Object.assign(process.env, saved)
  }
  return printed.join("\n")
}

describe("svcbot balances, orders, fills, doctor", () => {
  let venue: TestVenue
  let env: Record<string, string>
  beforeAll(async () => {
    venue = await startVenue({ limits: { authFailuresBeforeBlock: 1000 } })
    env = { SVC_API_KEY: venue.keyId, SVC_API_SECRET: venue.secret }
  })
  afterAll(() => venue.close())

  it("prints balances as a table and as exact JSON", async () => {
    await venue.admin("POST", "/_venue/balances", { uid: venue.uid, balances: { BTC: "123456789012345678.123456789" } })
    const text = await runCli(["balances", "--base-url", venue.url], env)
    expect(text.split("\n")[0]).toMatch(/^asset\s+free\s+locked\s+total$/)
    expect(text).toMatch(/BTC\s+123456789012345678\.123456789\s+0\s+123456789012345678\.123456789/)
    const json = parse(await runCli(["balances", "--base-url", venue.url, "--json"], env)) as Array<{ asset: string; balance: { value: string } }>
    expect(json.find((row) => row.asset === "BTC")!.balance.value).toBe("123456789012345678.123456789")
  })

  it("prints open orders and fills", async () => {
    await venue.signed("POST", "/api/spot/limit", { symbol: "ETHUSDT", side: "buy", baseQty: 0.01, limitPrice: 1000 })
    const orders = await runCli(["orders", "--base-url", venue.url, "--symbol", "ETHUSDT"], env)
    expect(orders).toMatch(/ETHUSDT\s+buy\s+limit\s+(pending|resting)\s+0\.01\s+0\s+1000/)
    const fills = await runCli(["fills", "--base-url", venue.url, "--limit", "5", "--json"], env)
    expect(Array.isArray(JSON.parse(fills))).toBe(true)
  })

  it("doctor passes with a working key", async () => {
    const checks = await Effect.runPromise(doctorChecks(Option.some(venue.url), env))
    expect(checks.map((c) => [c.check, c.ok])).toEqual([
      ["credentials", true],
      ["reachability", true],
      ["clock", true],
      ["read permission", true]
    ])
  })

  it("doctor says what is wrong and how to fix it", async () => {
    const malformed = await Effect.runPromise(doctorChecks(Option.some(venue.url), { SVC_API_KEY: venue.keyId, SVC_API_SECRET: venue.keyId }))
    expect(malformed).toEqual([{ check: "credentials", ok: false, detail: expect.stringContaining("that is the key id") }])

    const unreachable = await Effect.runPromise(doctorChecks(Option.some("http://127.0.0.1:9"), env))
    expect(unreachable[1]).toMatchObject({ check: "reachability", ok: false, detail: expect.stringContaining("Check --base-url") })

    const wrongSecret = await Effect.runPromise(doctorChecks(Option.some(venue.url), { SVC_API_KEY: venue.keyId, SVC_API_SECRET: devReadKey.secret }))
    expect(wrongSecret.at(-1)).toMatchObject({ check: "read permission", ok: false, detail: expect.stringContaining("API_KEY_INVALID") })

    await venue.admin("POST", "/_venue/faults", { clockSkewMs: -120_000 })
    const skewed = await Effect.runPromise(doctorChecks(Option.some(venue.url), env))
    await venue.admin("POST", "/_venue/faults", {})
    expect(skewed.find((c) => c.check === "clock")).toMatchObject({ ok: false, detail: expect.stringContaining("ahead of the server's") })
    expect(skewed.find((c) => c.check === "read permission")?.ok).toBe(true)
  })

  it("refuses to run without a key, naming the variables to set", async () => {
    await expect(runCli(["balances", "--base-url", venue.url], { SVC_API_KEY: "", SVC_API_SECRET: "" })).rejects.toThrow(/SVC_API_KEY/)
  })
})
