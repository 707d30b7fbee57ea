// Starts apps/<app>/main: in a checkout, from a bundle of the sources (bin/bundle.js), built
// when a source changed, or through tsx where no bundle can be built (a checkout the user may
// not write, with no build of its sources yet); in the production image (dist/ present, sources
// absent), the compiled output.
import { existsSync } from "node:fs"
import { fileURLToPath, pathToFileURL } from "node:url"
import { dirname, join } from "node:path"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")

export const launch = async (app) => {
  const source = join(root, "apps", app, "main.ts")
  const compiled = join(root, "dist", "apps", app, "main.js")
  if (!existsSync(source) && existsSync(compiled)) {
    await import(pathToFileURL(compiled).href)
    return
  }
  const bundle = await import("./bundle.js").then(({ freshBundle }) => freshBundle(root)).catch((error) => {
    process.stderr.write(`svcbot: running from the sources, slower to start: no bundle of them could be built (${error instanceof Error ? error.message : String(error)})\n`)
    return undefined
  })
  if (bundle === undefined) {
    const { register } = await import("tsx/esm/api")
    register()
    await import(pathToFileURL(source).href)
    return
  }
  // A defect's stack names the sources' lines, not the bundle's.
  process.setSourceMapsEnabled(true)
  await import(pathToFileURL(join(bundle, "apps", app, "main.js")).href)
}
