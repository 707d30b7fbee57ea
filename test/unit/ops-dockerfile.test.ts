import { existsSync, readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { execForm, lintDockerfile, parseDockerfile } from "../../scripts/lint-dockerfile.js"

const dockerfile = readFileSync("Dockerfile", "utf8")

/** A Dockerfile that keeps every rule; each case below breaks exactly one. */
const good = `# syntax=docker/dockerfile:1
ARG NODE_TAG=24.11.1-bookworm-slim
FROM node:\${NODE_TAG} AS build
WORKDIR /app
RUN apt-get update \\
 && apt-get install -y --no-install-recommends python3 make g++ \\
 && rm -rf /var/lib/apt/lists/*
COPY . .
FROM node:24.11.1-bookworm-slim
RUN apt-get update && apt-get install -qqy --no-install-recommends tini && rm -rf /var/lib/apt/lists/*
ENV NODE_ENV=production SVC_API_KEY_FILE=/run/secrets/svc_api_key
WORKDIR /app
COPY --from=build /app/dist ./dist
USER node
HEALTHCHECK --interval=30s CMD ["node", "healthcheck.mjs"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--", "node", "bin/svcbot.js"]
CMD ["run"]
`

const breaks: ReadonlyArray<readonly [rule: string, from: string | RegExp, to: string]> = [
  ["pinned-base", "FROM node:24.11.1-bookworm-slim\n", "FROM node\n"],
  ["pinned-base", "FROM node:24.11.1-bookworm-slim\n", "FROM docker.io/library/node:latest\n"],
  ["pinned-base", "ARG NODE_TAG=24.11.1-bookworm-slim", "ARG NODE_TAG=latest"],
  ["multi-stage", /^FROM node:\$\{NODE_TAG\} AS build[\s\S]*?(?=FROM node:24)/m, ""],
  ["no-add", "COPY . .", "ADD . ."],
  ["workdir-absolute", "WORKDIR /app\nCOPY --from", "WORKDIR app\nCOPY --from"],
  ["exec-form", 'CMD ["run"]', "CMD run"],
  ["exec-form", 'ENTRYPOINT ["/usr/bin/tini", "--", "node", "bin/svcbot.js"]\n', 'ENTRYPOINT ["/usr/bin/tini", "--", "node", "bin/svcbot.js"]\nENTRYPOINT exec tini -- node bin/svcbot.js\n'],
  ["no-secret-in-image", "ENV NODE_ENV=production", "ENV NODE_ENV=production SVC_API_SECRET=svs_live_abc"],
  ["no-secret-in-image", "ARG NODE_TAG=", "ARG GITHUB_TOKEN=ghp_x\nARG NODE_TAG="],
  ["no-sudo", "COPY . .", "RUN sudo make install"],
  ["no-cd", "COPY . .", "RUN cd /app && make"],
  ["apt-no-recommends", "install -qqy --no-install-recommends tini", "install -qqy tini"],
  ["apt-yes", "install -qqy --no-install-recommends tini", "install --no-install-recommends tini"],
  ["apt-update", "RUN apt-get update && apt-get install -qqy", "RUN apt-get install -qqy"],
  ["apt-lists-cleanup", "tini && rm -rf /var/lib/apt/lists/*", "tini"],
  ["apt-get", "COPY . .", "RUN apt install -y --no-install-recommends curl && rm -rf /var/lib/apt/lists/*"],
  ["non-root-user", "USER node\n", ""],
  ["non-root-user", "USER node\n", "USER node\nUSER root:root\n"],
  ["healthcheck", /^HEALTHCHECK .*\n/m, ""],
  ["healthcheck", /^HEALTHCHECK .*\n/m, "HEALTHCHECK NONE\n"],
  ["stopsignal", "STOPSIGNAL SIGTERM\n", ""],
  ["init-pid1", 'ENTRYPOINT ["/usr/bin/tini", "--", "node", "bin/svcbot.js"]', 'ENTRYPOINT ["node", "bin/svcbot.js"]'],
  ["init-pid1", 'ENTRYPOINT ["/usr/bin/tini", "--", "node", "bin/svcbot.js"]\n', ""],
  ["no-maintainer", "WORKDIR /app\nRUN", "MAINTAINER someone\nWORKDIR /app\nRUN"]
]

/** The paths .dockerignore keeps out of the build context (later patterns win; `!` re-includes). */
const isIgnored = (path: string): boolean => {
  const patterns = readFileSync(".dockerignore", "utf8")
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#"))
  const toRegExp = (glob: string) =>
    new RegExp(`^${glob.replace(/[.+^$()|[\]{}]/g, "\\$&").replace(/\*\*/g, "\u0000").replace(/\*/g, "[^/]*").replace(/\?/g, "[^/]").replace(/\u0000/g, ".*")}(/.*)?$`)
  let ignored = false
  for (const pattern of patterns) {
    const negated = pattern.startsWith("!")
    if (toRegExp(negated ? pattern.slice(1) : pattern).test(path)) ignored = !negated
  }
  return ignored
}

describe("Dockerfile lint", () => {
  it("the project's Dockerfile keeps every rule", () => {
    expect(lintDockerfile(dockerfile)).toEqual([])
  })

  it("the reference Dockerfile keeps every rule", () => {
    expect(lintDockerfile(good)).toEqual([])
  })

  it.each(breaks.map(([rule, from, to], index) => [`${rule} #${index}`, rule, from, to] as const))("reports %s", (_name, rule, from, to) => {
    const broken = good.replace(from, to)
    expect(broken).not.toBe(good)
    const rules = lintDockerfile(broken).map((finding) => finding.rule)
    expect(rules).toContain(rule)
  })

  it("joins continuation lines, skips comments and keeps the starting line", () => {
    const instructions = parseDockerfile("# c\nFROM a:1\nRUN one \\\n  # inside\n  two\nCMD [\"x\"]\n")
    expect(instructions).toEqual([
      { keyword: "FROM", args: "a:1", line: 2 },
      { keyword: "RUN", args: "one two", line: 3 },
      { keyword: "CMD", args: '["x"]', line: 6 }
    ])
    expect(execForm('["a", "b"]')).toEqual(["a", "b"])
    expect(execForm("a b")).toBeUndefined()
    expect(execForm('["a", 1]')).toBeUndefined()
  })
})

describe("the production image", () => {
  const instructions = parseDockerfile(dockerfile)
  const stageStarts = instructions.flatMap((instruction, index) => (instruction.keyword === "FROM" ? [index] : []))
  const runtime = instructions.slice(stageStarts.at(-1))

  it("runs on Node 24 LTS, the same base as the build stage so the native better-sqlite3 module fits", () => {
    const bases = instructions.filter((i) => i.keyword === "FROM").map((i) => i.args.split(/\s+/)[0])
    expect(bases.length).toBeGreaterThanOrEqual(2)
    for (const base of bases) expect(base).toMatch(/^node:24\.\d+\.\d+-[a-z]+-slim$/)
    expect(new Set(bases).size).toBe(1)
  })

  it("ships compiled output and production dependencies only, never the TypeScript sources", () => {
    const copies = runtime.filter((i) => i.keyword === "COPY")
    const fromContext = copies.filter((i) => !i.args.startsWith("--from="))
    for (const copy of fromContext) expect(copy.args).not.toMatch(/^(src|apps|strategies|test)\b/)
    expect(copies.some((i) => /--from=build \/app\/dist /.test(i.args))).toBe(true)
    expect(dockerfile).toMatch(/npm prune --omit=dev/)
  })

  it("copies only paths that exist and that .dockerignore lets into the build context", () => {
    const sources = instructions
      .filter((i) => i.keyword === "COPY" && !i.args.startsWith("--from="))
      .flatMap((i) => i.args.split(/\s+/).filter((word) => !word.startsWith("--")).slice(0, -1))
    expect(sources.length).toBeGreaterThan(3)
    for (const source of sources) {
      expect(existsSync(source), `${source} exists`).toBe(true)
      expect(isIgnored(source), `${source} is in the build context`).toBe(false)
    }
    expect(isIgnored("node_modules")).toBe(true)
    expect(isIgnored("secrets/svc_api_secret")).toBe(true)
    expect(isIgnored("ops/grafana/dashboards/svcbot.json")).toBe(true)
  })

  it("can compile a mounted .ts strategy: tsx is a production dependency, kept by the prune and copied into the runtime", () => {
    const manifest = JSON.parse(readFileSync("package.json", "utf8")) as { dependencies: Record<string, string>; devDependencies?: Record<string, string> }
    expect(manifest.dependencies.tsx, "tsx is in dependencies").toMatch(/^\d+\.\d+\.\d+$/)
    expect(manifest.devDependencies ?? {}).not.toHaveProperty("tsx")
    const build = instructions.slice(0, stageStarts.at(-1))
    expect(build.some((i) => i.keyword === "RUN" && /npm prune --omit=dev/.test(i.args))).toBe(true)
    expect(runtime.some((i) => i.keyword === "COPY" && /^--from=build \/app\/node_modules /.test(i.args))).toBe(true)
    // The compiled loader (no tsx registered by the launcher) registers it for a .ts plugin.
    expect(readFileSync("src/strategy/Loader.ts", "utf8")).toMatch(/import\("tsx\/esm\/api"\)/)
  })

  it("keeps data in a volume the unprivileged user owns and checks health on SVC_HEALTH_PORT", () => {
    expect(dockerfile).toMatch(/SVC_DATABASE_PATH=\/app\/data\//)
    expect(dockerfile).toMatch(/VOLUME \["\/app\/data", "\/app\/evidence"\]/)
    expect(dockerfile).toMatch(/chown node:node \/app\/data/)
    const port = /SVC_HEALTH_PORT=(\d+)/.exec(dockerfile)?.[1]
    expect(port).toBeDefined()
    expect(dockerfile).toContain(`EXPOSE ${port}`)
  })
})
