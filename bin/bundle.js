// The checkout's programs as a few bundled files, so that a start costs about a second of CPU
// rather than three: loading the sources through tsx and @effect/*'s hundreds of ES modules one
// file at a time is most of what a start costs. The bundle is a cache of the sources, built by
// esbuild when a source changed, under node_modules/.cache/svcbot/KEY where KEY hashes every
// source's path and contents.
//
// What must stay as it is, and how:
// - A module's own location (`import.meta.url`: migrations, the shipped strategies, worker
//   threads, the plugin hook) is the path its sources have in the tree, mirrored under KEY
//   (src/store/Migrations.ts -> KEY/src/store/Migrations.js), whatever chunk its code ends in.
// - Whatever is loaded by location is an entry of its own at that mirrored path: the programs,
//   the worker threads, the shipped strategies and the public modules a plugin imports; entries
//   share their modules through chunks, so a plugin's `svcbot/strategy` is the daemon's own.
// - Packages other than @effect/* stay in node_modules: `effect` is the one a plugin imports,
//   better-sqlite3 is native, pino and tsx start threads of their own from their files.
import { createHash } from "node:crypto"
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs"
import { join, relative } from "node:path"
import { pathToFileURL } from "node:url"

/** The folders the bundle is made from; migrations/ is copied beside it as the image does. */
const SOURCE_FOLDERS = ["apps", "src", "strategies", "migrations"]

/** Modules loaded by location at run time (see the header), besides apps/ and strategies/. */
const LOCATED_ENTRIES = [
  "src/strategy/Strategy.ts",
  "src/strategy/orders.ts",
  "src/strategy/indicators.ts",
  "src/domain/Decimal.ts",
  "src/backtest/SweepWorker.ts",
  "src/optimize/TrialWorker.ts",
  "src/store/FillWriterThread.ts"
]

/** How many builds to keep: a daemon started from an older one may still load its lazy chunks. */
const KEPT_BUILDS = 8

const isSource = (name) => (name.endsWith(".ts") && !name.endsWith(".test.ts") && !name.endsWith(".d.ts")) || name.endsWith(".sql")

const walk = (root, folder, into) => {
  const path = join(root, folder)
  if (!existsSync(path)) return into
  for (const entry of readdirSync(path, { withFileTypes: true })) {
    const child = join(folder, entry.name)
    if (entry.isDirectory()) walk(root, child, into)
    else if (isSource(entry.name)) into.push(child)
  }
  return into
}

/** Every source file, relative to the checkout, sorted. */
const sourcesOf = (root) => SOURCE_FOLDERS.flatMap((folder) => walk(root, folder, [])).sort()

/**
 * The key of the sources as they are now: any change to a source, the lockfile or this builder
 * makes a new one. Contents, not modification times, which a coarse file system or a checkout
 * tool can leave equal across an edit; hashing them costs about 20 ms.
 */
const keyOf = (root, sources) => {
  const hash = createHash("sha256").update(root)
  for (const file of [...sources, "package-lock.json", "bin/bundle.js"]) {
    const path = join(root, file)
    if (existsSync(path)) hash.update(`${file}\0`).update(readFileSync(path)).update("\0")
  }
  return hash.digest("hex").slice(0, 16)
}

/**
 * Replaces `import.meta.url` in each source with its mirrored location in the build (see the
 * header), and tells src/strategy/BundledFrom.ts which checkout the build is of: the shipped
 * strategies' sources, hashed for promotion records, are the checkout's files, not the build's.
 */
const locationPlugin = (root, finalDir) => ({
  name: "svcbot-locations",
  setup(build) {
    const bundledFrom = join(root, "src", "strategy", "BundledFrom.ts")
    build.onLoad({ filter: /\.ts$/ }, async (args) => {
      if (args.path === bundledFrom) return { contents: `export const BUNDLED_FROM = ${JSON.stringify(root)}\n`, loader: "ts" }
      const { readFile } = await import("node:fs/promises")
      const text = await readFile(args.path, "utf8")
      if (!text.includes("import.meta.url")) return { contents: text, loader: "ts" }
      const mirrored = pathToFileURL(join(finalDir, relative(root, args.path)).replace(/\.ts$/, ".js")).href
      return { contents: text.replaceAll("import.meta.url", JSON.stringify(mirrored)), loader: "ts" }
    })
  }
})

