/** svc-venue: the exchange on its own, with svcbot's help and usage errors. */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Effect } from "effect"
import { runCli } from "../../src/cli/App.js"
import { venueCommand } from "../../src/venue/cli.js"
import { VENUE_VERSION } from "../../src/svc/VenueIdentity.js"

// Logging is pino's (JSON lines); the runtime's pretty logger would print every event twice.
runCli(venueCommand, { name: "svc-venue", version: VENUE_VERSION })(process.argv).pipe(
  Effect.provide(NodeContext.layer),
  (program) => NodeRuntime.runMain(program, { disablePrettyLogger: true })
)
