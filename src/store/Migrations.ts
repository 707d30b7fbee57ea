/**
 * The migration runner: applies `migrations/NNNN_name.sql` in number order, each
 * inside its own transaction, and records it in `schema_migrations`. A database
 * that already carries a migration this build does not ship was written by a
 * newer svcbot; it is refused rather than guessed at.
 */
import type BetterSqlite3 from "better-sqlite3"
import { Data } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { storageCauseOf } from "./StorageHealth.js"

export const DEFAULT_MIGRATIONS_DIR = fileURLToPath(new URL("../../migrations/", import.meta.url))

const MIGRATION_FILE = /^(\d{4})_([a-z0-9][a-z0-9_-]*)\.sql$/

export interface Migration {
  readonly version: number
  readonly name: string
  readonly sql: string
}

export class DatabaseFromNewerVersion extends Data.TaggedError("DatabaseFromNewerVersion")<{
  readonly path: string
  readonly databaseVersion: number
  readonly knownVersion: number
}> {
  override get message() {
    return `the database ${this.path} is at schema version ${this.databaseVersion}, newer than this svcbot knows (${this.knownVersion}); run the svcbot version that wrote it, or point the config at another database file`
  }
}

export class MigrationFailed extends Data.TaggedError("MigrationFailed")<{
  readonly file: string
  readonly problem: string
}> {
  override get message() {
    return `migration ${this.file} failed: ${this.problem}`
  }
}

/** Reads the migration files of `dir`, ordered by number; two files with one number are an error. */
export const readMigrations = (dir: string): ReadonlyArray<Migration> => {
  const migrations: Array<Migration> = []
  for (const file of readdirSync(dir).sort()) {
    const match = MIGRATION_FILE.exec(file)
    if (match === null) continue
    const version = Number(match[1])
    if (migrations.some((m) => m.version === version)) {
      throw new MigrationFailed({ file, problem: `another migration already has number ${match[1]}` })
    }
    migrations.push({ version, name: match[2] ?? file, sql: readFileSync(join(dir, file), "utf8") })
  }
  return migrations.sort((a, b) => a.version - b.version)
}

/** The versions recorded in `schema_migrations`; none when the table is missing (a new file). */
export const appliedVersionsOf = (db: BetterSqlite3.Database): ReadonlySet<number> => {
  const table = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").get()
  if (table === undefined) return new Set()
  return new Set((db.prepare("SELECT version FROM schema_migrations").all() as Array<{ version: number }>).map((row) => row.version))
}

/** A database carrying a migration that `migrations` lacks was written by a newer svcbot. */
export const fromNewerVersion = (
  path: string,
  appliedVersions: ReadonlySet<number>,
  migrations: ReadonlyArray<Migration>
): DatabaseFromNewerVersion | undefined => {
  const knownVersion = migrations.reduce((max, m) => Math.max(max, m.version), 0)
  const databaseVersion = [...appliedVersions].reduce((max, v) => Math.max(max, v), 0)
  return databaseVersion > knownVersion || [...appliedVersions].some((v) => !migrations.some((m) => m.version === v))
    ? new DatabaseFromNewerVersion({ path, databaseVersion, knownVersion })
    : undefined
}

/**
 * Brings `db` up to date with `migrations`; returns the migrations it applied.
 * Throws `DatabaseFromNewerVersion` or `MigrationFailed`.
 */
export const migrate = (db: BetterSqlite3.Database, path: string, migrations: ReadonlyArray<Migration>): ReadonlyArray<Migration> => {
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at INTEGER NOT NULL
  )`)
  const appliedVersions = appliedVersionsOf(db)
  const newer = fromNewerVersion(path, appliedVersions, migrations)
  if (newer !== undefined) throw newer
  const record = db.prepare("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)")
  const applied: Array<Migration> = []
  for (const migration of migrations) {
    if (appliedVersions.has(migration.version)) continue
    const file = `${String(migration.version).padStart(4, "0")}_${migration.name}.sql`
    try {
      db.transaction(() => {
        db.exec(migration.sql)
        record.run(migration.version, migration.name, Date.now())
      })()
    } catch (cause) {
      // A storage that refused the write (a full disk) is the volume's problem, not the migration's: the caller names it.
      if (storageCauseOf(cause) !== undefined) throw cause
      throw new MigrationFailed({ file, problem: cause instanceof Error ? cause.message : String(cause) })
    }
    applied.push(migration)
  }
  return applied
}
