import { tierConfig } from "./test/support/tiers.js"

// Whole daemons and the chaos suite: mostly waiting on candles, polls and restarts.
export default tierConfig("slow", 3)
