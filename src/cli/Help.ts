/**
 * svcbot's help, rendered from the commands' own @effect/cli descriptors: the flags, their
 * value placeholders, choices and defaults are read from the same Options and Args the parser
 * uses, so help cannot drift from what parses. @effect/cli's own help text names the
 * framework's types ("A user-defined piece of text.") and its built-in options, and leaves out
 * defaults; this one says what svcbot's flags mean.
 *
 * The descriptor nodes below are @effect/cli 0.77's (the installed version is pinned in
 * package.json); a node of an unknown kind throws, and test/integration/cli-help.test.ts renders the
 * help of every command, so a change of shape fails a test instead of hiding a flag.
 */
import { type CommandDescriptor, HelpDoc, type Span } from "@effect/cli"
import { Option } from "effect"
import { colourOn } from "../log/Logger.js"

/**
 * A command's description: a one-line summary (shown in the list of commands), then
 * paragraphs of detail, then examples (command lines, shown with a `$ ` prompt).
 */
export const described = (summary: string, more: { readonly details?: ReadonlyArray<string>; readonly examples: ReadonlyArray<string> }): HelpDoc.HelpDoc =>
  HelpDoc.blocks([
    HelpDoc.p(summary),
    ...(more.details ?? []).map((detail) => HelpDoc.p(detail)),
    HelpDoc.h2(EXAMPLES),
    ...more.examples.map((example) => HelpDoc.p(example))
  ])

const EXAMPLES = "Examples"

export interface Flag {
  /** `--name` first, then its aliases. */
  readonly names: ReadonlyArray<string>
  /** The value's placeholder (`FILE`, `N`); none for a flag without a value. */
  readonly value: string | undefined
  readonly choices: ReadonlyArray<string> | undefined
  readonly description: string
  readonly required: boolean
  /** The value used when the flag is absent, as text; none when absence means "not given". */
  readonly defaultValue: string | undefined
  readonly repeatable: boolean
}

export interface Argument {
  readonly name: string
  readonly description: string
  readonly required: boolean
  readonly repeatable: boolean
}

export interface CommandNode {
  readonly name: string
  /** From the root: `["svcbot", "config", "schema"]`. */
  readonly path: ReadonlyArray<string>
  readonly summary: string
  readonly details: ReadonlyArray<string>
  readonly examples: ReadonlyArray<string>
  readonly flags: ReadonlyArray<Flag>
  readonly args: ReadonlyArray<Argument>
  readonly children: ReadonlyArray<CommandNode>
}

// The shapes of @effect/cli 0.77's internal instructions that svcbot's commands are built from.
interface Tagged {
  readonly _tag: string
}
interface PrimitiveNode extends Tagged {
  readonly alternatives?: ReadonlyArray<readonly [string, unknown]>
  readonly pathType?: string
}
interface SingleOption extends Tagged {
  readonly fullName: string
  readonly aliases: ReadonlyArray<string>
  readonly primitiveType: PrimitiveNode
  readonly description: HelpDoc.HelpDoc
  readonly pseudoName: Option.Option<string>
}
interface SingleArg extends Tagged {
  readonly name: string
  readonly pseudoName: Option.Option<string>
  readonly primitiveType: PrimitiveNode
  readonly description: HelpDoc.HelpDoc
}
type Node = Tagged & Record<string, unknown>

const unsupported = (what: string, tag: string): never => {
  throw new Error(`svcbot's help does not know the @effect/cli ${what} node ${tag}: teach src/cli/Help.ts`)
}

/** The text of a span, without styling. */
const spanText = (span: Span.Span): string => {
  const node = span as unknown as Node
  switch (node._tag) {
    case "Text":
    case "URI":
      return node.value as string
    case "Sequence":
      return spanText(node.left as Span.Span) + spanText(node.right as Span.Span)
    case "Highlight":
    case "Strong":
    case "Weak":
      return spanText(node.value as Span.Span)
    default:
      return unsupported("span", node._tag)
  }
}

type Block = { readonly kind: "paragraph" | "header"; readonly text: string }

const blocksOf = (doc: HelpDoc.HelpDoc): ReadonlyArray<Block> => {
  switch (doc._tag) {
    case "Empty":
      return []
    case "Paragraph":
      return [{ kind: "paragraph", text: spanText(doc.value) }]
    case "Header":
      return [{ kind: "header", text: spanText(doc.value) }]
    case "Sequence":
      return [...blocksOf(doc.left), ...blocksOf(doc.right)]
    default:
      return unsupported("help text", doc._tag)
  }
}

const textOf = (doc: HelpDoc.HelpDoc): string =>
  blocksOf(doc)
    .map((block) => block.text)
    .join(" ")

