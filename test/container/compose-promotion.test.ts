/**
 * Backtest -> paper -> live in containers, as docs/operations.md gives it: `docker compose run --rm
 * bot ...` for the one-off commands, the paper bot recording into the evidence volume it shares
 * with them and with the live bot, and the `live` profile reading its keys from secret files.
 *
 * Live mode trades only over https and on a svc-venue only in a staging run, so an override file
 * gives the venue a throwaway certificate (for the name `venue`) and mounts this test's configs.
 */
import { chmodSync, mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { devTradeKey } from "../../src/venue/Accounts.js"
import { pollUntil } from "../support/daemon.js"
import { selfSigned } from "../support/tls.js"
import { buildImage, project, scratch, serviceEvents, unavailable, untilHealthy, writeJson, type Project } from "./compose.js"

const SMA = { fastPeriod: 3, slowPeriod: 8, entry: "market", quoteQty: "100" }
const strictGates = { backtest: { minTrades: 0, maxDrawdownPct: 100, minSharpe: -100, minDays: 0, allowSynthetic: true } }
const looseGates = { ...strictGates, paper: { minDays: 0, maxTrackingErrorPct: 100 } }

describe.skipIf(unavailable !== undefined)(`promotion with the compose services${unavailable === undefined ? "" : ` (skipped: ${unavailable})`}`, () => {
  let p: Project

  beforeAll(async () => {
    await buildImage()
    const dir = scratch("promotion")
    const tls = selfSigned("svcbot-compose-tls", "DNS:venue,IP:127.0.0.1")
    // The containers run as 1000:1000 and read these bind mounts.
    for (const folder of [dir, tls.dir]) chmodSync(folder, 0o755)
    chmodSync(join(tls.dir, "key.pem"), 0o644)
    const configs = join(dir, "config")
    const secrets = join(dir, "secrets")
    mkdirSync(configs, { mode: 0o755 })
    mkdirSync(secrets, { mode: 0o755 })
    writeFileSync(join(secrets, "svc_api_key"), devTradeKey.keyId, { mode: 0o644 })
    writeFileSync(join(secrets, "svc_api_secret"), devTradeKey.secret, { mode: 0o644 })

    const config = (name: string, mode: string, strategies: ReadonlyArray<unknown>) =>
      writeJson(join(configs, name), {
        mode,
        venue: { embedded: false, baseUrl: "https://venue:8080", staging: true },
        health: { host: "0.0.0.0", port: 8081 },
        engine: { cancelOnStop: true, shutdownTimeoutMs: 20000 },
        strategies
      })
    const sma = (promotion: unknown) => ({ id: "btc-sma", strategy: "sma-crossover", symbol: "BTCUSDT", pollMs: 250, params: SMA, allocation: { USDT: "1000" }, promotion })
    const idle = { id: "eth-grid", strategy: "grid", symbol: "ETHUSDT", pollMs: 250, params: { lowerPrice: "2900", upperPrice: "3100", levels: 5, orderQty: "0.01" }, allocation: { USDT: "500" } }
    config("paper.json", "paper", [sma(strictGates), idle])
    config("paper-loose.json", "paper", [sma(looseGates), idle])
    config("live-both.json", "live", [sma(looseGates), idle])
    config("live-one.json", "live", [sma(looseGates)])
    for (const file of ["paper.json", "paper-loose.json", "live-both.json", "live-one.json"]) chmodSync(join(configs, file), 0o644)

    const tlsEnv = { NODE_EXTRA_CA_CERTS: "/certs/cert.pem" }
    const override = writeJson(join(dir, "override.json"), {
      services: {
        venue: {
          command: ["--host", "0.0.0.0", "--port", "8080", "--tape", "synthetic:3", "--tls-cert", "/certs/cert.pem", "--tls-key", "/certs/key.pem"],
          environment: tlsEnv,
          volumes: [`${tls.dir}:/certs:ro`],
          healthcheck: { test: ["CMD", "node", "/app/ops/healthcheck.mjs", "https://127.0.0.1:8080/api/spot/exchange-info"] }
        },
        bot: { environment: tlsEnv, volumes: [`${tls.dir}:/certs:ro`, `${configs}:/app/config:ro`] },
        "bot-live": { environment: tlsEnv, volumes: [`${tls.dir}:/certs:ro`, `${configs}:/app/config:ro`] }
      }
    })
    p = await project("promotion", { files: [override], env: { SVCBOT_CONFIG: "paper.json", SVCBOT_LIVE_CONFIG: "live-one.json", SVC_SECRETS_DIR: secrets } })
  }, 900_000)

  afterAll(async () => {
    await p?.down()
  }, 120_000)

  it("records paper evidence in the shared volume, refuses then grants live, and the live profile starts only a promoted instance", async () => {
    const once = (args: ReadonlyArray<string>) => p.compose(["run", "--rm", "--no-deps", "-T", ...args])

    const backtest = await once(["bot", "backtest", "--strategy", "sma-crossover", "--params", JSON.stringify(SMA), "--synthetic", "42:2000"])
    expect(backtest.status, backtest.stderr).toBe(0)
    const toPaper = await once(["bot", "promote", "btc-sma", "--to", "paper", "--config", "config/paper.json"])
    expect(toPaper.status, toPaper.stderr).toBe(0)

    const up = await p.compose(["up", "-d", "venue", "bot"])
    expect(up.status, up.stderr).toBe(0)
    await untilHealthy(p, "bot", 180_000)
    // Paper evidence is checkpointed while the bot runs and completed by its stop.
    await pollUntil(async () => ((await serviceEvents(p, "bot")).some((e) => e.event === "order.accepted" || e.event === "fill.synced") ? true : undefined), 90_000, "paper trading", 2000)
    const stop = await p.compose(["stop", "bot"])
    expect(stop.status, stop.stderr).toBe(0)
    expect((await p.inspect("bot")).exitCode).toBe(0)
    const recorded = (await serviceEvents(p, "bot")).filter((e) => e.event === "paper.recorded").map((e) => e.strategy)
    expect(recorded.sort()).toEqual(["btc-sma", "eth-grid"])

    // The gate reads what the paper bot wrote into the shared evidence volume.
    const refused = await once(["bot", "promote", "btc-sma", "--to", "live", "--config", "config/paper.json"])
    expect(refused.status).toBe(1)
    expect(refused.stderr).toMatch(/paper\.minDays: required >= 7, evidence 0\.0/)
    expect(refused.stderr).toMatch(/run \d+ \(completed\): 0 of \d+ paper fills differ/)
    const granted = await once(["bot", "promote", "btc-sma", "--to", "live", "--config", "config/paper-loose.json"])
    expect(granted.status, granted.stderr).toBe(0)

    // A live start naming an unpromoted instance is refused before anything runs.
    const blocked = await p.compose(["--profile", "live", "run", "--rm", "--no-deps", "-T", "bot-live", "run", "--config", "config/live-both.json", "--mode", "live"])
    expect(blocked.status).toBe(2)
    expect(blocked.stderr + blocked.stdout).toMatch(/strategy eth-grid may not trade live: grid was never promoted to live/)

    // The live profile as documented: keys from the secret files, the promoted instance only.
    const live = await p.compose(["--profile", "live", "up", "-d", "bot-live"])
    expect(live.status, live.stderr).toBe(0)
    await untilHealthy(p, "bot-live", 180_000)
    const loaded = (await serviceEvents(p, "bot-live")).find((e) => e.event === "config.loaded")
    expect(loaded?.strategies).toEqual(["btc-sma"])
    const stopLive = await p.compose(["--profile", "live", "stop", "bot-live"])
    expect(stopLive.status, stopLive.stderr).toBe(0)
    expect((await p.inspect("bot-live")).exitCode).toBe(0)
  }, 900_000)
})
