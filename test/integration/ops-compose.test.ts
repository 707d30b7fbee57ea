import { spawnSync } from "node:child_process"
import { existsSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import { Effect, Either } from "effect"
import { describe, expect, it } from "vitest"
import { parse as parseYaml } from "yaml"
import { parseConfig } from "../../src/config/Load.js"
import { loadStrategy } from "../../src/strategy/Loader.js"
import { decodeParams } from "../../src/strategy/Strategy.js"

interface Service {
  readonly image?: string
  readonly build?: unknown
  readonly command?: ReadonlyArray<string>
  readonly entrypoint?: ReadonlyArray<string>
  readonly profiles?: ReadonlyArray<string>
  readonly environment?: Record<string, string>
  readonly secrets?: ReadonlyArray<string>
  readonly volumes?: ReadonlyArray<string>
  readonly ports?: ReadonlyArray<string>
  readonly depends_on?: Record<string, { readonly condition: string }> | ReadonlyArray<string>
  readonly read_only?: boolean
  readonly cap_drop?: ReadonlyArray<string>
  readonly security_opt?: ReadonlyArray<string>
  readonly restart?: string
  readonly stop_signal?: string
  readonly stop_grace_period?: string
  readonly logging?: { readonly driver: string; readonly options: Record<string, string> }
  readonly labels?: Record<string, string>
  readonly healthcheck?: { readonly test: ReadonlyArray<string> }
}
interface ComposeFile {
  readonly services: Record<string, Service>
  readonly secrets: Record<string, { readonly file: string }>
  readonly volumes: Record<string, unknown>
}

const composeText = readFileSync("docker-compose.yml", "utf8")
const compose = parseYaml(composeText, { merge: true }) as ComposeFile
const service = (name: string): Service => {
  const found = compose.services[name]
  if (found === undefined) throw new Error(`docker-compose.yml has no service ${name}`)
  return found
}
const svcbotServices = ["venue", "bot", "bot-live"] as const
const seconds = (duration: string): number => {
  const match = /^(\d+)(ms|s|m)$/.exec(duration)
  if (match === null) throw new Error(`unreadable duration ${duration}`)
  return Number(match[1]) * (match[2] === "ms" ? 0.001 : match[2] === "m" ? 60 : 1)
}
const configOf = (command: ReadonlyArray<string> | undefined): string => {
  const index = command?.indexOf("--config") ?? -1
  const value = index >= 0 ? command?.[index + 1] : undefined
  if (value === undefined) throw new Error("the command names no --config")
  // Compose's own default wins when the variable is unset.
  return value.replace(/\$\{[A-Z_]+:-([^}]*)\}/g, "$1")
}
const readJson = (path: string): unknown => JSON.parse(readFileSync(path, "utf8"))

