/**
 * Every command line shown to users — `svcbot …` and `svc-venue …` in docs/*.md, README.md,
 * ops/**, docker-compose.yml (its comments, and the `command:` of each service running one of
 * the two programs) and the Dockerfile's `CMD` — parses with the real CLI.
 *
 * How it parses without running anything: `@effect/cli`'s `Command.run` and src/cli/App.ts's
 * `runCli` are mocked only to capture the root command that apps/venue/main.ts and
 * apps/bot/main.ts hand to them (so the command tree is the one users get) and to give main.ts
 * an effect that does nothing. Each command line
 * then goes through `CliApp.run`, the function `Command.run` itself delegates to (built-in
 * options, subcommand choice, options, arguments, the check for leftover arguments), with a
 * handler that does nothing: no action runs, so nothing trades, writes, listens or reads a
 * config. A failure is @effect/cli's `ValidationError`, exactly what a user sees as a usage error.
 *
 * Not chosen: spawning `node bin/svcbot.js ARGS` runs the action of every command that parses
 * (`run` trades, `venue` serves until killed, `backtest` computes and records) and costs about
 * 2 s per start; and appending `--help` checks only the command names, not the flags.
 * Not covered: checks a handler makes itself (`promote` needs --config or --params, `sign` takes
 * --body or --body-file, not both), since they need the action to run.
 *
 * What counts as a command:
 * - In Markdown, the lines of fenced and indented code blocks, and code spans (which may wrap
 *   lines; `\|` in a table row is `|`). In other text files, code spans, and comment lines where
 *   the command stands two or more spaces after the comment marker, up to the next run of two
 *   spaces (where a description column starts), as in docker-compose.yml's header.
 * - `svcbot`, `svc-venue` and `npx svcbot` at the start of a shell command; `node …/bin/svcbot.js`
 *   (or svc-venue.js) anywhere, as inside `docker run` or `docker compose exec`; and
 *   `docker compose run SERVICE ARGS`, which runs the service's program (its `entrypoint`, else
 *   the image's `ENTRYPOINT`) with ARGS, as the compose `command:` arrays and `CMD` do.
 * - In a code block, a line ending in `\`, or a next line starting with `[` or `--`, continues
 *   the command; `#` starts a comment; `&&`, `;`, a redirection or a pipe ends the command.
 * Notation:
 * - An upper-case word (FILE, ID, N, …) in unquoted text is a placeholder and gets its sample
 *   value from `placeholders`; an upper-case word not listed there (POST, BTCUSDT) is taken as is.
 * - `[…]` is optional; `a | b` and `a|b` are alternatives (a spaced `|` before anything but a flag
 *   or a placeholder is a pipe). A command is checked without its optional parts, then once per
 *   alternative of each part with the others left out or at their first alternative, so every
 *   flag and value shown is parsed at least once.
 * - `…` or `...` as a word means "and so on": nothing after it is checked. A code span or a cut
 *   command made of command-name words only (`svcbot promote`, `svcbot venue …`) names a command
 *   rather than shows one: it passes when the parser's only complaint is a missing required value.
 */
import { CliApp, type CommandDescriptor, HelpDoc, type ValidationError } from "@effect/cli"
import { NodeContext } from "@effect/platform-node"
import { Effect } from "effect"
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it, vi } from "vitest"
import { parseDocument } from "yaml"

const apps = vi.hoisted(() => new Map<string, CliApp.CliApp<unknown>>())

vi.mock("@effect/cli", async (importOriginal) => {
  const cli = await importOriginal<typeof import("@effect/cli")>()
  const { Effect } = await import("effect")
  return {
    ...cli,
    Command: {
      ...cli.Command,
      run: (command: { readonly descriptor: CommandDescriptor.Command<unknown> }, config: { readonly name: string; readonly version: string }) => {
        apps.set(config.name, cli.CliApp.make({ ...config, command: command.descriptor }))
        return () => Effect.void
      }
    }
  }
})

