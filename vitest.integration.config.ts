import { tierConfig } from "./test/support/tiers.js"

// A venue over loopback, spawned CLIs, worker threads, Postgres: part work, part waiting on answers.
// Each file closes what it starts, so the files of a worker share its imported modules.
export default tierConfig("integration", { maxWorkers: 2, isolate: false })