describe("docker-compose.yml", () => {
  it("runs venue and a paper bot by default, with no keys to provide", () => {
    const defaults = Object.entries(compose.services).filter(([, s]) => s.profiles === undefined).map(([name]) => name)
    expect(defaults.sort()).toEqual(["bot", "venue"])
    const bot = service("bot")
    expect(bot.command).toEqual(expect.arrayContaining(["run", "--mode", "paper"]))
    expect(bot.depends_on).toEqual({ venue: { condition: "service_healthy" } })
    expect(service("venue").entrypoint?.join(" ")).toMatch(/tini -- node \/app\/bin\/svc-venue\.js$/)
    expect(service("venue").command).toEqual(expect.arrayContaining(["--host", "0.0.0.0", "--port", "8080"]))
    expect(service("venue").command?.join(" ")).toMatch(/--tape synthetic:/)
    expect(bot.environment?.SVC_API_KEY).toMatch(/^svk_live_devtrade/)
  })

  it("the live profile reads keys only from Docker secrets and keeps its own database", () => {
    const live = service("bot-live")
    expect(live.profiles).toEqual(["live"])
    expect(live.command).toEqual(expect.arrayContaining(["run", "--mode", "live"]))
    expect(live.secrets).toEqual(["svc_api_key", "svc_api_secret"])
    expect(live.environment?.SVC_API_KEY_FILE).toBe("/run/secrets/svc_api_key")
    expect(live.environment?.SVC_API_SECRET_FILE).toBe("/run/secrets/svc_api_secret")
    expect(live.environment).not.toHaveProperty("SVC_API_KEY")
    expect(live.environment).not.toHaveProperty("SVC_API_SECRET")
    expect(Object.keys(compose.secrets).sort()).toEqual(["cluster_password", "cluster_url", "svc_api_key", "svc_api_secret"])
    const dataVolume = (s: Service) => s.volumes?.find((v) => v.endsWith(":/app/data"))?.split(":")[0]
    expect(dataVolume(live)).toBeDefined()
    expect(dataVolume(live)).not.toBe(dataVolume(service("bot")))
    expect(compose.volumes).toHaveProperty(dataVolume(live)!)
    expect(compose.volumes).toHaveProperty(dataVolume(service("bot"))!)
  })

  it("the paper and the live bot share one evidence store: the live gate sees what paper trading recorded", () => {
    const evidenceVolume = (s: Service) => s.volumes?.find((v) => v.endsWith(":/app/evidence"))?.split(":")[0]
    const bot = service("bot")
    const live = service("bot-live")
    expect(evidenceVolume(bot)).toBeDefined()
    expect(evidenceVolume(live)).toBe(evidenceVolume(bot))
    expect(compose.volumes).toHaveProperty(evidenceVolume(bot)!)
    expect(bot.environment?.SVC_EVIDENCE_PATH).toBe("/app/evidence/evidence.db")
    expect(live.environment?.SVC_EVIDENCE_PATH).toBe(bot.environment?.SVC_EVIDENCE_PATH)
  })

  it("every svcbot container is read-only, restarts, rotates its logs and is labelled for the log shipper", () => {
    for (const name of svcbotServices) {
      const s = service(name)
      expect(s.read_only, name).toBe(true)
      expect(s.restart, name).toBe("unless-stopped")
      expect(s.logging?.driver, name).toBe("json-file")
      expect(s.logging?.options["max-size"], name).toMatch(/^\d+[km]$/)
      expect(Number(s.logging?.options["max-file"]), name).toBeGreaterThan(1)
      expect(s.labels?.["svcbot.logs"], name).toBe("true")
      expect(s.image, name).toMatch(/^svcbot:/)
    }
    for (const name of ["bot", "bot-live"]) {
      expect(service(name).volumes, name).toContain("./config:/app/config:ro")
      expect(service(name).stop_signal, name).toBe("SIGTERM")
    }
  })

  it("every svcbot service drops all capabilities and escalates no privilege; no service gets the Docker socket", () => {
    const own = Object.entries(compose.services).filter(([, s]) => s.image?.startsWith("svcbot:") === true)
    expect(own.map(([name]) => name).sort()).toEqual(["bot", "bot-live", "record", "venue", "worker"])
    for (const [name, s] of own) {
      expect(s.cap_drop, name).toEqual(["ALL"])
      expect(s.security_opt, name).toContain("no-new-privileges:true")
    }
    for (const [name, s] of Object.entries(compose.services)) {
      expect(s.volumes?.some((v) => v.includes("docker.sock")) ?? false, name).toBe(false)
    }
  })

  it("gives cancel-on-stop more time than the configured shutdown bound", () => {
    for (const name of ["bot", "bot-live"]) {
      const s = service(name)
      // config/live.json is the operator's copy of the example.
      const file = name === "bot-live" ? "config/live.example.json" : configOf(s.command)
      const config = readJson(file) as { engine?: { shutdownTimeoutMs?: number } }
      const shutdownMs = config.engine?.shutdownTimeoutMs ?? 15_000
      expect(seconds(s.stop_grace_period ?? "10s") * 1000, name).toBeGreaterThan(shutdownMs)
    }
  })

  it("publishes ports on loopback only and pins every third-party image", () => {
    for (const [name, s] of Object.entries(compose.services)) {
      for (const port of s.ports ?? []) expect(port, name).toMatch(/^127\.0\.0\.1:/)
      // A full release number: PostgreSQL's are major.minor, the others' major.minor.patch.
      const release = name === "postgres" ? /^postgres:\d+\.\d+$/ : /^[\w./-]+:v?\d+\.\d+\.\d+$/
      if (s.image !== undefined && !s.image.startsWith("svcbot:")) expect(s.image, name).toMatch(release)
    }
    for (const name of ["loki", "alloy", "prometheus", "grafana"]) expect(service(name).profiles, name).toEqual(["observability"])
  })

  it("runs an optimisation cluster in its own profile: Postgres and workers pointed at it by secret files", () => {
    for (const name of ["postgres", "worker"]) expect(service(name).profiles, name).toEqual(["cluster"])
    const worker = service("worker")
    const postgres = service("postgres")
    // No password on a command line or as a default: both read it from secret files.
    expect(composeText).not.toMatch(/POSTGRES_PASSWORD:|postgres:\/\/\w+:[^@\s]*@/)
    expect(postgres.environment?.POSTGRES_PASSWORD_FILE).toBe("/run/secrets/cluster_password")
    expect(postgres.secrets).toEqual(["cluster_password"])
    expect(worker.command).not.toContain("--cluster")
    expect(worker.environment?.SVC_CLUSTER_URL_FILE).toBe("/run/secrets/cluster_url")
    expect(worker.secrets).toEqual(["cluster_url"])
    expect(compose.secrets["cluster_url"]?.file).toBe("${SVC_SECRETS_DIR:-./secrets}/cluster_url")
    expect(worker.command![0]).toBe("worker")
    expect(worker.depends_on).toEqual({ postgres: { condition: "service_healthy" } })
    // The two commands the README gives for a sweep name this profile and a space file that exists.
    const readme = readFileSync("README.md", "utf8")
    expect(readme).toContain("docker compose --profile cluster up -d")
    const space = /--space (config\/optimize\/[\w.-]+\.json)/.exec(readme)?.[1]
    expect(space !== undefined && existsSync(space)).toBe(true)
  })

  it("mounts the observability configs that exist in ops/", () => {
    for (const name of ["loki", "alloy", "prometheus", "grafana"]) {
      for (const volume of service(name).volumes ?? []) {
        const source = volume.split(":")[0]!
        if (source.startsWith("./")) expect(existsSync(source), `${name}: ${source}`).toBe(true)
      }
    }
  })
})

