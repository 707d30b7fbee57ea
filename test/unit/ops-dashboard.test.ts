import { readFileSync } from "node:fs"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { parse as parseYaml } from "yaml"
import { EventCatalog, isEventName } from "../../src/log/Events.js"
import { DaemonMetrics } from "../../src/ops/Metrics.js"

interface Target {
  readonly refId: string
  readonly expr: string
  readonly datasource?: { readonly uid: string }
}
interface Panel {
  readonly id: number
  readonly type: string
  readonly title: string
  readonly gridPos: { readonly x: number; readonly y: number; readonly w: number; readonly h: number }
  readonly datasource?: { readonly type: string; readonly uid: string }
  readonly targets?: ReadonlyArray<Target>
  readonly panels?: ReadonlyArray<Panel>
}
interface Dashboard {
  readonly uid: string
  readonly title: string
  readonly panels: ReadonlyArray<Panel>
  readonly annotations: { readonly list: ReadonlyArray<{ readonly expr: string }> }
}

const dashboardText = readFileSync("ops/grafana/dashboards/svcbot.json", "utf8")
const datasourceYaml = readFileSync("ops/grafana/provisioning/datasources/loki.yml", "utf8")
const prometheusDatasourceYaml = readFileSync("ops/grafana/provisioning/datasources/prometheus.yml", "utf8")
const providerYaml = readFileSync("ops/grafana/provisioning/dashboards/svcbot.yml", "utf8")
const alloyConfig = readFileSync("ops/alloy/config.alloy", "utf8")

const dashboard = JSON.parse(dashboardText) as Dashboard
const allPanels: ReadonlyArray<Panel> = dashboard.panels.flatMap((panel) => [panel, ...(panel.panels ?? [])])
const queryPanels = allPanels.filter((panel) => panel.type !== "row")
/** Panels over the log events (Loki) and over the daemon's /metrics (Prometheus). */
const logPanels = queryPanels.filter((panel) => panel.datasource?.type === "loki")
const metricPanels = queryPanels.filter((panel) => panel.datasource?.type === "prometheus")
const queries = [...logPanels.flatMap((panel) => (panel.targets ?? []).map((target) => target.expr)), ...dashboard.annotations.list.map((a) => a.expr)]

/** Metric names a PromQL query reads: svcbot's own and the process metrics prom-client exports. */
const metricsNamed = (expr: string): ReadonlyArray<string> => [...expr.matchAll(/\b(?:svcbot|nodejs|process)_[a-z0-9_]+/g)].map((match) => match[0])

/** Every series name the daemon's /metrics can hold: families from the exposition, histograms and summaries with their suffixes. */
const exportedSeries = Effect.runPromise(
  Effect.flatMap(DaemonMetrics, (metrics) => metrics.exposition).pipe(Effect.provide(DaemonMetrics.Default))
).then(({ body }) => {
  const names = new Set<string>()
  for (const [, name, type] of body.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    names.add(name!)
    if (type === "histogram") for (const suffix of ["_bucket", "_sum", "_count"]) names.add(`${name}${suffix}`)
    if (type === "summary") for (const suffix of ["_sum", "_count"]) names.add(`${name}${suffix}`)
  }
  return names
})

/** The event names a LogQL query selects, from `event="a"` and `event=~"a|b"` matchers. */
const eventsNamed = (expr: string): ReadonlyArray<string> =>
  [...expr.matchAll(/\bevent\s*(=~|=)\s*"([^"]*)"/g)].flatMap((match) => (match[1] === "=~" ? match[2]!.split("|") : [match[2]!]))

const balanced = (expr: string): boolean => {
  const pairs: Record<string, string> = { ")": "(", "}": "{", "]": "[" }
  const stack: Array<string> = []
  let quoted = false
  for (const char of expr) {
    if (char === '"') quoted = !quoted
    if (quoted) continue
    if (char === "(" || char === "{" || char === "[") stack.push(char)
    else if (char in pairs && stack.pop() !== pairs[char]) return false
  }
  return stack.length === 0 && !quoted
}

