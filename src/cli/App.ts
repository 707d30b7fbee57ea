/**
 * How svcbot runs a command line: `--help` and `--version` answered from the command tree
 * (src/cli/Help.ts), the arguments parsed by @effect/cli, a usage error said in one line with
 * the way to the right `--help`, then the command's handler, whose failure becomes its message
 * (one line per problem) and its exit code. @effect/cli's own runner prints its help document for every usage error and
 * offers built-in options (--wizard, --completions, --log-level) that svcbot does not document;
 * this one parses with the same descriptors and refuses those options as unknown.
 */
import { CliConfig, type Command, CommandDescriptor, type CommandDirective, HelpDoc } from "@effect/cli"
import type { FileSystem, Path, Terminal } from "@effect/platform"
import { Console, Effect, Either } from "effect"
import { type CommandNode, commandTree, type Flag, renderHelp, styleFor } from "./Help.js"
import { CliError } from "./errors.js"

/** The exit code of a usage error: the command line itself is wrong. */
const USAGE_EXIT_CODE = 2

export interface AppInfo {
  readonly name: string
  readonly version: string
}

/** What a command line asks for, before anything runs. */
export type Request<A> =
  | { readonly _tag: "Help"; readonly command: CommandNode }
  | { readonly _tag: "Version" }
  | { readonly _tag: "Run"; readonly value: A }
  | { readonly _tag: "Usage"; readonly command: CommandNode; readonly problem: string }

type ParseEnv = FileSystem.FileSystem | Path.Path | Terminal.Terminal

const HELP_FLAGS = new Set(["--help", "-h"])

/** The command a command line names (the deepest one its words reach), or the word that names none. */
const locate = (root: CommandNode, args: ReadonlyArray<string>): { readonly command: CommandNode; readonly unknown?: string } => {
  let command = root
  for (let i = 0; i < args.length; i++) {
    const word = args[i]!
    if (command.children.length === 0) return { command }
    if (word.startsWith("-")) continue
    const child = command.children.find((c) => c.name === word)
    if (child === undefined) return { command, unknown: word }
    command = child
  }
  return { command }
}

const plainText = (doc: HelpDoc.HelpDoc): string => HelpDoc.toAnsiText(doc).replace(/\x1b\[[0-9;]*m/g, "").replace(/\s+/g, " ").trim()

const flagNamed = (command: CommandNode, name: string): Flag | undefined => command.flags.find((flag) => flag.names.includes(name))

/** The flag whose value on this command line is `value`, as `--flag value` or `--flag=value`. */
const flagWithValue = (command: CommandNode, args: ReadonlyArray<string>, value: string): string | undefined => {
  for (let i = 0; i < args.length; i++) {
    const [name, inline] = args[i]!.split(/=(.*)/s, 2)
    if (inline === value && flagNamed(command, name!) !== undefined) return name
    if (args[i + 1] === value && flagNamed(command, args[i]!) !== undefined) return args[i]
  }
  return undefined
}

/** Levenshtein distance, for "did you mean". */
const distance = (a: string, b: string): number => {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1))
    previous = current
  }
  return previous[b.length]!
}

const closest = (word: string, candidates: ReadonlyArray<string>): string | undefined => {
  const ranked = candidates.map((candidate) => ({ candidate, d: distance(word, candidate) })).sort((x, y) => x.d - y.d)
  const best = ranked[0]
  return best !== undefined && best.d <= Math.max(2, Math.floor(word.length / 4)) ? best.candidate : undefined
}

const unknownOption = (command: CommandNode, word: string): string => {
  const name = word.split("=")[0]!
  const flag = flagNamed(command, name)
  if (flag !== undefined && flag.value !== undefined) return `${name} needs a value: ${name} ${flag.value}`
  if (flag !== undefined) return `${name} takes no value (give ${name} alone)`
  const suggestion = closest(name, command.flags.flatMap((f) => f.names))
  return `unknown option '${name}'${suggestion === undefined ? "" : `; did you mean ${suggestion}?`}`
}

const unexpected = (command: CommandNode, args: ReadonlyArray<string>, word: string): string => {
  if (word.startsWith("-")) return unknownOption(command, word)
  // The parser splits `--flag=value`; for a flag without a value the value is what is left over.
  const inline = args.find((arg) => arg.startsWith("--") && arg.endsWith(`=${word}`))
  if (inline !== undefined) return unknownOption(command, inline)
  return `unexpected argument '${word}'${command.args.length === 0 ? ` (${command.path.join(" ")} takes no arguments)` : ""}`
}

const KINDS: Readonly<Record<string, string>> = { integer: "a whole number", float: "a number", date: "a date", boolean: "true or false" }

