import { tierConfig } from "./test/support/tiers.js"

// Whole daemons and the chaos suite: mostly waiting on candles, polls and restarts, so two files at
// a time; each spawns processes of its own, so not more on two cores.
export default tierConfig("slow", { maxWorkers: 2, isolate: true })