/**
 * Keeps every package but @effect/* out of the bundle (see the header). A package that resolves
 * to another copy than the bare name reaches from the checkout (platform-node's own undici) is
 * bundled instead: from the bundle's folder the bare name would reach the top-level copy. Both
 * are resolved rather than the path read for a nested node_modules, because a checkout whose
 * packages are symlinks (a git worktree sharing another's node_modules) resolves to real paths
 * outside its own node_modules.
 */
const packagesPlugin = (root) => ({
  name: "svcbot-packages",
  setup(build) {
    build.onResolve({ filter: /^[^./]/ }, async (args) => {
      if (args.path.startsWith("@effect/") || args.pluginData === "resolving") return undefined
      const resolved = await build.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, pluginData: "resolving" })
      const fromRoot = await build.resolve(args.path, { kind: args.kind, resolveDir: root, pluginData: "resolving" })
      return resolved.path === fromRoot.path ? { path: args.path, external: true } : { path: resolved.path }
    })
  }
})

/** Builds into `outdir`, with every location saying `finalDir`, where the build will be used from. */
const build = async (root, sources, outdir, finalDir) => {
  const esbuild = await import("esbuild")
  const entryPoints = sources.filter((file) => (file.startsWith("apps/") || file.startsWith("strategies/") || LOCATED_ENTRIES.includes(file)) && file.endsWith(".ts"))
  await esbuild.build({
    absWorkingDir: root,
    entryPoints,
    outbase: ".",
    outdir,
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node20",
    sourcemap: "linked",
    chunkNames: "chunks/[name]-[hash]",
    // A bundled CommonJS package (platform-node's undici) requires Node's modules.
    banner: { js: 'import { createRequire as svcbotCreateRequire } from "node:module"; const require = svcbotCreateRequire(import.meta.url);' },
    logLevel: "silent",
    plugins: [packagesPlugin(root), locationPlugin(root, finalDir)]
  })
  cpSync(join(root, "migrations"), join(outdir, "migrations"), { recursive: true })
  // The build's .js files are ES modules wherever the cache sits.
  writeFileSync(join(outdir, "package.json"), '{ "type": "module" }\n')
}

/** Removes all but the most recently used builds. */
const prune = (cache, current) => {
  const builds = readdirSync(cache, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && entry.name !== current)
    .map((entry) => ({ path: join(cache, entry.name), usedAt: statSync(join(cache, entry.name)).mtimeMs }))
    .sort((a, b) => b.usedAt - a.usedAt)
  for (const old of builds.slice(KEPT_BUILDS - 1)) rmSync(old.path, { recursive: true, force: true })
}

/**
 * The folder of a build of the checkout's sources as they are now, built first when there is
 * none. Processes that start at once may each build; the first to finish is the one kept.
 */
export const freshBundle = async (root) => {
  const sources = sourcesOf(root)
  const cache = join(root, "node_modules", ".cache", "svcbot")
  const key = keyOf(root, sources)
  const dir = join(cache, key)
  if (existsSync(join(dir, "package.json"))) {
    // Marks the build used, for prune; a user who may not write the cache uses it all the same.
    try {
      const now = new Date()
      utimesSync(dir, now, now)
    } catch {}
    return dir
  }
  mkdirSync(cache, { recursive: true })
  const staging = `${dir}.${process.pid}.tmp`
  rmSync(staging, { recursive: true, force: true })
  await build(root, sources, staging, dir).catch((error) => {
    rmSync(staging, { recursive: true, force: true })
    throw error
  })
  try {
    renameSync(staging, dir)
  } catch {
    // Another process finished the same build first.
    rmSync(staging, { recursive: true, force: true })
  }
  prune(cache, key)
  return dir
}
