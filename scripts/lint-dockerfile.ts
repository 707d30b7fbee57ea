/**
 * A Dockerfile linter with the hadolint-style rules this project's image must
 * keep: reproducible bases, a small runtime without the toolchain, a non-root
 * user, a health check, an orderly stop and a real init as PID 1.
 *
 *   npx tsx scripts/lint-dockerfile.ts [Dockerfile]   (exit 1 when a rule fails)
 */
import { readFileSync } from "node:fs"
import { resolve } from "node:path"
import { pathToFileURL } from "node:url"

export interface Instruction {
  /** Upper-case keyword: FROM, RUN, COPY ... */
  readonly keyword: string
  readonly args: string
  /** 1-based line where the instruction starts. */
  readonly line: number
}

export interface Finding {
  readonly rule: string
  readonly line: number
  readonly message: string
}

interface Stage {
  readonly from: Instruction
  readonly name: string | undefined
  readonly instructions: ReadonlyArray<Instruction>
}

/** Joins continuation lines and drops comments, as the Docker builder does. */
export const parseDockerfile = (text: string): ReadonlyArray<Instruction> => {
  const instructions: Array<Instruction> = []
  let pending: { parts: Array<string>; line: number } | undefined
  text.split(/\r?\n/).forEach((raw, index) => {
    const trimmed = raw.trim()
    if (trimmed.startsWith("#") || (trimmed === "" && pending === undefined)) return
    const continues = trimmed.endsWith("\\")
    const content = continues ? trimmed.slice(0, -1).trim() : trimmed
    pending ??= { parts: [], line: index + 1 }
    if (content !== "") pending.parts.push(content)
    if (continues) return
    const joined = pending.parts.join(" ")
    const match = /^(\S+)\s*(.*)$/s.exec(joined)
    if (match !== null) instructions.push({ keyword: match[1]!.toUpperCase(), args: match[2] ?? "", line: pending.line })
    pending = undefined
  })
  if (pending !== undefined && pending.parts.length > 0) {
    const joined = pending.parts.join(" ")
    const [keyword = "", ...rest] = joined.split(/\s+/)
    instructions.push({ keyword: keyword.toUpperCase(), args: rest.join(" "), line: pending.line })
  }
  return instructions
}

/** The exec (JSON array) form of CMD, ENTRYPOINT or HEALTHCHECK CMD, or undefined for the shell form. */
export const execForm = (args: string): ReadonlyArray<string> | undefined => {
  if (!args.trim().startsWith("[")) return undefined
  try {
    const parsed: unknown = JSON.parse(args)
    return Array.isArray(parsed) && parsed.every((part) => typeof part === "string") ? parsed : undefined
  } catch {
    return undefined
  }
}

const withoutFlags = (args: string): Array<string> => args.split(/\s+/).filter((word) => word !== "" && !word.startsWith("--"))