/** The placeholder of a value when the option names none: what kind of value it takes. */
const placeholderOf = (primitive: PrimitiveNode): string | undefined => {
  switch (primitive._tag) {
    case "Bool":
      return undefined
    case "Choice":
      return primitive.alternatives!.map(([name]) => name).join("|")
    case "Path":
      return primitive.pathType === "directory" ? "DIR" : "FILE"
    case "Integer":
      return "N"
    case "Float":
      return "NUMBER"
    case "DateTime":
      return "DATE"
    default:
      return "VALUE"
  }
}

const showDefault = (fallback: unknown): string | undefined => {
  if (Option.isOption(fallback)) return Option.isSome(fallback) ? String(fallback.value) : undefined
  return typeof fallback === "boolean" ? undefined : String(fallback)
}

const flagsOf = (options: Node): ReadonlyArray<Flag> => {
  switch (options._tag) {
    case "Empty":
      return []
    case "Single": {
      const single = options as unknown as SingleOption
      const primitive = single.primitiveType
      return [{
        names: [single.fullName, ...single.aliases.map((alias) => (alias.length === 1 ? `-${alias}` : `--${alias}`))],
        value: primitive._tag === "Bool" ? undefined : Option.getOrElse(single.pseudoName, () => placeholderOf(primitive)),
        choices: primitive._tag === "Choice" ? primitive.alternatives!.map(([name]) => name) : undefined,
        description: textOf(single.description),
        required: true,
        defaultValue: undefined,
        repeatable: false
      }]
    }
    case "Map":
      return flagsOf(options.options as Node)
    case "Both":
    case "OrElse":
      return [...flagsOf(options.left as Node), ...flagsOf(options.right as Node)]
    case "WithDefault":
      return flagsOf(options.options as Node).map((flag) => {
        const shown = showDefault(options.fallback)
        return { ...flag, required: false, ...(shown === undefined ? {} : { defaultValue: shown }) }
      })
    case "WithFallback":
      return flagsOf(options.options as Node).map((flag) => ({ ...flag, required: false }))
    case "Variadic":
    case "KeyValueMap":
      return flagsOf(options.argumentOption as Node).map((flag) => ({ ...flag, repeatable: true }))
    default:
      return unsupported("option", options._tag)
  }
}

const argsOf = (args: Node): ReadonlyArray<Argument> => {
  switch (args._tag) {
    case "Empty":
      return []
    case "Single": {
      const single = args as unknown as SingleArg
      return [{ name: Option.getOrElse(single.pseudoName, () => single.name), description: textOf(single.description), required: true, repeatable: false }]
    }
    case "Map":
      return argsOf(args.args as Node)
    case "Both":
      return [...argsOf(args.left as Node), ...argsOf(args.right as Node)]
    case "WithDefault":
    case "WithFallbackConfig":
      return argsOf(args.args as Node).map((arg) => ({ ...arg, required: false }))
    case "Variadic":
      return argsOf(args.args as Node).map((arg) => ({ ...arg, repeatable: true, required: Option.getOrElse(args.min as Option.Option<number>, () => 0) > 0 }))
    default:
      return unsupported("argument", args._tag)
  }
}

const nodeOf = (descriptor: Node, parent: ReadonlyArray<string>, program?: string): CommandNode => {
  switch (descriptor._tag) {
    case "Standard": {
      const name = program ?? (descriptor.name as string)
      const blocks = blocksOf(descriptor.description as HelpDoc.HelpDoc)
      const examplesAt = blocks.findIndex((block) => block.kind === "header" && block.text === EXAMPLES)
      const prose = (examplesAt < 0 ? blocks : blocks.slice(0, examplesAt)).map((block) => block.text)
      return {
        name,
        path: [...parent, name],
        summary: prose[0] ?? "",
        details: prose.slice(1),
        examples: examplesAt < 0 ? [] : blocks.slice(examplesAt + 1).map((block) => block.text),
        flags: flagsOf(descriptor.options as Node),
        args: argsOf(descriptor.args as Node),
        children: []
      }
    }
    case "Map":
      return nodeOf(descriptor.command as Node, parent, program)
    case "Subcommands": {
      const self = nodeOf(descriptor.parent as Node, parent, program)
      return { ...self, children: (descriptor.children as ReadonlyArray<Node>).map((child) => nodeOf(child, self.path)) }
    }
    default:
      return unsupported("command", descriptor._tag)
  }
}

/** The command tree of a root descriptor, as help shows it; the root named `program` when the program is not called as its command is. */
export const commandTree = (root: CommandDescriptor.Command<unknown>, program?: string): CommandNode => nodeOf(root as unknown as Node, [], program)

/** Every command below `node` (itself included), depth first. */
export const allCommands = (node: CommandNode): ReadonlyArray<CommandNode> => [node, ...node.children.flatMap(allCommands)]

