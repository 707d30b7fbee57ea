import { Command } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Effect } from "effect"
import { venueCommand } from "../../src/venue/cli.js"
import { VENUE_VERSION } from "../../src/svc/VenueIdentity.js"

const cli = Command.run(venueCommand, { name: "svc-venue", version: VENUE_VERSION })

// Logging is pino's (JSON lines); the runtime's pretty logger would print every event twice.
NodeRuntime.runMain(cli(process.argv).pipe(Effect.provide(NodeContext.layer)), { disablePrettyLogger: true })