describe("Grafana dashboard", () => {
  it("parses and has a stable uid, a title and panels with unique ids on a 24-column grid", () => {
    expect(dashboard.uid).toMatch(/^[a-z0-9-]{1,40}$/)
    expect(dashboard.title).toBe("svcbot")
    const ids = allPanels.map((panel) => panel.id)
    expect(new Set(ids).size).toBe(ids.length)
    for (const panel of allPanels) {
      expect(panel.gridPos.x + panel.gridPos.w, panel.title).toBeLessThanOrEqual(24)
      expect(panel.gridPos.h, panel.title).toBeGreaterThan(0)
    }
    expect(queryPanels.length).toBeGreaterThanOrEqual(15)
    expect(logPanels.length + metricPanels.length, "every panel reads Loki or Prometheus").toBe(queryPanels.length)
  })

  it("every log panel query names only events of the catalog, and at least one", () => {
    for (const panel of logPanels) {
      expect(panel.targets?.length ?? 0, `${panel.title} has queries`).toBeGreaterThan(0)
      for (const target of panel.targets ?? []) {
        const named = eventsNamed(target.expr)
        expect(named.length, `${panel.title} ${target.refId} names an event`).toBeGreaterThan(0)
        for (const event of named) expect(isEventName(event), `${panel.title}: "${event}" is in src/log/Events.ts`).toBe(true)
      }
    }
    for (const expr of dashboard.annotations.list.map((a) => a.expr)) for (const event of eventsNamed(expr)) expect(isEventName(event), event).toBe(true)
  })

  it("covers orders, rejections, fills, PnL, budgets, 429s, auth and account events, and reconciliation", () => {
    const covered = new Set(queries.flatMap(eventsNamed))
    for (const event of [
      "order.accepted",
      "order.filled",
      "order.rejected",
      "order.refused",
      "fill.synced",
      "heartbeat",
      "budget.status",
      "budget.wait",
      "rate.limited",
      "auth.invalid",
      "auth.blocked",
      "account.blocked",
      "reconcile.completed",
      "reconcile.mismatch"
    ]) {
      expect(covered.has(event), `${event} is on the dashboard`).toBe(true)
    }
    const paging: ReadonlySet<string> = new Set(["error", "fatal"])
    for (const [event, spec] of Object.entries(EventCatalog)) {
      if (paging.has(spec.level)) expect(covered.has(event), `error event ${event} is on the dashboard`).toBe(true)
    }
  })

  it("every metrics panel query names only metrics the daemon exports, and at least one", async () => {
    const exported = await exportedSeries
    expect(exported.has("svcbot_fills_total"), "the daemon's registry was read").toBe(true)
    for (const panel of metricPanels) {
      expect(panel.targets?.length ?? 0, `${panel.title} has queries`).toBeGreaterThan(0)
      for (const target of panel.targets ?? []) {
        const named = metricsNamed(target.expr)
        expect(named.length, `${panel.title} ${target.refId} names a metric`).toBeGreaterThan(0)
        for (const metric of named) expect(exported.has(metric), `${panel.title}: ${metric} is exported on /metrics`).toBe(true)
      }
    }
  })

  it("shows orders, fills, PnL, budget use, latency and the process next to the log panels", () => {
    const read = new Set(metricPanels.flatMap((panel) => (panel.targets ?? []).flatMap((target) => metricsNamed(target.expr))))
    for (const metric of [
      "svcbot_orders_total",
      "svcbot_fills_total",
      "svcbot_realized_pnl",
      "svcbot_budget_used_weight_1m",
      "svcbot_budget_weight_limit_1m",
      "svcbot_request_duration_seconds_bucket",
      "nodejs_eventloop_lag_p99_seconds"
    ]) {
      expect(read.has(metric), `${metric} is on the dashboard`).toBe(true)
    }
  })

  it("metrics queries are well-formed PromQL through the provisioned Prometheus datasource", () => {
    const uid = /uid:\s*(\S+)/.exec(prometheusDatasourceYaml)?.[1]
    expect(uid).toBeDefined()
    for (const panel of metricPanels) {
      expect(panel.datasource?.uid, panel.title).toBe(uid)
      for (const target of panel.targets ?? []) {
        expect(balanced(target.expr), `${panel.title}: ${target.expr}`).toBe(true)
        // A counter is read as a rate: its raw value restarts from zero with the daemon.
        for (const counter of target.expr.match(/\bsvcbot_[a-z0-9_]+_total\b/g) ?? []) expect(target.expr, `${panel.title} rates ${counter}`).toMatch(new RegExp(`(rate|increase)\\(${counter}\\[`))
      }
    }
  })

  it("queries are well-formed LogQL over svcbot's streams, through the provisioned Loki datasource", () => {
    const uid = /uid:\s*(\S+)/.exec(datasourceYaml)?.[1]
    expect(uid).toBeDefined()
    for (const panel of logPanels) {
      expect(panel.datasource?.uid, panel.title).toBe(uid)
      for (const target of panel.targets ?? []) {
        const { expr } = target
        expect(balanced(expr), `${panel.title}: ${expr}`).toBe(true)
        expect(expr, panel.title).toContain('job="svcbot"')
        // A value is unwrapped only after the json stage extracted it.
        for (const [, field] of expr.matchAll(/\|\s*unwrap\s+(\w+)/g)) {
          expect(expr, `${panel.title} extracts ${field}`).toMatch(new RegExp(`\\| json [^|]*\\b${field}="${field}"`))
          expect(expr, `${panel.title} drops lines without ${field}`).toContain('__error__=""')
        }
      }
    }
  })

  it("the log shipper labels streams with job, event and level, which the queries select on", () => {
    expect(alloyConfig).toMatch(/"__path__"\s*=\s*"\/var\/lib\/docker\/containers\/\*\/\*-json\.log",\s*job\s*=\s*"svcbot"/)
    expect(alloyConfig).toMatch(/stage\.labels\s*\{[^}]*event\s*=\s*""/)
    expect(alloyConfig).toMatch(/stage\.json\s*\{[^}]*event\s*=\s*"event"/)
    // Only the lines of containers that opted in: compose's logging options write the label into each line.
    expect(alloyConfig).toMatch(/shipped\s*=\s*"attrs\.\\"svcbot\.logs\\""/)
    expect(alloyConfig).toContain('selector = "{shipped!=\\"true\\"}"')
    expect(readFileSync("docker-compose.yml", "utf8")).toMatch(/labels: "svcbot\.logs,com\.docker\.compose\.service"/)
  })

  it("the dashboard provider reads the directory compose mounts the dashboard into", () => {
    const path = /path:\s*(\S+)/.exec(providerYaml)?.[1]
    expect(path).toBeDefined()
    expect(readFileSync("docker-compose.yml", "utf8")).toContain(`./ops/grafana/dashboards:${path}:ro`)
  })
})

