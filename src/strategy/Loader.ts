/**
 * Finds a strategy plugin: a shipped one under strategies/ by name, or a file
 * given by path in the config (in the container image, a folder mounted at e.g.
 * /strategies). A plugin's default export (or its only export that looks like a
 * definition) must come from `defineStrategy`.
 *
 * A plugin file lives outside svcbot's tree, so it cannot reach svcbot's modules
 * by relative path nor find svcbot's node_modules by walking up. Before the first
 * such file is imported, a module resolution hook gives it:
 * - the public strategy API under `svcbot/...` specifiers (PUBLIC_MODULES), which
 *   resolve to the very modules the daemon runs, so a plugin's `Decimal`,
 *   intents and schemas are the daemon's own;
 * - the packages svcbot ships (`effect`, `decimal.js`), for a bare import that
 *   does not resolve from the plugin's own folder.
 * A `.ts` plugin is compiled by tsx (a runtime dependency of svcbot): already
 * registered when svcbot runs from its sources, registered here when it runs
 * compiled (the container image).
 */
import { existsSync, readdirSync, statSync } from "node:fs"
import { register } from "node:module"
import { dirname, extname, isAbsolute, join, relative, resolve, sep } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { Data, Effect } from "effect"
import { BUNDLED_FROM } from "./BundledFrom.js"
import type { StrategyDefinition } from "./Strategy.js"

/**
 * The shipped strategies' sources: what a name finds, what is hashed for promotion records and
 * shown. In a bundle (bin/bundle.js) they are the checkout's, and each runs from its bundled
 * module (`runnable`), which shares the daemon's modules.
 */
export const STRATEGIES_DIR = BUNDLED_FROM === undefined ? fileURLToPath(new URL("../../strategies/", import.meta.url)) : join(BUNDLED_FROM, "strategies") + sep

/** The module to import for a plugin file: itself, but a shipped strategy's bundled module in a bundle. */
const runnable = (path: string): string =>
  BUNDLED_FROM === undefined || !path.startsWith(STRATEGIES_DIR)
    ? path
    : fileURLToPath(new URL(`../../strategies/${relative(STRATEGIES_DIR, path).replace(/\.ts$/, ".js")}`, import.meta.url))

export class StrategyNotFound extends Data.TaggedError("StrategyNotFound")<{ readonly instanceId: string; readonly message: string }> {}

export interface LoadedStrategy {
  readonly definition: StrategyDefinition
  /** The plugin file, whose contents are hashed for promotion records. */
  readonly sourcePath: string
}

/** The file extensions a plugin may have. */
export const PLUGIN_EXTENSIONS: ReadonlyArray<string> = [".ts", ".mts", ".js", ".mjs"]

/** This module's own extension: `.ts` when svcbot runs from its sources (tsx is registered), `.js` compiled. */
const OWN_EXTENSION = extname(fileURLToPath(import.meta.url))

/** The svcbot modules a plugin may import by name, and where they are relative to this file. */
export const PUBLIC_MODULES: Readonly<Record<string, string>> = {
  "svcbot/strategy": "./Strategy",
  "svcbot/strategy/orders": "./orders",
  "svcbot/strategy/indicators": "./indicators",
  "svcbot/decimal": "../domain/Decimal"
}

/** svcbot's own tree (the checkout, or dist/ in the image): bare imports from inside it resolve as usual. */
const HOST_ROOT = new URL("../../", import.meta.url).href

/**
 * Runs on Node's module hooks thread. An alias resolves to svcbot's module; a bare
 * import from outside svcbot's tree that fails is tried again as if svcbot made it.
 */
const RESOLVE_HOOK = `
let aliases = {}
let hostRoot = ""
let hostParent = ""
export function initialize(data) {
  aliases = data.aliases
  hostRoot = data.hostRoot
  hostParent = data.hostParent
}
const isBare = (specifier) => !/^(\\.{0,2}\\/|[a-z][a-z0-9+.-]*:)/i.test(specifier)
const outside = (url) => url !== undefined && url.startsWith("file:") && !url.startsWith(hostRoot) && !url.includes("/node_modules/")
// A plugin folder has no package.json saying "type": "module"; its .ts and .js files are ES modules all the same.
const asPlugin = (resolved) => (outside(resolved.url) && /\\.(ts|js)$/.test(resolved.url) ? { ...resolved, format: "module" } : resolved)
export async function resolve(specifier, context, next) {
  const alias = aliases[specifier]
  if (alias !== undefined) return next(alias, context)
  if (specifier === "svcbot" || specifier.startsWith("svcbot/")) {
    throw Object.assign(new Error(\`svcbot has no module "\${specifier}" (imported from \${context.parentURL})\`), { code: "ERR_MODULE_NOT_FOUND" })
  }
  try {
    return asPlugin(await next(specifier, context))
  } catch (error) {
    if (!outside(context.parentURL) || !isBare(specifier) || error?.code !== "ERR_MODULE_NOT_FOUND") throw error
    try {
      return await next(specifier, { ...context, parentURL: hostParent })
    } catch {
      // The plugin's own failure names the plugin as the importer.
      throw error
    }
  }
}
`

let pluginSupport: Promise<void> | undefined

