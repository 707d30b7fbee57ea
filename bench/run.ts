/**
 * `npm run bench`: runs every bench/*.bench.ts in its own process, one after the
 * other (they measure throughput, so they must not share the two cores), and
 * prints each one's table. `npm run bench -- venue client` runs only those.
 * Every figure is a ratio against a baseline measured in the same run.
 */
import { spawnSync } from "node:child_process"
import { readdirSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const here = dirname(fileURLToPath(import.meta.url))
const wanted = process.argv.slice(2)
const benches = readdirSync(here)
  .filter((file) => file.endsWith(".bench.ts"))
  .filter((file) => wanted.length === 0 || wanted.some((name) => file.startsWith(name)))
  .sort()

let failed = 0
for (const file of benches) {
  process.stdout.write(`\n=== ${file} ===\n`)
  const run = spawnSync(process.execPath, ["--expose-gc", "--import", "tsx", join(here, file)], { stdio: "inherit" })
  if (run.status !== 0) {
    failed += 1
    process.stdout.write(`${file} exited with ${run.status ?? run.signal}\n`)
  }
}
process.exitCode = failed === 0 ? 0 : 1
