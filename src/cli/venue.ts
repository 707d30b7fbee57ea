/** `svcbot venue`: svc-venue's own command (src/venue/cli.ts), described for svcbot's help. */
import { Command } from "@effect/cli"
import { venueCommand as serveVenue } from "../venue/cli.js"
import { described } from "./Help.js"

export const venueCommand = serveVenue.pipe(
  Command.withDescription(
    described("Run svc-venue, the exchange svcbot trades against in paper mode and in tests (the same program as svc-venue)", {
      examples: ["svcbot venue --port 8080", "svcbot venue --port 8080 --tape synthetic:7 --tick-ms 250", "svcbot venue --accounts config/venue-accounts.json --tape data/btcusdt-1m.csv"]
    })
  )
)
