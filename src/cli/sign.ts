/**
 * `svcbot sign`: prints the canonical string, signature and headers of a request,
 * the first tool to reach for when the exchange answers API_KEY_INVALID.
 */
import { readFileSync } from "node:fs"
import { Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { registerSecret } from "../log/Redaction.js"
import { keyIdProblem, secretProblem, signRequest, type Body } from "../svc/Signer.js"
import { usageError } from "./errors.js"
import { described } from "./Help.js"

const readFile = (path: string, what: string) =>
  Effect.try({
    try: () => readFileSync(path),
    catch: (cause) => usageError(`cannot read ${what} ${path}: ${(cause as NodeJS.ErrnoException).code ?? String(cause)}`)
  })

const integerText = (value: string, flag: string) =>
  /^\d+$/.test(value) ? Effect.succeed(value) : Effect.fail(usageError(`${flag} must be a whole number of milliseconds, got "${value}"`))

/** The canonical string with each line feed made visible, one field per line. */
export const showLineFeeds = (canonical: string): string => canonical.split("\n").join("\\n\n")

const options = {
  method: Options.text("method").pipe(Options.withPseudoName("METHOD"), Options.withDescription("HTTP method, e.g. GET or POST")),
  target: Options.text("target").pipe(Options.withPseudoName("TARGET"), Options.withDescription("path and raw query exactly as sent, e.g. '/api/spot/fills?limit=50'")),
  body: Options.text("body").pipe(Options.withPseudoName("TEXT"), Options.optional, Options.withDescription("request body as a string (UTF-8) (default: no body)")),
  bodyFile: Options.file("body-file").pipe(Options.optional, Options.withDescription("file holding the exact body bytes, instead of --body")),
  timestamp: Options.text("timestamp").pipe(Options.withPseudoName("MS"), Options.withDescription("X-SVC-TIMESTAMP, milliseconds since the epoch")),
  recvWindow: Options.text("recv-window").pipe(Options.withPseudoName("MS"), Options.withDefault("5000"), Options.withDescription("X-SVC-RECV-WINDOW, in milliseconds")),
  secretFile: Options.file("secret-file").pipe(Options.optional, Options.withDescription("file holding the secret (default: $SVC_API_SECRET)")),
  json: Options.boolean("json").pipe(Options.withDescription("print one JSON object"))
}

export const signCommand = Command.make("sign", options, (args) =>
  Effect.gen(function* () {
    if (Option.isSome(args.body) && Option.isSome(args.bodyFile)) {
      return yield* Effect.fail(usageError("give either --body or --body-file, not both"))
    }
    const secret = Option.isSome(args.secretFile)
      ? (yield* readFile(args.secretFile.value, "the secret file")).toString("utf8").replace(/\r?\n$/, "")
      : process.env.SVC_API_SECRET
    if (secret === undefined || secret === "") {
      return yield* Effect.fail(usageError("no secret: set SVC_API_SECRET or pass --secret-file FILE"))
    }
    registerSecret(secret)
    const secretIssue = secretProblem(secret)
    if (secretIssue !== undefined) return yield* Effect.fail(usageError(`the secret is malformed: ${secretIssue}`))
    const apiKey = process.env.SVC_API_KEY ?? ""
    const keyIssue = apiKey === "" ? undefined : keyIdProblem(apiKey)
    if (keyIssue !== undefined) return yield* Effect.fail(usageError(`SVC_API_KEY is malformed: ${keyIssue}`))
    const body: Body = Option.isSome(args.bodyFile)
      ? new Uint8Array(yield* readFile(args.bodyFile.value, "the body file"))
      : Option.getOrUndefined(args.body)
    const signed = signRequest(apiKey === "" ? "<SVC_API_KEY not set>" : apiKey, secret, {
      method: args.method,
      target: args.target,
      timestamp: yield* integerText(args.timestamp, "--timestamp"),
      recvWindow: yield* integerText(args.recvWindow, "--recv-window"),
      body
    })
    if (args.json) {
      yield* Console.log(JSON.stringify({ canonical: signed.canonical, signature: signed.signature, headers: signed.headers }))
      return
    }
    yield* Console.log(
      [
        "canonical string (line feeds shown as \\n):",
        showLineFeeds(signed.canonical),
        "",
        `signature: ${signed.signature}`,
        "",
        "headers:",
        ...Object.entries(signed.headers).map(([name, value]) => `  ${name}: ${value}`)
      ].join("\n")
    )
  })
).pipe(
  Command.withDescription(
    described("Print the SVC1 canonical string, signature and headers of a request", {
      details: ["The first tool to reach for when the exchange answers API_KEY_INVALID: compare its canonical string with the one your client signed."],
      examples: [
        "svcbot sign --method GET --target /api/wallets/spot --timestamp 1764000000000",
        "svcbot sign --method POST --target /api/spot/order --body '{\"symbol\":\"BTCUSDT\"}' --timestamp 1764000000000 --json",
        "svcbot sign --method GET --target '/api/spot/fills?limit=50' --timestamp 1764000000000 --secret-file secret.txt"
      ]
    })
  )
)
