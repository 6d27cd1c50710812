internal import CSQLCipher
/// A failed SQLite/SQLCipher call. It carries the result codes, the operation and SQLite's own
/// message — never bound values (GRDB's rule) — and is only ever shown in the debug log.
public struct SQLiteError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The file is not a database under this key (wrong key, or not a database: SQLITE_NOTADB), or
        /// it is damaged (SQLITE_CORRUPT).
        case unreadable
        /// `PRAGMA cipher_version` returned nothing: plain SQLite was loaded instead of SQLCipher.
        case notSQLCipher
        /// The database is locked by another connection beyond the busy timeout.
        case busy
        /// A constraint (unique, not null, foreign key, check) failed.
        case constraint
        /// The migrations recorded in the database are not a prefix of the code's migrations.
        case unknownMigrations
        /// Anything else.
        case other
    }

    public var kind: Kind
    public var code: Int32
    public var extendedCode: Int32
    /// What we were doing: "open", "prepare", "step", "exec", "key", …
    public var operation: String
    /// SQLite's message. It may name tables or columns but never contains bound values.
    public var message: String

    public init(kind: Kind, code: Int32, extendedCode: Int32, operation: String, message: String) {
        self.kind = kind
        self.code = code
        self.extendedCode = extendedCode
        self.operation = operation
        self.message = message
    }

    /// The disk (or quota) ran out of space: SQLITE_FULL, or the shared-memory index of a WAL
    /// database could not be grown (SQLITE_IOERR_SHMSIZE, `SQLITE_IOERR | 19 << 8`: its file is extended on open, so a read
    /// on a full disk fails this way).
    public var isDiskFull: Bool { code == SQLITE_FULL || extendedCode == SQLITE_IOERR | (19 << 8) }

    public var description: String {
        "SQLiteError(\(kind), code \(code)/\(extendedCode), \(operation)): \(message)"
    }
}
