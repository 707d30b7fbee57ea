/**
 * The `cluster` profile's workers in containers of the image: three replicas of the `worker`
 * service take the trials of an `optimize --cluster` run started with `docker compose run`.
 *
 * The profile's Postgres is the official `postgres` image, which Docker Hub serves; where it cannot
 * be had, the workers' containers run against a throwaway PostgreSQL on the host instead (host
 * networking, so that loopback reaches it), and the test says which it ran.
 */
import { spawnSync } from "node:child_process"
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { findPostgres, startPostgres, type Postgres } from "../support/postgres.js"
import { buildImage, IMAGE_TAG, project, scratch, serviceEvents, unavailable, writeJson, type Project } from "./compose.js"

const tools = findPostgres()
const reason = unavailable ?? ("missing" in tools ? tools.missing : undefined)

describe.skipIf(reason !== undefined)(`the cluster profile's workers${reason === undefined ? "" : ` (skipped: ${reason})`}`, () => {
  let p: Project
  let pg: Postgres

  beforeAll(async () => {
    if ("missing" in tools) return
    await buildImage()
    const image = spawnSync("docker", ["image", "inspect", "postgres:15.18"], { encoding: "utf8" })
    console.log(`cluster profile: ${image.status === 0 ? "postgres:15.18 is here, but " : ""}the workers run against a throwaway PostgreSQL on the host (host networking)`)
    pg = await startPostgres(tools)
    const dir = scratch("cluster")
    // The profile's secret files must exist for compose to start it, as docs/optimize.md has users make them.
    const secrets = join(dir, "secrets")
    mkdirSync(secrets)
    writeFileSync(join(secrets, "cluster_password"), "unused-by-the-host-postgres")
    writeFileSync(join(secrets, "cluster_url"), pg.url)
    const override = writeJson(join(dir, "override.json"), {
      services: {
        worker: {
          network_mode: "host",
          command: ["worker", "--cluster", pg.url, "--host", "127.0.0.1", "--cache", "/tmp/datasets"]
        }
      }
    })
    p = await project("cluster", { files: [override], env: { SVC_SECRETS_DIR: secrets } })
  }, 900_000)

  afterAll(async () => {
    await p?.down()
    pg?.stop()
  }, 120_000)

  it("three worker containers on one host each take a free port and share an optimize run", async () => {
    const up = await p.compose(["--profile", "cluster", "up", "-d", "--no-deps", "--scale", "worker=3", "worker"])
    expect(up.status, up.stderr).toBe(0)
    // The run itself from the same image, beside the workers on the host's network (compose's `run`
    // cannot: it links the service to Postgres, which host networking refuses).
    const run = spawnSync("docker", [
      "run", "--rm", "--network", "host", "--read-only", "--tmpfs", "/tmp", "--cap-drop", "ALL", "--security-opt", "no-new-privileges:true",
      `svcbot:${IMAGE_TAG}`, "optimize", "--cluster", pg.url, "--strategy", "sma-crossover", "--synthetic", "42:20000",
      "--space", "config/optimize/sma-crossover-space.json", "--json"
    ], { encoding: "utf8", timeout: 600_000 })
    expect(run.status, run.stderr.slice(-3000)).toBe(0)
    const result = JSON.parse(run.stdout) as { ranked: ReadonlyArray<unknown> }
    expect(result.ranked.length).toBeGreaterThan(0)

    // Every replica is still up and registered under a port of its own.
    const listening = (await serviceEvents(p, "worker")).filter((e) => e.event === "worker.started")
    const ports = new Set(listening.map((e) => String(e.address)))
    expect(ports.size, JSON.stringify(listening)).toBe(3)
    const ps = await p.compose(["--profile", "cluster", "ps", "-q", "worker"])
    const ids = ps.stdout.split("\n").filter((line) => line.trim() !== "")
    expect(ids).toHaveLength(3)
    const states = ids.map((id) => spawnSync("docker", ["inspect", "--format", "{{.State.Status}} {{.RestartCount}}", id], { encoding: "utf8" }).stdout.trim())
    const logs = states.every((state) => state === "running 0") ? "" : (await p.compose(["--profile", "cluster", "logs", "--no-color", "worker"])).stdout.slice(-6000)
    expect(states, logs).toEqual(["running 0", "running 0", "running 0"])
  }, 900_000)
})
