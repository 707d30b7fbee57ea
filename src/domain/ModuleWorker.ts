/**
 * Worker threads started from a module of their own: the backtester's (sweeps, optimisation
 * trials) and the fill ledger's writer. Compiled, a worker runs the
 * `.js` file beside its caller. From TypeScript sources it runs an eval'd bootstrap that
 * registers tsx's ESM loader, found from here: an eval'd worker has no module location of its
 * own to resolve packages from, and Node 20 does not take `--import` for a worker.
 */
import { createRequire } from "node:module"
import { pathToFileURL } from "node:url"
import { Worker } from "node:worker_threads"

/** Starts the worker module `name` that sits beside `callerUrl` (the caller's import.meta.url). */
export const startModuleWorker = (callerUrl: string, name: string, workerData: unknown): Worker => {
  if (!callerUrl.endsWith(".ts")) return new Worker(new URL(`./${name}.js`, callerUrl), { workerData })
  const tsx = new URL("dist/esm/api/index.mjs", pathToFileURL(createRequire(import.meta.url).resolve("tsx/package.json"))).href
  const entry = new URL(`./${name}.ts`, callerUrl).href
  return new Worker(`import(${JSON.stringify(tsx)}).then((api) => { api.register(); return import(${JSON.stringify(entry)}) })`, { eval: true, workerData })
}