// svcbot runs its command line through src/cli/App.ts's runCli rather than Command.run.
vi.mock("../../src/cli/App.js", async (importOriginal) => {
  const app = await importOriginal<typeof import("../../src/cli/App.js")>()
  const cli = await import("@effect/cli")
  const { Effect } = await import("effect")
  return {
    ...app,
    runCli: (command: { readonly descriptor: CommandDescriptor.Command<unknown> }, config: { readonly name: string; readonly version: string }) => {
      apps.set(config.name, cli.CliApp.make({ ...config, command: command.descriptor }))
      return () => Effect.void
    }
  }
})

// Importing the entry points builds the command trees exactly as users get them; with the mock
// above their `Command.run` only records the tree.
await import("../../apps/bot/main.js")
await import("../../apps/venue/main.js")

const programs = ["svcbot", "svc-venue"] as const
type Program = (typeof programs)[number]
const isProgram = (word: string): word is Program => (programs as ReadonlyArray<string>).includes(word)
const programOfScript = (word: string): Program | undefined => {
  const script = /(?:^|\/)bin\/(svcbot|svc-venue)\.js$/.exec(word)?.[1]
  return script !== undefined && isProgram(script) ? script : undefined
}

/** Sample values for the placeholders the docs use, valid for every flag they stand after; a whole word first. */
const placeholders: Record<string, string> = {
  "FILE.csv": "data/btcusdt-1m.csv",
  FILE: "config/default.json",
  PATH: "data/svcbot.db",
  ID: "btc-sma",
  INSTANCE: "btc-sma",
  NAME: "btc-sma",
  CLIENT_ORDER_ID: "co_0000000001",
  URL: "https://exchange.example",
  JSON: "{}",
  N: "5",
  SEED: "42",
  CANDLES: "1000",
  M: "GET",
  T: "/api/wallets/spot",
  S: "BTCUSDT",
  F: "data/file",
  MS: "1764000000000"
}

interface Word {
  readonly text: string
  /** Quoted in the source: no placeholder or notation inside. */
  readonly literal: boolean
}
type Token = { readonly kind: "word"; readonly word: Word } | { readonly kind: "open" | "close" | "bar" | "end" }

/** A command as shown: where, the text a reader sees, and its program's arguments as tokens. */
interface Shown {
  readonly file: string
  readonly line: number
  readonly text: string
  readonly program: Program
  readonly args: ReadonlyArray<Token>
  /** From a code span, where naming a command without its arguments is fine. */
  readonly inline: boolean
}

interface SourceLine {
  readonly line: number
  readonly text: string
}

/** Shell-like words of one line: quotes make literal text, `#` at a word start ends the line. */
const tokenize = (text: string): Array<Token> => {
  const tokens: Array<Token> = []
  let i = 0
  while (i < text.length) {
    const rest = text.slice(i)
    const space = /^\s+/.exec(rest)
    if (space !== null) {
      i += space[0].length
      continue
    }
    if (rest.startsWith("#")) break
    const operator = /^(&&|\|\||;|2>&1|2>|>>|>|<)/.exec(rest)
    if (operator !== null) {
      tokens.push({ kind: "end" })
      i += operator[0].length
      continue
    }
    if (rest.startsWith("|")) {
      tokens.push({ kind: "bar" })
      i += 1
      continue
    }
    if (rest.startsWith("[")) {
      tokens.push({ kind: "open" })
      i += 1
      continue
    }
    let value = ""
    let literal = false
    while (i < text.length && !/[\s;\]]/.test(text[i]!) && !text.startsWith("&&", i)) {
      const char = text[i]!
      if (char === "'" || char === '"') {
        // An unclosed quote runs to the end of the line; the parse then reports what it got.
        const close = text.indexOf(char, i + 1) < 0 ? text.length : text.indexOf(char, i + 1)
        value += text.slice(i + 1, close)
        literal = true
        i = close + 1
      } else {
        value += char
        i += 1
      }
    }
    if (value.length > 0 || literal) tokens.push({ kind: "word", word: { text: value, literal } })
    if (text[i] === "]") {
      tokens.push({ kind: "close" })
      i += 1
    }
  }
  return tokens
}

