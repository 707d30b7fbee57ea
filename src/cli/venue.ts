/** `svcbot venue`: svc-venue's own command (src/venue/cli.ts), described for svcbot's help. */
import { Command } from "@effect/cli"
import { venueCommand as serveVenue } from "../venue/cli.js"
import { described } from "./Help.js"

export const venueCommand = serveVenue.pipe(
  Command.withDescription(
    described("Run svc-venue, the exchange for paper trading and tests", {
      details: ["The same program as svc-venue: the SVC API over HTTP, with the admin routes under /_venue (docs/venue.md)."],
      examples: ["svcbot venue --port 8080", "svcbot venue --port 8080 --tape synthetic:7 --tick-ms 250", "svcbot venue --accounts config/venue-accounts.json --tape data/btcusdt-1m.csv"]
    })
  )
)