/** The host folder a service mounts at `target`, with compose's default for an unset variable. */
const mountSource = (s: Service, target: string): string | undefined =>
  s.volumes?.map((v) => v.replace(/\$\{[A-Z_]+:-([^}]*)\}/g, "$1").split(":")).find((parts) => parts[1] === target)?.[0]

describe("strategies of the user's own", () => {
  it("every bot mounts the strategies folder read-only at /strategies, from SVCBOT_STRATEGIES_DIR", () => {
    for (const name of ["bot", "bot-live"]) {
      const volume = service(name).volumes?.find((v) => v.includes(":/strategies"))
      expect(volume, name).toMatch(/^\$\{SVCBOT_STRATEGIES_DIR:-\.\/[^}]+\}:\/strategies:ro$/)
      const source = mountSource(service(name), "/strategies")!
      expect(statSync(source).isDirectory(), `${name}: ${source} is a folder`).toBe(true)
    }
  })

  it("the example config names a plugin file that the default mount puts at that path, and is valid for the bot", () => {
    const path = "examples/config/user-strategy.json"
    const parsed = parseConfig(readJson(path), path, service("bot").environment ?? {})
    if (Either.isLeft(parsed)) throw new Error(`${path}: ${JSON.stringify(parsed.left)}`)
    const source = mountSource(service("bot"), "/strategies")!
    expect(parsed.right.strategies.length).toBeGreaterThan(0)
    for (const instance of parsed.right.strategies) {
      expect(instance.strategy, instance.id).toMatch(/^\/strategies\/[\w.-]+\.(ts|mts|js|mjs)$/)
      const onHost = join(source, instance.strategy.slice("/strategies/".length))
      expect(existsSync(onHost), `${instance.strategy} is ${onHost} on the host`).toBe(true)
    }
    expect(parsed.right.venue.baseUrl).toBe("http://venue:8080")
    expect(parsed.right.health.port).toBe(Number(service("bot").environment?.SVC_HEALTH_PORT))
  })
})

