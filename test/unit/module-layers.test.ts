/**
 * The shape of the source tree: no two modules import each other, however long the way round,
 * and `src/domain` (decimals, order states, intents, hashes) imports nothing above it, so every
 * other layer can use it without dragging in the client, the engine or the venue. The platform
 * packages are imported module by module: their index loads every module of the package (HTTP
 * servers, sockets, workers), about a second of CPU at every start of every svcbot process.
 */
import { readdirSync, readFileSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { describe, expect, it } from "vitest"

const SRC = resolve(import.meta.dirname, "../../src")

const sourceFiles = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sourceFiles(join(dir, entry.name)) : entry.name.endsWith(".ts") ? [join(dir, entry.name)] : []
  )

/** Every relative import and export-from of a file (type-only ones too), as paths under src. */
const importsOf = (file: string): Array<string> => {
  const text = readFileSync(file, "utf8")
  const found: Array<string> = []
  for (const match of text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^"']*?\bfrom\s*["'](\.{1,2}\/[^"']+)["']/g)) {
    found.push(relative(SRC, resolve(dirname(file), match[1]!.replace(/\.js$/, ".ts"))))
  }
  return found
}

const graph = new Map(sourceFiles(SRC).map((file) => [relative(SRC, file), importsOf(file)]))

/** The import circles: strongly connected components of more than one module, or a module importing itself. */
const circles = (): Array<Array<string>> => {
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: Array<string> = []
  const onStack = new Set<string>()
  const found: Array<Array<string>> = []
  let next = 0
  const visit = (node: string): void => {
    index.set(node, next)
    low.set(node, next)
    next += 1
    stack.push(node)
    onStack.add(node)
    for (const to of graph.get(node) ?? []) {
      if (!graph.has(to)) continue
      if (!index.has(to)) {
        visit(to)
        low.set(node, Math.min(low.get(node)!, low.get(to)!))
      } else if (onStack.has(to)) low.set(node, Math.min(low.get(node)!, index.get(to)!))
    }
    if (low.get(node) !== index.get(node)) return
    const component: Array<string> = []
    let member: string
    do {
      member = stack.pop()!
      onStack.delete(member)
      component.push(member)
    } while (member !== node)
    if (component.length > 1 || (graph.get(node) ?? []).includes(node)) found.push(component.sort())
  }
  for (const node of graph.keys()) if (!index.has(node)) visit(node)
  return found
}

describe("module layers", () => {
  it("reads the imports of the tree (the check below has something to check)", () => {
    expect(graph.size).toBeGreaterThan(100)
    expect(graph.get("engine/Execution.ts")).toContain("domain/OrderState.ts")
  })

  it("has no import circle", () => {
    expect(circles()).toEqual([])
  })

  it("finds a circle when there is one", () => {
    graph.set("domain/Decimal.ts", [...graph.get("domain/Decimal.ts")!, "engine/Execution.ts"])
    try {
      expect(circles().some((c) => c.includes("domain/Decimal.ts") && c.includes("engine/Execution.ts"))).toBe(true)
    } finally {
      graph.set("domain/Decimal.ts", importsOf(join(SRC, "domain/Decimal.ts")))
    }
  })

  it("keeps src/domain free of imports from above it", () => {
    const upward = [...graph].filter(([file]) => file.startsWith("domain/")).flatMap(([file, imports]) => imports.filter((to) => !to.startsWith("domain/")).map((to) => `${file} -> ${to}`))
    expect(upward).toEqual([])
  })

  it("imports @effect/platform and @effect/platform-node module by module, never through their index", () => {
    const files = [...sourceFiles(SRC), ...sourceFiles(resolve(SRC, "../apps"))]
    const whole = files.flatMap((file) =>
      [...readFileSync(file, "utf8").matchAll(/(?:^|\n)\s*import\s+(?!type\b)[^"']*?\bfrom\s*["'](@effect\/platform(?:-node)?)["']/g)].map((m) => `${relative(SRC, file)} imports ${m[1]}`)
    )
    expect(files.length).toBeGreaterThan(100)
    expect(whole).toEqual([])
  })
})
