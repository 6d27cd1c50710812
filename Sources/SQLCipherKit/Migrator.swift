/// An append-only list of schema migrations, applied in order and recorded in
/// `schema_migrations`. Running it again applies nothing. A database whose recorded migrations are
/// not a prefix of this list (written by a newer ostack, or edited) is refused and left untouched.
public struct Migrator: Sendable {
    public struct Migration: Sendable {
        public var name: String
        public var apply: @Sendable (Database) throws -> Void

        public init(_ name: String, sql: String) {
            self.name = name
            self.apply = { database in try database.execute(sql) }
        }

        public init(_ name: String, apply: @escaping @Sendable (Database) throws -> Void) {
            self.name = name
            self.apply = apply
        }
    }

    public var migrations: [Migration]

    public init(_ migrations: [Migration]) {
        self.migrations = migrations
    }

    /// Applies pending migrations, each in its own transaction. Returns the names applied now.
    @discardableResult
    public func migrate(_ database: Database) throws -> [String] {
        try database.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (seq INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')))"
        )
        let recorded = try database.query("SELECT name FROM schema_migrations ORDER BY seq").compactMap {
            $0.text("name")
        }
        let known = migrations.map(\.name)
        guard recorded.count <= known.count, Array(known.prefix(recorded.count)) == recorded else {
            throw SQLiteError(
                kind: .unknownMigrations, code: 0, extendedCode: 0, operation: "migrate",
                message: "the database has migrations this version does not know")
        }
        var applied: [String] = []
        for (index, migration) in migrations.enumerated() where index >= recorded.count {
            try database.transaction { () throws -> Void in
                try migration.apply(database)
                try database.execute(
                    "INSERT INTO schema_migrations (seq, name) VALUES (?, ?)",
                    [.integer(Int64(index + 1)), .text(migration.name)])
            }
            applied.append(migration.name)
        }
        return applied
    }
}