describe("the configs the compose services run", () => {
  const check = async (path: string, env: Record<string, string>) => {
    const parsed = parseConfig(readJson(path), path, env)
    if (Either.isLeft(parsed)) throw new Error(`${path}: ${JSON.stringify(parsed.left)}`)
    for (const instance of parsed.right.strategies) {
      const loaded = await Effect.runPromise(loadStrategy(instance.id, instance.strategy))
      const params = decodeParams(loaded.definition, instance.id, instance.params)
      if (Either.isLeft(params)) throw new Error(`${path}: ${params.left.message}`)
    }
    return parsed.right
  }

  it("config/compose.json is a valid paper config against the venue service, with running strategies", async () => {
    const config = await check(configOf(service("bot").command), service("bot").environment ?? {})
    expect(config.mode).toBe("paper")
    expect(config.venue.embedded).toBe(false)
    expect(config.venue.baseUrl).toBe("http://venue:8080")
    expect(config.health.port).toBe(Number(service("bot").environment?.SVC_HEALTH_PORT))
    expect(config.database.path).toMatch(/^\/app\/data\//)
    expect(config.strategies.length).toBeGreaterThan(0)
  })

  it("config/live.example.json is a valid live config once copied to config/live.json", async () => {
    const config = await check("config/live.example.json", {})
    expect(config.mode).toBe("live")
    expect(config.venue.baseUrl).toMatch(/^https:\/\//)
    expect(config.database.path).toMatch(/^\/app\/data\//)
    expect(configOf(service("bot-live").command)).toBe("config/live.json")
  })
})

/** The compose CLI here, if any: Docker's plugin or Debian's docker-compose (parses files without an engine). */
const composeTool = ((): ReadonlyArray<string> | undefined => {
  for (const candidate of [["docker", "compose"], ["docker-compose"]]) {
    const probe = spawnSync(candidate[0]!, [...candidate.slice(1), "version"], { encoding: "utf8", timeout: 30_000 })
    if (probe.status === 0) return candidate
  }
  return undefined
})()

const INSTALL_HINT = "apt-get install -y docker-compose"
if (composeTool === undefined) console.warn(`docker-compose.yml is not validated by a compose CLI: none found here (${INSTALL_HINT})`)

describe.skipIf(composeTool === undefined)(
  `compose tool validation${composeTool === undefined ? ` (skipped: no compose CLI; ${INSTALL_HINT})` : ""}`,
  () => {
    const runConfig = (args: ReadonlyArray<string>, env: Record<string, string> = {}) => {
      const [command, ...prefix] = composeTool!
      return spawnSync(command!, [...prefix, "-f", "docker-compose.yml", "--profile", "live", "--profile", "observability", "config", ...args], {
        encoding: "utf8",
        timeout: 60_000,
        env: { ...process.env, ...env }
      })
    }

    it("accepts the file with every profile, secrets and extension fields", () => {
      const result = runConfig([])
      expect(result.stderr.replace(/^WARNING: .*secret.*$/gim, "").trim(), "no warnings or errors").toBe("")
      expect(result.status).toBe(0)
      const resolved = parseYaml(result.stdout) as ComposeFile
      expect(Object.keys(resolved.services).sort()).toEqual(Object.keys(compose.services).sort())
      expect(resolved.services["bot-live"]?.profiles).toEqual(["live"])
      expect(resolved.services["bot"]?.command).toEqual(["run", "--config", "config/compose.json", "--mode", "paper"])
      expect(resolved.services["bot"]?.logging?.options["max-size"]).toBe("10m")
      expect(resolved.secrets["svc_api_key"]?.file).toMatch(/secrets\/svc_api_key$/)
      for (const name of ["bot", "bot-live"]) {
        expect(resolved.services[name]?.volumes?.some((v) => /examples\/strategies:\/strategies:ro$/.test(v)), `${name} mounts the strategies folder`).toBe(true)
      }
    })

    it("lists the cluster, data, live and observability profiles", () => {
      const result = runConfig(["--profiles"])
      expect(result.status).toBe(0)
      expect(result.stdout.split("\n").filter((line) => line !== "").sort()).toEqual(["cluster", "data", "live", "observability"])
    })

    it("interpolates the documented variables", () => {
      const result = runConfig([], { SVCBOT_LIVE_CONFIG: "live-eu.json", SVC_SECRETS_DIR: "/srv/svcbot/secrets", SVCBOT_STRATEGIES_DIR: "/srv/svcbot/strategies" })
      expect(result.status).toBe(0)
      const resolved = parseYaml(result.stdout) as ComposeFile
      expect(resolved.services["bot-live"]?.command).toContain("config/live-eu.json")
      expect(resolved.services["bot"]?.volumes).toContain("/srv/svcbot/strategies:/strategies:ro")
      expect(resolved.secrets["svc_api_secret"]?.file).toBe("/srv/svcbot/secrets/svc_api_secret")
    })

    it("refuses a broken file, so a pass means something", () => {
      const [command, ...prefix] = composeTool!
      const broken = spawnSync(command!, [...prefix, "-f", "-", "config"], {
        input: "services:\n  bot:\n    image: svcbot:local\n    read_only: [1]\n",
        encoding: "utf8",
        timeout: 60_000
      })
      expect(broken.status).not.toBe(0)
      expect(broken.stderr).toContain("read_only")
    })
  }
)