/** Installs the resolution hook (and tsx, when svcbot runs compiled) once per thread. */
const preparePluginSupport = (): Promise<void> =>
  (pluginSupport ??= (async () => {
    const aliases = Object.fromEntries(Object.entries(PUBLIC_MODULES).map(([name, path]) => [name, new URL(`${path}${OWN_EXTENSION}`, import.meta.url).href]))
    if (OWN_EXTENSION !== ".ts") {
      const tsx = await import("tsx/esm/api")
      // The plugin's folder has no tsconfig of svcbot's to follow: tsx's defaults compile it.
      tsx.register({ tsconfig: false })
    }
    // Registered after tsx, so it runs first and has the last word on a plugin file's format.
    register(`data:text/javascript,${encodeURIComponent(RESOLVE_HOOK)}`, {
      parentURL: import.meta.url,
      data: { aliases, hostRoot: HOST_ROOT, hostParent: import.meta.url }
    })
  })())

const isDefinition = (value: unknown): value is StrategyDefinition =>
  value !== null &&
  typeof value === "object" &&
  typeof (value as StrategyDefinition).name === "string" &&
  typeof (value as StrategyDefinition).init === "function"

const looksLikePath = (reference: string): boolean => reference.includes("/") || reference.includes("\\") || PLUGIN_EXTENSIONS.includes(extname(reference))

const candidates = (reference: string, cwd: string): ReadonlyArray<string> => {
  if (looksLikePath(reference)) return [isAbsolute(reference) ? reference : resolve(cwd, reference)]
  return [join(STRATEGIES_DIR, `${reference}.ts`), join(STRATEGIES_DIR, `${reference}.js`)]
}

/** Why a path names no plugin file, with what the folder holds. */
const missingFile = (path: string): string => {
  const folder = dirname(path)
  if (!existsSync(folder)) {
    return `the folder ${folder} does not exist (in a container, mount your strategies folder there, e.g. a volume ./my-strategies:/strategies:ro)`
  }
  const plugins = readdirSync(folder).filter((name) => PLUGIN_EXTENSIONS.includes(extname(name)))
  return `${path} does not exist; ${plugins.length === 0 ? `${folder} holds no plugin file (${PLUGIN_EXTENSIONS.join(", ")})` : `${folder} holds ${plugins.sort().join(", ")}`}`
}

const messageOf = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

/** What a failed import means for the author of the plugin, and what to do. */
const importFailure = (path: string, cause: unknown): string => {
  const message = messageOf(cause).trim()
  const code = typeof cause === "object" && cause !== null && "code" in cause ? String(cause.code) : undefined
  if (cause instanceof SyntaxError || /^Transform failed|ERROR:/m.test(message)) {
    return `${path} does not compile: ${message}\n    fix the syntax at the line shown (a .ts plugin is compiled by tsx: types are stripped, not checked)`
  }
  if (code === "ERR_MODULE_NOT_FOUND" || code === "ERR_PACKAGE_PATH_NOT_EXPORTED") {
    return `${path} imports a module that cannot be found: ${message}\n    a plugin may import ${Object.keys(PUBLIC_MODULES).join(", ")}, the packages svcbot ships (effect, decimal.js), and files beside it by relative path`
  }
  return `${path} failed to load: ${message}`
}

/**
 * The plugin file a config's `strategy` field names, found without importing it: a caller that
 * must check the file (its source hash) before running its code reads it here first.
 */
export const findStrategyFile = (instanceId: string, reference: string, cwd: string = process.cwd()): Effect.Effect<string, StrategyNotFound> =>
  Effect.gen(function* () {
    const field = `strategies[${instanceId}].strategy`
    const paths = candidates(reference, cwd)
    const path = paths.find((candidate) => existsSync(candidate) && statSync(candidate).isFile())
    if (path === undefined) {
      return yield* new StrategyNotFound({
        instanceId,
        message: looksLikePath(reference)
          ? `${field}: no plugin file at ${reference}: ${missingFile(paths[0]!)}`
          : `${field}: no strategy "${reference}" (use a shipped name such as sma-crossover, grid, dca, rebalance, market-maker, protective-stop, or a path to a plugin file)`
      })
    }
    if (!PLUGIN_EXTENSIONS.includes(extname(path))) {
      return yield* new StrategyNotFound({ instanceId, message: `${field}: ${path} is not a plugin file: name a ${PLUGIN_EXTENSIONS.join(", ")} file` })
    }
    return path
  })

/** Loads the plugin named by a config's `strategy` field. */
export const loadStrategy = (instanceId: string, reference: string, cwd: string = process.cwd()): Effect.Effect<LoadedStrategy, StrategyNotFound> =>
  Effect.gen(function* () {
    const field = `strategies[${instanceId}].strategy`
    const path = yield* findStrategyFile(instanceId, reference, cwd)
    const shipped = path.startsWith(STRATEGIES_DIR)
    if (!shipped) yield* Effect.promise(preparePluginSupport)
    const module = yield* Effect.tryPromise({
      try: () => import(pathToFileURL(runnable(path)).href) as Promise<Record<string, unknown>>,
      catch: (cause) => new StrategyNotFound({ instanceId, message: `${field}: ${importFailure(path, cause)}` })
    })
    const exported = isDefinition(module.default) ? module.default : Object.values(module).find(isDefinition)
    if (exported === undefined) {
      return yield* new StrategyNotFound({
        instanceId,
        message: `${field}: ${path} exports no strategy: end it with \`export default defineStrategy({ name, version, params, state, init, onCandle ... })\`, defineStrategy imported from "svcbot/strategy"`
      })
    }
    return { definition: exported, sourcePath: path }
  })