const wordAt = (tokens: ReadonlyArray<Token>, index: number): string | undefined => {
  const token = tokens[index]
  return token?.kind === "word" ? token.word.text : undefined
}

/** A spaced `|` before a flag or a placeholder separates alternatives; before anything else it is a pipe. */
const isAlternativeBar = (tokens: ReadonlyArray<Token>, index: number): boolean => {
  const next = wordAt(tokens, index + 1)
  return next !== undefined && /^(-|[A-Z])/.test(next)
}

/** Where the arguments starting at `from` end: at the end of the shell command. */
const argumentsEnd = (tokens: ReadonlyArray<Token>, from: number): number => {
  let depth = 0
  for (let i = from; i < tokens.length; i++) {
    const token = tokens[i]!
    if (token.kind === "open") depth += 1
    if (token.kind === "close") depth -= 1
    if (token.kind === "end" || (token.kind === "bar" && depth === 0 && !isAlternativeBar(tokens, i))) return i
  }
  return tokens.length
}

/** docker (compose) flags that take a value, so the word after them is not the subcommand or service. */
const dockerValueFlags = new Set(["--profile", "-f", "--file", "-p", "--project-name", "--env-file", "-e", "--env", "-v", "--volume", "-w", "--workdir", "-u", "--user", "--name", "-l", "--label"])

/** `docker compose [flags] run [flags] SERVICE`: the index of SERVICE, or -1. */
const composeRunService = (tokens: ReadonlyArray<Token>, at: number): number => {
  if (wordAt(tokens, at) !== "docker" || wordAt(tokens, at + 1) !== "compose") return -1
  let i = at + 2
  const skipFlags = () => {
    for (let flag = wordAt(tokens, i); flag?.startsWith("-") === true; flag = wordAt(tokens, i)) i += dockerValueFlags.has(flag) ? 2 : 1
  }
  skipFlags()
  if (wordAt(tokens, i) !== "run") return -1
  i += 1
  skipFlags()
  return wordAt(tokens, i) === undefined ? -1 : i
}

/** The image's ENTRYPOINT names the program of every service built from it that sets none. */
const dockerfileText = readFileSync("Dockerfile", "utf8")
const dockerfileInstruction = (name: string): SourceLine & { readonly argv: ReadonlyArray<string> } => {
  const lines = dockerfileText.split("\n")
  const index = lines.findLastIndex((line) => line.startsWith(`${name} [`))
  if (index < 0) throw new Error(`the Dockerfile has no exec-form ${name}`)
  return { line: index + 1, text: lines[index]!, argv: JSON.parse(lines[index]!.slice(name.length)) as ReadonlyArray<string> }
}
const imageEntrypoint = dockerfileInstruction("ENTRYPOINT")
const programOf = (argv: ReadonlyArray<string>): Program | undefined => argv.map(programOfScript).find((program) => program !== undefined)

interface ComposeService {
  readonly image?: string
  readonly entrypoint?: ReadonlyArray<string>
  readonly command?: ReadonlyArray<string>
}
const composeText = readFileSync("docker-compose.yml", "utf8")
const composeDocument = parseDocument(composeText, { merge: true })
const composeServices = (composeDocument.toJS() as { readonly services: Record<string, ComposeService> }).services
/** Compose substitutes `${VAR:-default}`; the default is what a reader who sets nothing runs. */
const composeInterpolate = (text: string): string => text.replace(/\$\{[A-Z_][A-Z0-9_]*:-([^}]*)\}/g, "$1")
const serviceProgram = (service: ComposeService): Program | undefined => {
  if (service.image?.startsWith("svcbot:") !== true) return undefined
  return programOf(service.entrypoint ?? imageEntrypoint.argv)
}
/** The services that run svcbot or svc-venue, and which. */
const composePrograms = new Map(Object.entries(composeServices).flatMap(([name, service]) => {
  const program = serviceProgram(service)
  return program === undefined ? [] : [[name, program] as const]
}))

