import { tierConfig } from "./test/support/tiers.js"

// A venue over loopback, spawned CLIs, worker threads, Postgres: part work, part waiting on answers.
export default tierConfig("integration", { maxWorkers: 2, isolate: false })
