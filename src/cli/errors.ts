/** How a CLI command fails: a message for the user and the process exit code. */
import { Data } from "effect"

export class CliError extends Data.TaggedError("CliError")<{
  readonly message: string
  /** 2: bad usage or configuration, or a file svcbot must not use as it is (nothing was written); 1: a runtime failure. */
  readonly exitCode: number
}> {}

export const usageError = (message: string): CliError => new CliError({ message, exitCode: 2 })
