// Starts apps/<app>/main: the TypeScript sources through tsx in a checkout, or
// the compiled output in the production image (dist/ present, sources absent).
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
  const { register } = await import("tsx/esm/api")
  register()
  await import(pathToFileURL(source).href)
}
