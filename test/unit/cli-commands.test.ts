/**
 * The table svcbot loads its subcommands by (src/cli/Commands.ts) against the commands its modules
 * really declare: a subcommand added, renamed or moved to another module without its row would
 * be missing from a command line that names it.
 */
import { describe, expect, it } from "vitest"
import { subcommandNames, subcommandsFor, svcbotCommand } from "../../src/cli/Commands.js"
import { commandTree } from "../../src/cli/Help.js"

const namesOf = async (args: ReadonlyArray<string>) => commandTree((await svcbotCommand(args)).descriptor).children.map((child) => child.name)

describe("svcbot's subcommand table", () => {
  it("the whole tree, for a line naming no subcommand, holds exactly the table's names in its order", async () => {
    for (const args of [[], ["--help"], ["--version"], ["runn"]]) expect(await namesOf(args)).toEqual(subcommandNames)
  })

  it("a line naming a subcommand loads a tree that holds it, and only the names of its own module", async () => {
    for (const name of subcommandNames) {
      const names = await namesOf([name, "--help"])
      expect(names).toContain(name)
      expect(names.length).toBeLessThan(subcommandNames.length)
      for (const other of names) expect((await subcommandsFor([other])).length, `${other} loads the module of ${name}`).toBe(names.length)
    }
  })
})
