// `npm test`: the typecheck and every tier (test/support/tiers.ts). The container tier runs beside
// the integration and slow tiers rather than after them: its files mostly wait on an image build
// and on compose projects, which leaves the cores to the other tiers. Its output is held and
// printed whole when it ends, so that the two streams do not interleave line by line. Exits 1
// when any step fails, after every started step has ended.
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

let failures = [await inOrder(["typecheck", "test:fast"])].filter((f) => f !== undefined)
if (failures.length === 0) {
  const containerOutput = []
  const container = npmRun("test:container", containerOutput).then((failure) => {
    process.stdout.write(`\n--- test:container (ran beside test:integration and test:slow), ended at ${seconds()} ---\n`)
    for (const chunk of containerOutput) process.stdout.write(chunk)
    return failure
  })
  failures = (await Promise.all([inOrder(["test:integration", "test:slow"]), container])).filter((f) => f !== undefined)
}
process.stdout.write(`\nnpm test: ${failures.length === 0 ? "every step passed" : `failed: ${failures.join("; ")}`} in ${seconds()}\n`)
process.exitCode = failures.length === 0 ? 0 : 1