/** The program a shell command invokes at `at`, and where its arguments start. */
const invocationAt = (tokens: ReadonlyArray<Token>, at: number, atStart: boolean): { readonly program: Program; readonly from: number } | undefined => {
  const word = wordAt(tokens, at)!
  const next = wordAt(tokens, at + 1) ?? ""
  const script = word === "node" ? programOfScript(next) : undefined
  if (script !== undefined) return { program: script, from: at + 2 }
  if (!atStart) return undefined
  if (isProgram(word)) return { program: word, from: at + 1 }
  if (word === "npx" && isProgram(next)) return { program: next, from: at + 2 }
  const service = composeRunService(tokens, at)
  const program = service < 0 ? undefined : composePrograms.get(wordAt(tokens, service)!)
  return program === undefined ? undefined : { program, from: service + 1 }
}

/** Every command in one shell line (or code span), with its program. */
const commandsIn = (tokens: ReadonlyArray<Token>): Array<{ readonly program: Program; readonly args: ReadonlyArray<Token> }> => {
  const found: Array<{ readonly program: Program; readonly args: ReadonlyArray<Token> }> = []
  let atStart = true
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!
    if (token.kind !== "word") {
      atStart = token.kind === "end" || token.kind === "bar"
      continue
    }
    const word = token.word.text
    const invoked = invocationAt(tokens, i, atStart)
    if (invoked === undefined) {
      // A prompt and variable assignments keep the shell command at its start.
      atStart = atStart && (word === "$" || /^[A-Za-z_][A-Za-z0-9_]*=/.test(word))
      continue
    }
    const end = argumentsEnd(tokens, invoked.from)
    found.push({ program: invoked.program, args: tokens.slice(invoked.from, end) })
    i = end - 1
    atStart = false
  }
  return found
}

const shownIn = (file: string, at: SourceLine, inline: boolean): Array<Shown> =>
  commandsIn(tokenize(at.text)).map((command) => ({ file, line: at.line, text: at.text.trim().replace(/\s+/g, " "), inline, ...command }))

/** Code lines with their continuations joined: a trailing `\`, or a next line starting with `[` or `--`. */
const codeCommands = (file: string, lines: ReadonlyArray<SourceLine>): Array<Shown> => {
  const joined: Array<SourceLine> = []
  for (const current of lines) {
    const previous = joined.at(-1)
    if (previous !== undefined && (previous.text.endsWith("\\") || /^\s*(\[|--)/.test(current.text))) {
      joined[joined.length - 1] = { line: previous.line, text: `${previous.text.replace(/\\$/, "")} ${current.text.trim()}` }
    } else {
      joined.push(current)
    }
  }
  return joined.flatMap((line) => shownIn(file, line, false))
}

/** Code spans of a run of lines (a span may wrap); in a table row `\|` is a literal `|`. */
const spanCommands = (file: string, lines: ReadonlyArray<SourceLine>): Array<Shown> => {
  const text = lines.map((line) => line.text).join("\n")
  return [...text.matchAll(/(?<!`)(`+)(?!`)([\s\S]*?[^`])\1(?!`)/g)].flatMap((match) => {
    const line = lines[text.slice(0, match.index).split("\n").length - 1]!
    const inTable = line.text.trimStart().startsWith("|")
    const span = match[2]!.replace(/\s+/g, " ").trim()
    return shownIn(file, { line: line.line, text: inTable ? span.replaceAll("\\|", "|") : span }, true)
  })
}

const markdownCommands = (file: string, text: string): Array<Shown> => {
  const found: Array<Shown> = []
  let fence: string | undefined
  let block: Array<SourceLine> = []
  const endBlock = (asCode: boolean) => {
    if (block.length === 0) return
    // A paragraph indented four spaces is an indented code block.
    const code = asCode || block.every((line) => line.text.startsWith("    "))
    found.push(...(code ? codeCommands(file, block) : spanCommands(file, block)))
    block = []
  }
  text.split("\n").forEach((text, index) => {
    const line = { line: index + 1, text }
    const marker = /^\s*(`{3,}|~{3,})/.exec(text)?.[1]
    if (fence === undefined && marker !== undefined) {
      endBlock(false)
      fence = marker
    } else if (fence !== undefined && marker !== undefined && marker.startsWith(fence) && text.trim() === marker) {
      endBlock(true)
      fence = undefined
    } else if (fence === undefined && text.trim() === "") {
      endBlock(false)
    } else {
      block.push(line)
    }
  })
  endBlock(fence !== undefined)
  return found
}