describe("observability provisioning", () => {
  it("Grafana's datasource is the compose service loki, and Alloy pushes there", () => {
    const datasources = parseYaml(datasourceYaml) as { apiVersion: number; datasources: ReadonlyArray<{ type: string; uid: string; url: string }> }
    expect(datasources.apiVersion).toBe(1)
    expect(datasources.datasources).toHaveLength(1)
    expect(datasources.datasources[0]).toMatchObject({ type: "loki", url: "http://loki:3100" })
    expect(alloyConfig).toContain('url = "http://loki:3100/loki/api/v1/push"')
    const compose = parseYaml(readFileSync("docker-compose.yml", "utf8"), { merge: true }) as { services: Record<string, unknown> }
    expect(Object.keys(compose.services)).toEqual(expect.arrayContaining(["loki", "alloy", "grafana"]))
  })

  it("Loki's config is single-process with a retention period, on the volume compose mounts at /loki", () => {
    const loki = parseYaml(readFileSync("ops/loki/loki.yml", "utf8")) as {
      auth_enabled: boolean
      server: { http_listen_port: number }
      common: { path_prefix: string }
      schema_config: { configs: ReadonlyArray<{ store: string; schema: string }> }
      limits_config: { retention_period: string }
      compactor: { retention_enabled: boolean }
    }
    expect(loki.auth_enabled).toBe(false)
    expect(loki.server.http_listen_port).toBe(3100)
    expect(loki.common.path_prefix).toBe("/loki")
    expect(loki.schema_config.configs.at(-1)).toMatchObject({ store: "tsdb", schema: "v13" })
    expect(loki.limits_config.retention_period).toMatch(/^\d+h$/)
    expect(loki.compactor.retention_enabled).toBe(true)
  })

  it("Grafana's metrics datasource is the compose service prometheus, which scrapes each bot's health port at /metrics", () => {
    const datasources = parseYaml(prometheusDatasourceYaml) as { apiVersion: number; datasources: ReadonlyArray<{ type: string; uid: string; url: string }> }
    expect(datasources.apiVersion).toBe(1)
    expect(datasources.datasources).toHaveLength(1)
    expect(datasources.datasources[0]).toMatchObject({ type: "prometheus", url: "http://prometheus:9090" })
    const compose = parseYaml(readFileSync("docker-compose.yml", "utf8"), { merge: true }) as {
      services: Record<string, { profiles?: ReadonlyArray<string>; volumes?: ReadonlyArray<string>; environment?: Record<string, string>; depends_on?: ReadonlyArray<string> }>
    }
    const prometheus = compose.services["prometheus"]
    expect(prometheus?.profiles).toEqual(["observability"])
    expect(compose.services["grafana"]?.depends_on).toContain("prometheus")
    const mounted = prometheus?.volumes?.find((volume) => volume.startsWith("./ops/prometheus/"))?.split(":")
    expect(mounted).toBeDefined()
    const scrape = parseYaml(readFileSync(mounted![0]!, "utf8")) as {
      scrape_configs: ReadonlyArray<{ job_name: string; metrics_path?: string; static_configs: ReadonlyArray<{ targets: ReadonlyArray<string> }> }>
    }
    const job = scrape.scrape_configs.find((config) => config.job_name === "svcbot")
    expect(job?.metrics_path ?? "/metrics").toBe("/metrics")
    const targets = job?.static_configs.flatMap((config) => config.targets) ?? []
    for (const bot of ["bot", "bot-live"]) expect(targets, bot).toContain(`${bot}:${compose.services[bot]?.environment?.SVC_HEALTH_PORT}`)
  })

  it("the dashboard provider is a file provider", () => {
    const provider = parseYaml(providerYaml) as { apiVersion: number; providers: ReadonlyArray<{ type: string; options: { path: string } }> }
    expect(provider.apiVersion).toBe(1)
    expect(provider.providers[0]?.type).toBe("file")
  })
})