/** The flags every command takes besides its own. */
const builtInFlags = (isRoot: boolean): ReadonlyArray<Flag> => [
  { names: ["--help", "-h"], value: undefined, choices: undefined, description: "print this help and exit", required: false, defaultValue: undefined, repeatable: false },
  ...(isRoot ? [{ names: ["--version"], value: undefined, choices: undefined, description: "print the version and exit", required: false, defaultValue: undefined, repeatable: false }] : [])
]

const flagUsage = (flag: Flag): string => `${flag.names[0]}${flag.value === undefined ? "" : ` ${flag.value}`}`

/** The usage line: the command, its required flags, `[options]` for the rest, and its arguments. */
export const usageLine = (node: CommandNode): string => {
  if (node.children.length > 0) return [...node.path, "COMMAND", "[options]"].join(" ")
  const required = node.flags.filter((flag) => flag.required).map(flagUsage)
  const args = node.args.map((arg) => `${arg.required ? arg.name : `[${arg.name}]`}${arg.repeatable ? "..." : ""}`)
  return [...node.path, ...args, ...required, "[options]"].join(" ")
}

export interface Style {
  /** Terminal width to wrap to. */
  readonly width: number
  readonly color: boolean
}

export const styleFor = (stream: { readonly isTTY?: boolean; readonly columns?: number }, env: Readonly<Record<string, string | undefined>>): Style => ({
  width: Math.max(60, Math.min(stream.columns ?? 100, 120)),
  color: colourOn(stream, env)
})

const wrap = (text: string, width: number, indent: number): Array<string> => {
  const lines: Array<string> = []
  let line = ""
  for (const word of text.split(/\s+/).filter((w) => w !== "")) {
    if (line !== "" && indent + line.length + 1 + word.length > width) {
      lines.push(line)
      line = word
    } else {
      line = line === "" ? word : `${line} ${word}`
    }
  }
  if (line !== "") lines.push(line)
  return lines
}

/** Two columns: a term, and its text wrapped beside it (below it when the term is wide). */
const definitionList = (rows: ReadonlyArray<readonly [string, string]>, style: Style, bold: (s: string) => string): Array<string> => {
  const column = Math.min(Math.max(...rows.map(([term]) => term.length)) + 4, 28)
  return rows.flatMap(([term, text]) => {
    const lines = wrap(text, style.width, column)
    const head = `  ${bold(term)}`
    if (term.length + 4 > column) return [head, ...lines.map((line) => " ".repeat(column) + line)]
    return [head + " ".repeat(column - term.length - 2) + (lines[0] ?? ""), ...lines.slice(1).map((line) => " ".repeat(column) + line)]
  })
}

const flagText = (flag: Flag): string => {
  const extras = [
    ...(flag.required ? ["required"] : []),
    ...(flag.choices === undefined ? [] : [`one of ${flag.choices.join(", ")}`]),
    ...(flag.defaultValue === undefined ? [] : [`default: ${flag.defaultValue}`]),
    ...(flag.repeatable ? ["may be repeated"] : [])
  ]
  return extras.length === 0 ? flag.description : `${flag.description} (${extras.join("; ")})`
}

/** The help of one command (or of the whole program, for the root) as printed by `--help`. */
export const renderHelp = (node: CommandNode, version: string, style: Style): string => {
  const bold = (text: string) => (style.color ? `\x1b[1m${text}\x1b[22m` : text)
  const heading = (text: string) => bold(`${text}:`)
  const isRoot = node.path.length === 1
  const out: Array<string> = []
  out.push(isRoot ? `${node.name} ${version}: ${node.summary}` : `${node.path.join(" ")}: ${node.summary}`, "")
  out.push(heading("Usage"), `  $ ${usageLine(node)}`, "")
  for (const detail of node.details) out.push(...wrap(detail, style.width, 0), "")
  if (node.children.length > 0) {
    const leaves = allCommands(node).filter((command) => command.children.length === 0)
    out.push(heading("Commands"), ...definitionList(leaves.map((leaf) => [leaf.path.slice(node.path.length).join(" "), leaf.summary]), style, bold), "")
  }
  if (node.args.length > 0) {
    out.push(heading("Arguments"), ...definitionList(node.args.map((arg) => [arg.name, arg.required ? arg.description : `${arg.description} (optional)`]), style, bold), "")
  }
  const flags = [...node.flags, ...builtInFlags(isRoot)]
  out.push(heading("Options"), ...definitionList(flags.map((flag) => [flag.names.join(", ") + (flag.value === undefined ? "" : ` ${flag.value}`), flagText(flag)]), style, bold), "")
  if (node.examples.length > 0) out.push(heading("Examples"), ...node.examples.map((example) => `  $ ${example}`), "")
  if (node.children.length > 0) out.push(`Run '${node.path.join(" ")} COMMAND --help' for the options and examples of a command.`, "")
  return out.join("\n").trimEnd()
}