/**
 * Any other text file: code spans, and comment lines showing a command set off by at least two
 * spaces after the comment marker (as docker-compose.yml's header does), up to the next run of
 * two spaces, where the description starts.
 */
const textCommands = (file: string, text: string): Array<Shown> =>
  text.split("\n").flatMap((text, index) => {
    const line = { line: index + 1, text }
    const shownInComment = /^\s*(?:#+|\/\/+|\*|<!--) {2,}(\S.*)$/.exec(text)?.[1]?.split(/\s{2,}/)[0]
    return [...(shownInComment === undefined ? [] : shownIn(file, { line: line.line, text: shownInComment }, false)), ...spanCommands(file, [line])]
  })

/** Arguments a program receives as an array, not through a shell: no notation inside. */
const literalArgs = (argv: ReadonlyArray<string>): Array<Token> => argv.map((text) => ({ kind: "word", word: { text, literal: true } }))

const composeCommands = (): Array<Shown> =>
  Object.entries(composeServices).flatMap(([name, service]) => {
    const program = composePrograms.get(name)
    if (program === undefined || service.command === undefined) return []
    const node = composeDocument.getIn(["services", name, "command"], true) as { readonly range: readonly [number, number, number] }
    return [{
      file: "docker-compose.yml",
      line: composeText.slice(0, node.range[0]).split("\n").length,
      text: `services.${name}.command: ${JSON.stringify(service.command)}`,
      program,
      args: literalArgs(service.command.map(composeInterpolate)),
      inline: false
    }]
  })

const dockerfileCommand = (): Shown => {
  const cmd = dockerfileInstruction("CMD")
  const program = programOf(imageEntrypoint.argv)
  if (program === undefined) throw new Error(`the Dockerfile's ENTRYPOINT runs neither program: ${imageEntrypoint.text}`)
  return { file: "Dockerfile", line: cmd.line, text: cmd.text, program, args: literalArgs(cmd.argv), inline: false }
}

const filesUnder = (dir: string): Array<string> =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? filesUnder(path) : [path]
  })

/** Commands of a file by its kind; a file holding a NUL byte is binary and shows none. */
const fileCommands = (file: string, text: string): Array<Shown> =>
  text.includes("\0") ? []
  : file.endsWith(".md") ? markdownCommands(file, text)
  : textCommands(file, text)

const shownCommands = (): Array<Shown> => [
  ...["README.md", ...readdirSync("docs").filter((name) => name.endsWith(".md")).map((name) => `docs/${name}`), ...filesUnder("ops"), "docker-compose.yml"]
    .flatMap((file) => fileCommands(file, readFileSync(file, "utf8"))),
  ...composeCommands(),
  dockerfileCommand()
]

interface Element {
  readonly optional: boolean
  readonly alternatives: ReadonlyArray<ReadonlyArray<Word>>
}

/** `a|b` inside an unquoted word: one alternative per part, as a product over the words. */
const expandWords = (words: ReadonlyArray<Word>): Array<Array<Word>> =>
  words.reduce<Array<Array<Word>>>(
    (sequences, word) => {
      const parts = word.literal || !/.\|./.test(word.text) ? [word] : word.text.split("|").map((text) => ({ text, literal: false }))
      return sequences.flatMap((sequence) => parts.map((part) => [...sequence, part]))
    },
    [[]]
  )

const wordsOf = (tokens: ReadonlyArray<Token>, shown: Shown): Array<Word> =>
  tokens.map((token) => {
    if (token.kind !== "word") throw new Error(`${shown.file}:${shown.line}: nested [ ] or a stray | in: ${shown.text}`)
    return token.word
  })

const isEllipsis = (token: Token): boolean => token.kind === "word" && !token.word.literal && (token.word.text === "…" || token.word.text === "...")