/** A parser's complaint, said in svcbot's words with the flag it is about. */
const describeParseError = (command: CommandNode, args: ReadonlyArray<string>, message: string): string => {
  let match: RegExpExecArray | null
  if ((match = /^Received unknown argument: '(.*)'$/s.exec(message)) !== null) return unexpected(command, args, match[1]!)
  if ((match = /^Expected a value following option: '(.*)'$/.exec(message)) !== null) return unknownOption(command, match[1]!)
  if ((match = /^The flag '(.*)' is not recognized\. Did you mean '(.*)'\?$/.exec(message)) !== null) return `unknown option '${match[1]}'; did you mean ${match[2]}?`
  if ((match = /^Expected to find option: '(.*)'$/.exec(message)) !== null) {
    const flag = flagNamed(command, match[1]!)
    return `missing ${match[1]}${flag?.value === undefined ? "" : ` ${flag.value}`}${flag === undefined || flag.description === "" ? "" : `: ${flag.description}`}`
  }
  if ((match = /^Missing argument <(.*?)>/.exec(message)) !== null) {
    const arg = command.args.find((a) => a.name === match![1])
    return `missing ${match[1]}${arg === undefined || arg.description === "" ? "" : `: ${arg.description}`}`
  }
  if ((match = /^'(.*)' is not a (\w+)$/s.exec(message)) !== null) {
    const flag = flagWithValue(command, args, match[1]!)
    const kind = KINDS[match[2]!] ?? `a ${match[2]}`
    return `${flag ?? "a value"} must be ${kind}, got '${match[1]}'`
  }
  if ((match = /^Expected one of the following cases: (.*)$/.exec(message)) !== null) {
    const choices = match[1]!.split(/,\s*/)
    const flag = command.flags.find((f) => f.choices !== undefined && f.choices.join(",") === choices.join(","))
    const given = flag === undefined ? undefined : args.flatMap((arg, i) => (flag.names.includes(arg) ? [args[i + 1]] : arg.startsWith(`${flag.names[0]}=`) ? [arg.slice(flag.names[0]!.length + 1)] : []))[0]
    return `${flag?.names[0] ?? "the value"} must be one of ${choices.join(", ")}${given === undefined ? "" : `, got '${given}'`}`
  }
  // A complaint not foreseen above, in the parser's words: still one line.
  return message.charAt(0).toLowerCase() + message.slice(1)
}

const BUILT_IN_FLAGS: Readonly<Record<string, string>> = { ShowWizard: "--wizard", ShowCompletions: "--completions", SetLogLevel: "--log-level" }

/** What the command line asks for; the parser's checks (values, choices, required flags) included. */
export const request = <A>(root: CommandDescriptor.Command<A>, args: ReadonlyArray<string>, program?: string): Effect.Effect<Request<A>, never, ParseEnv> =>
  Effect.gen(function* () {
    const tree = commandTree(root, program)
    const located = locate(tree, args)
    const unknownCommand = (): Request<A> => {
      const suggestion = closest(located.unknown!, located.command.children.map((c) => c.name))
      return {
        _tag: "Usage",
        command: located.command,
        problem: `unknown command '${located.unknown}'${suggestion === undefined ? "" : `; did you mean '${suggestion}'?`}`
      }
    }
    if (args.some((arg) => HELP_FLAGS.has(arg))) return located.unknown === undefined ? { _tag: "Help", command: located.command } : unknownCommand()
    if (args.length === 1 && args[0] === "--version") return { _tag: "Version" }
    if (located.unknown !== undefined) return unknownCommand()
    // A group named without one of its commands: its help lists them.
    if (located.command.children.length > 0 && args.every((arg) => arg.startsWith("-") === false)) return { _tag: "Help", command: located.command }
    const parsed = yield* Effect.either(CommandDescriptor.parse(root, [commandTree(root).name, ...args], CliConfig.defaultConfig))
    if (Either.isLeft(parsed)) return { _tag: "Usage", command: located.command, problem: describeParseError(located.command, args, plainText(parsed.left.error)) }
    const directive: CommandDirective.CommandDirective<A> = parsed.right
    if (directive._tag === "BuiltIn") {
      const option = directive.option
      if (option._tag === "ShowHelp") return { _tag: "Help", command: located.command }
      if (option._tag === "ShowVersion") return { _tag: "Version" }
      return { _tag: "Usage", command: located.command, problem: `unknown option '${BUILT_IN_FLAGS[option._tag] ?? option._tag}'` }
    }
    if (directive.leftover.length > 0) return { _tag: "Usage", command: located.command, problem: unexpected(located.command, args, directive.leftover[0]!) }
    return { _tag: "Run", value: directive.value }
  })

/** The two lines of a usage error: what is wrong, and where the usage is. */
const usageMessage = (command: CommandNode, problem: string): string =>
  `${command.path.join(" ")}: ${problem}\nRun '${command.path.join(" ")} --help' for the usage.`

/**
 * Runs a command line: help and the version on stdout, a usage error on stderr with exit code
 * 2, else the command, whose CliError is printed as `name: message` with its exit code.
 */
export const runCli = <Name extends string, R, E, A>(root: Command.Command<Name, R, E, A>, app: AppInfo) =>
  (argv: ReadonlyArray<string>): Effect.Effect<void, never, R | ParseEnv> =>
    Effect.gen(function* () {
      const args = argv.slice(2)
      const asked = yield* request(root.descriptor, args, app.name)
      switch (asked._tag) {
        case "Help":
          return yield* Console.log(renderHelp(asked.command, app.version, styleFor(process.stdout, process.env)))
        case "Version":
          return yield* Console.log(app.version)
        case "Usage":
          yield* Console.error(usageMessage(asked.command, asked.problem))
          process.exitCode = USAGE_EXIT_CODE
          return
        case "Run":
          return yield* root.transform(root.handler(asked.value), asked.value).pipe(
            // A command's failure is its message, never a stack or a log line: a CliError with its
            // exit code, any other error of a command (the venue's start, say) with 1.
            Effect.catchAll((error: E) =>
              Console.error(messageOf(error).split("\n").map((line) => `${app.name}: ${line}`).join("\n")).pipe(
                Effect.andThen(() => { process.exitCode = error instanceof CliError ? error.exitCode : 1 })
              )
            )
          )
      }
    })

const messageOf = (error: unknown): string =>
  typeof error === "object" && error !== null && "message" in error && typeof error.message === "string" && error.message !== "" ? error.message : String(error)
