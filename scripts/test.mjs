// `npm test`: the typecheck, the fast tier and the integration tier in turn, with the container tier
// beside them from the start (test/support/tiers.ts); then the slow tier alone. The container
// tier's files mostly wait on an image build and on compose projects, which leaves the cores to the
// others. The slow tier runs once both have ended: its daemons, started every few seconds by the
// crash loops, and its browser must get the cores within their waits. The container tier's output
// is held and printed whole when it ends, so that the two streams do not interleave line by line.
// Exits 1 when any step fails, after every started step has ended.
import { spawn } from "node:child_process"

const npmRun = (script, output) =>
  new Promise((done) => {
    const child = spawn("npm", ["run", "--silent", script], { stdio: ["ignore", output === undefined ? "inherit" : "pipe", output === undefined ? "inherit" : "pipe"] })
    if (output !== undefined) {
      child.stdout.on("data", (chunk) => output.push(chunk))
      child.stderr.on("data", (chunk) => output.push(chunk))
    }
    child.on("exit", (code, signal) => done(code === 0 ? undefined : `${script} ${signal === null ? `exited ${code}` : `was stopped by ${signal}`}`))
  })

const inOrder = async (scripts) => {
  for (const script of scripts) {
    const failure = await npmRun(script)
    if (failure !== undefined) return failure
  }
  return undefined
}

const started = Date.now()
const seconds = () => `${Math.round((Date.now() - started) / 1000)} s`

/** Runs a tier with its output held, and prints that output whole when the tier ends. */
const held = (script) => {
  const output = []
  return npmRun(script, output).then((failure) => {
    process.stdout.write(`\n--- ${script} (ran beside the typecheck, fast and integration tiers), ended at ${seconds()} ---\n`)
    for (const chunk of output) process.stdout.write(chunk)
    return failure
  })
}

let failures = (await Promise.all([inOrder(["typecheck", "test:fast", "test:integration"]), held("test:container")])).filter((f) => f !== undefined)
if (failures.length === 0) failures = [await inOrder(["test:slow"])].filter((f) => f !== undefined)
process.stdout.write(`\nnpm test: ${failures.length === 0 ? "every step passed" : `failed: ${failures.join("; ")}`} in ${seconds()}\n`)
process.exitCode = failures.length === 0 ? 0 : 1