/** The synopsis notation as elements; `cut` when `…` ended it. */
const elementsOf = (shown: Shown): { readonly elements: ReadonlyArray<Element>; readonly cut: boolean } => {
  const tokens = shown.args
  const ellipsis = tokens.findIndex(isEllipsis)
  const shownTokens = ellipsis < 0 ? tokens : tokens.slice(0, ellipsis)
  const elements: Array<Element> = []
  for (let i = 0; i < shownTokens.length; i++) {
    const token = shownTokens[i]!
    if (token.kind === "open") {
      const close = shownTokens.findIndex((other, index) => index > i && other.kind === "close")
      if (close < 0) throw new Error(`${shown.file}:${shown.line}: unclosed [ in: ${shown.text}`)
      const inner = shownTokens.slice(i + 1, close)
      const alternatives: Array<Array<Token>> = [[]]
      for (const other of inner) {
        if (other.kind === "bar") alternatives.push([])
        else alternatives.at(-1)!.push(other)
      }
      elements.push({ optional: true, alternatives: alternatives.flatMap((alternative) => expandWords(wordsOf(alternative, shown))) })
      i = close
    } else if (token.kind === "bar") {
      // `A | B` outside brackets: B is one more alternative of the word before.
      const previous = elements.pop()
      const next = shownTokens[i + 1]
      if (previous === undefined || previous.optional || next === undefined) throw new Error(`${shown.file}:${shown.line}: a | without two sides in: ${shown.text}`)
      elements.push({ optional: false, alternatives: [...previous.alternatives, ...expandWords(wordsOf([next], shown))] })
      i += 1
    } else {
      elements.push({ optional: false, alternatives: expandWords(wordsOf([token], shown)) })
    }
  }
  return { elements, cut: ellipsis >= 0 }
}

/** Without the optional parts, then each alternative of each part in turn. */
const variantsOf = (elements: ReadonlyArray<Element>): Array<ReadonlyArray<Word>> => {
  const pick = (chosen: number, alternative: ReadonlyArray<Word>): ReadonlyArray<Word> =>
    elements.flatMap((element, index) => (index === chosen ? alternative : element.optional ? [] : element.alternatives[0]!))
  const variants = [pick(-1, []), ...elements.flatMap((element, index) => (element.optional || element.alternatives.length > 1 ? element.alternatives.map((alternative) => pick(index, alternative)) : []))]
  return [...new Map(variants.map((variant) => [JSON.stringify(variant), variant])).values()]
}

const substitute = (word: Word): string =>
  word.literal ? word.text : placeholders[word.text] ?? word.text.replace(/(?<![A-Za-z0-9_])[A-Z][A-Z0-9_]*(?![A-Za-z0-9_])/g, (name) => placeholders[name] ?? name)

// The declaration of CliApp.run swaps its Effect's type parameters (@effect/cli 0.77); this is
// what it returns: a parse failure as ValidationError, needing the platform's services.
const runApp = CliApp.run as unknown as (
  app: CliApp.CliApp<unknown>,
  argv: ReadonlyArray<string>,
  execute: () => Effect.Effect<void>
) => Effect.Effect<void, ValidationError.ValidationError, CliApp.CliApp.Environment>