const substitute = (text: string, variables: ReadonlyMap<string, string>): string =>
  text.replace(/\$\{?([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}?/g, (_all, name: string, fallback: string | undefined) => variables.get(name) ?? fallback ?? "")

/** `KEY=value` pairs of ENV or ARG, also the legacy `ENV KEY value` form. */
const assignments = (keyword: string, args: string): ReadonlyArray<{ key: string; value: string | undefined }> => {
  if (keyword === "ENV" && !/^[^\s=]+=/.test(args)) {
    const [key = "", ...value] = args.split(/\s+/)
    return [{ key, value: value.join(" ") }]
  }
  const pairs: Array<{ key: string; value: string | undefined }> = []
  for (const match of args.matchAll(/([A-Za-z_][A-Za-z0-9_]*)(?:=("[^"]*"|'[^']*'|\S*))?/g)) {
    pairs.push({ key: match[1]!, value: match[2] })
  }
  return pairs
}

const INIT_PROGRAMS = new Set(["tini", "tini-static", "dumb-init", "docker-init", "catatonit"])
const ROOT_USERS = new Set(["root", "0"])
const SECRET_NAME = /(SECRET|PASSWORD|PASSWD|TOKEN|API_KEY|PRIVATE_KEY)$/i

export const lintDockerfile = (text: string): ReadonlyArray<Finding> => {
  const findings: Array<Finding> = []
  const report = (rule: string, line: number, message: string) => findings.push({ rule, line, message })
  const instructions = parseDockerfile(text)

  const globalArgs = new Map<string, string>()
  const stages: Array<Stage> = []
  let current: { from: Instruction; name: string | undefined; instructions: Array<Instruction> } | undefined
  for (const instruction of instructions) {
    if (instruction.keyword === "FROM") {
      const words = withoutFlags(instruction.args)
      const asIndex = words.findIndex((word) => word.toUpperCase() === "AS")
      current = { from: instruction, name: asIndex >= 0 ? words[asIndex + 1] : undefined, instructions: [] }
      stages.push(current)
    } else if (current === undefined) {
      if (instruction.keyword === "ARG") for (const { key, value } of assignments("ARG", instruction.args)) globalArgs.set(key, value ?? "")
    } else {
      current.instructions.push(instruction)
    }
  }

  if (stages.length === 0) {
    report("from", 1, "no FROM instruction")
    return findings
  }

  const stageNames = new Set<string>()
  for (const stage of stages) {
    const image = substitute(withoutFlags(stage.from.args)[0] ?? "", globalArgs)
    if (!stageNames.has(image) && image !== "scratch") {
      const lastSegment = image.split("/").pop() ?? image
      const tag = image.includes("@") ? "digest" : lastSegment.includes(":") ? lastSegment.split(":").pop() : undefined
      if (tag === undefined || tag === "") report("pinned-base", stage.from.line, `base image "${image}" has no tag: pin a version (e.g. node:24.11.1-bookworm-slim) or a digest`)
      else if (tag === "latest") report("pinned-base", stage.from.line, `base image "${image}" uses the "latest" tag: pin a version or a digest`)
    }
    if (stage.name !== undefined) stageNames.add(stage.name)
  }
  if (stages.length < 2) report("multi-stage", stages[0]!.from.line, "use a build stage for the toolchain and a separate runtime stage")

  for (const instruction of instructions) {
    const { keyword, args, line } = instruction
    if (keyword === "ADD" && !withoutFlags(args).slice(0, -1).every((source) => /^(https?|git):\/\//.test(source) || source.startsWith("git@"))) {
      report("no-add", line, "ADD of local files: use COPY (ADD also unpacks archives and fetches URLs implicitly)")
    }
    if (keyword === "WORKDIR" && !substitute(args.trim(), globalArgs).startsWith("/")) report("workdir-absolute", line, "WORKDIR must be an absolute path")
    if (keyword === "MAINTAINER") report("no-maintainer", line, "MAINTAINER is deprecated: use LABEL org.opencontainers.image.authors")
    if ((keyword === "CMD" || keyword === "ENTRYPOINT") && execForm(args) === undefined) {
      report("exec-form", line, `${keyword} in shell form runs under /bin/sh, which does not forward SIGTERM: use the JSON array form`)
    }
    if (keyword === "ENV" || keyword === "ARG") {
      for (const { key, value } of assignments(keyword, args)) {
        if (SECRET_NAME.test(key) && value !== undefined && value !== "") {
          report("no-secret-in-image", line, `${keyword} ${key} bakes a secret into the image: pass it at run time (Docker secrets, *_FILE variables)`)
        }
      }
    }
    if (keyword === "RUN") {
      if (/(^|[;&|]\s*)sudo\s/.test(args)) report("no-sudo", line, "RUN uses sudo: switch USER instead")
      if (/^cd\s/.test(args.trim())) report("no-cd", line, "RUN starts with cd: use WORKDIR")
      if (/\bapt-get\s+(-\S+\s+)*install\b/.test(args)) {
        if (!args.includes("--no-install-recommends")) report("apt-no-recommends", line, "apt-get install without --no-install-recommends pulls in unneeded packages")
        if (!/\s(--yes|--assume-yes|-[A-Za-z]*y[A-Za-z]*)(\s|$)/.test(args)) report("apt-yes", line, "apt-get install needs -y to run unattended")
        if (!/\bapt-get\s+(-\S+\s+)*update\b/.test(args)) report("apt-update", line, "run apt-get update in the same RUN as apt-get install, or a cached stale index is used")
        if (!/rm\s+-(rf|fr|r)\s+\/var\/lib\/apt\/lists/.test(args)) report("apt-lists-cleanup", line, "remove /var/lib/apt/lists/* in the same RUN as apt-get install")
      }
      if (/\bapt\s+install\b/.test(args)) report("apt-get", line, "use apt-get in scripts: apt has no stable command-line interface")
    }
  }

  const final = stages[stages.length - 1]!
  const finalOf = (keyword: string) => final.instructions.filter((instruction) => instruction.keyword === keyword)
  const lastOf = (keyword: string) => finalOf(keyword).at(-1)

  const user = lastOf("USER")
  if (user === undefined) report("non-root-user", final.from.line, "the runtime stage sets no USER: the process would run as root")
  else if (ROOT_USERS.has(substitute(user.args.trim(), globalArgs).split(":")[0] ?? "")) report("non-root-user", user.line, "the last USER is root: run as an unprivileged user")

  const healthcheck = lastOf("HEALTHCHECK")
  if (healthcheck === undefined) report("healthcheck", final.from.line, "the runtime stage has no HEALTHCHECK")
  else if (/^NONE\b/i.test(healthcheck.args.trim())) report("healthcheck", healthcheck.line, "HEALTHCHECK NONE disables the health check")
  else if (!/\bCMD\b/i.test(healthcheck.args)) report("healthcheck", healthcheck.line, "HEALTHCHECK needs a CMD")

  if (lastOf("STOPSIGNAL") === undefined) report("stopsignal", final.from.line, "the runtime stage has no STOPSIGNAL: name the signal that starts an orderly shutdown")

  const entrypoint = lastOf("ENTRYPOINT")
  const program = entrypoint === undefined ? undefined : execForm(entrypoint.args)?.[0]
  if (program === undefined || !INIT_PROGRAMS.has(program.split("/").pop() ?? "")) {
    report(
      "init-pid1",
      entrypoint?.line ?? final.from.line,
      "PID 1 must be an init (tini, dumb-init): it forwards signals and reaps zombies; start the ENTRYPOINT with it"
    )
  }
  return findings.sort((a, b) => a.line - b.line)
}

const isMain = process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href
if (isMain) {
  const file = process.argv[2] ?? "Dockerfile"
  const findings = lintDockerfile(readFileSync(file, "utf8"))
  for (const finding of findings) console.log(`${file}:${finding.line} ${finding.rule}: ${finding.message}`)
  if (findings.length === 0) console.log(`${file}: no findings`)
  process.exitCode = findings.length === 0 ? 0 : 1
}