/** `undefined` when the arguments parse; else the parser's message and the kind of complaint. */
const parse = (program: Program, argv: ReadonlyArray<string>): Effect.Effect<{ readonly tag: ValidationError.ValidationError["_tag"]; readonly message: string } | undefined> => {
  const app = apps.get(program)
  if (app === undefined) return Effect.die(new Error(`${program}'s main.ts did not hand its command to Command.run or runCli`))
  return runApp(app, ["node", program, ...argv], () => Effect.void).pipe(
    Effect.match({
      onFailure: (error) => ({ tag: error._tag, message: HelpDoc.toAnsiText(error.error).replace(/\x1b\[[0-9;]*m/g, "").trim() }),
      onSuccess: () => undefined
    }),
    Effect.provide(NodeContext.layer)
  )
}

/** Parses every variant of each command; one line per variant that does not parse. */
const check = (commands: ReadonlyArray<Shown>): Promise<{ readonly checked: number; readonly failures: ReadonlyArray<string> }> => {
  // CliApp.run prints a usage error's help before failing; the failure lines below say it once.
  const quiet = vi.spyOn(console, "error").mockImplementation(() => undefined)
  return Effect.runPromise(
    Effect.forEach(commands, (shown) => {
      const { elements, cut } = elementsOf(shown)
      return Effect.forEach(variantsOf(elements), (variant) => {
        const argv = variant.map(substitute)
        const namesOnly = (shown.inline || cut) && variant.every((word) => !word.literal && /^[a-z][a-z0-9-]*$/.test(word.text))
        return parse(shown.program, argv).pipe(
          Effect.map((complaint) =>
            complaint === undefined || (namesOnly && complaint.tag === "MissingValue") ? [] : [`${shown.file}:${shown.line}: ${shown.text}\n    ${[shown.program, ...argv].join(" ")} -> ${complaint.message}`]
          )
        )
      })
    }).pipe(
      Effect.map((results) => ({ checked: results.reduce((sum, variants) => sum + variants.length, 0), failures: results.flat(2) })),
      Effect.ensuring(Effect.sync(() => quiet.mockRestore()))
    )
  )
}

describe("commands shown in the docs", () => {
  const commands = shownCommands()

  it("every command parses with the real CLI", async () => {
    const { checked, failures } = await check(commands)
    console.log(`${commands.length} commands shown, ${checked} command lines parsed`)
    expect(failures.join("\n"), "commands that do not parse").toBe("")
  })

  it("finds the commands of every kind of source, for both programs", () => {
    expect(commands.length).toBeGreaterThanOrEqual(60)
    const files = new Set(commands.map((shown) => shown.file))
    for (const file of ["README.md", "docs/operations.md", "docs/status.md", "docs/backtest.md", "docs/venue.md", "docker-compose.yml", "Dockerfile"]) expect(files, file).toContain(file)
    expect(new Set(commands.map((shown) => shown.program))).toEqual(new Set(programs))
    expect(commands.filter((shown) => shown.file === "docker-compose.yml").map((shown) => shown.text.split(":")[0])).toEqual(
      expect.arrayContaining(["services.venue.command", "services.bot.command", "services.bot-live.command"])
    )
  })

  it("reports a command that does not parse with its file, line and the parser's complaint", async () => {
    const sample = [
      "Check the key:",
      "",
      "```sh",
      "docker compose --profile live run --rm bot-live doctor --config config/live.json",
      "svcbot doctor --config x",
      "svcbot status --db PATH   # fine",
      "```",
      "",
      "Then `svcbot resume` (a name: fine) or `svcbot nosuch`, and `svcbot orders [--symbol]`."
    ].join("\n")
    const { checked, failures } = await check(fileCommands("sample.md", sample))
    expect(checked).toBe(7)
    expect(failures).toEqual([
      "sample.md:4: docker compose --profile live run --rm bot-live doctor --config config/live.json\n    svcbot doctor --config config/live.json -> Received unknown argument: '--config'",
      "sample.md:5: svcbot doctor --config x\n    svcbot doctor --config x -> Received unknown argument: '--config'",
      expect.stringMatching(/^sample\.md:9: svcbot nosuch\n    svcbot nosuch -> Invalid subcommand for svcbot/),
      "sample.md:9: svcbot orders [--symbol]\n    svcbot orders --symbol -> Received unknown argument: '--symbol'"
    ])
  })

  it("reads commands from comments of other files, and prose there is not a command", async () => {
    const sample = ["# svcbot in containers: prose, not a command", "#   svcbot doctor --config x      checks the key", "// see `svc-venue --bogus`"].join("\n")
    const { checked, failures } = await check(fileCommands("ops/sample.yml", sample))
    expect(checked).toBe(2)
    expect(failures).toEqual([
      "ops/sample.yml:2: svcbot doctor --config x\n    svcbot doctor --config x -> Received unknown argument: '--config'",
      "ops/sample.yml:3: svc-venue --bogus\n    svc-venue --bogus -> Received unknown argument: '--bogus'"
    ])
  })
})
