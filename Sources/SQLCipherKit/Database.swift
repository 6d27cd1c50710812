internal import CSQLCipher
import PlatformKit
import SodiumKit

/// One SQLCipher connection to one encrypted database file.
///
/// Opening (docs/security.md#sqlc-1 … #sqlc-8): the file is created 0600 before SQLite touches it; the raw key is
/// passed with `sqlite3_key` from secret memory; `PRAGMA cipher_version` must answer (or plain
/// SQLite was loaded by mistake: refuse); a read right after keying makes a wrong key fail at open
/// with `.unreadable`; then WAL, busy timeout, `secure_delete=ON` (asserted), foreign keys on,
/// temp store in memory.
///
/// Threading: a `Database` is used by one thread at a time (SQLite's multi-thread mode); hand it
/// between tasks, don't share it. Use one connection per process or task.
public final class Database: @unchecked Sendable {
    // @unchecked Sendable: callers must not use one connection from two threads at once (see
    // above); moving it between tasks is safe.
    public struct Options: Sendable {
        /// How long to wait for a lock held by another connection.
        public var busyTimeout: Double = 5
        public var walMode = true
        /// SQLCipher's page size (`cipher_page_size`); nil keeps SQLCipher's default (1024). A file
        /// must always be opened with the size it was created with.
        public var pageSize: Int?
        /// `locking_mode=EXCLUSIVE` from the first access: a WAL database's shared-memory index is
        /// then kept in this process's memory, not in the `-shm` file, which the first connection
        /// must grow (impossible on a full disk). Other connections wait until this one closes.
        public var exclusiveLocking = false

        public init() {}
    }

    let handle: OpaquePointer
    public let path: String
    private var savepointDepth = 0

    /// Opens (creating if needed) the database at `path` with `key`.
    public init(path: String, key: DatabaseKey, options: Options = Options()) throws(SQLiteError) {
        do {
            try SecureFileSystem.createFileIfMissing(path)
        } catch {
            throw SQLiteError(
                kind: .other, code: 14, extendedCode: 14, operation: "create", message: "cannot create file")
        }
        _ = Database.configured
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            if let db { sqlite3_close_v2(db) }
            throw SQLiteError(kind: .other, code: rc, extendedCode: rc, operation: "open", message: message)
        }
        handle = db
        self.path = path
        sqlite3_extended_result_codes(db, 1)
        // Before the first read: another process's connection may hold the file (its last close
        // checkpoints under an exclusive lock, a writer switches to WAL), and a read without a busy
        // handler fails at once with SQLITE_BUSY instead of waiting.
        sqlite3_busy_timeout(db, Int32(options.busyTimeout * 1000))
        do throws(SQLiteError) {
            try applyKey(key, rekey: false)
            if let pageSize = options.pageSize { try execute("PRAGMA cipher_page_size = \(pageSize)") }
            if options.exclusiveLocking { _ = try scalarText("PRAGMA locking_mode=EXCLUSIVE") }
            guard let version = try scalarText("PRAGMA cipher_version"), !version.isEmpty else {
                throw SQLiteError(
                    kind: .notSQLCipher, code: 0, extendedCode: 0, operation: "open",
                    message: "PRAGMA cipher_version returned nothing: SQLCipher is not the loaded SQLite")
            }
            _ = try scalarInteger("SELECT count(*) FROM sqlite_master")  // wrong key → NOTADB here
            if options.walMode { _ = try scalarText("PRAGMA journal_mode=WAL") }
            try execute("PRAGMA secure_delete=ON; PRAGMA foreign_keys=ON; PRAGMA temp_store=MEMORY")
            guard try scalarInteger("PRAGMA secure_delete") == 1 else {
                throw SQLiteError(
                    kind: .other, code: 0, extendedCode: 0, operation: "open", message: "secure_delete is off")
            }
        } catch {
            throw error  // `deinit` closes the handle (the object is fully initialised here)
        }
    }

    deinit {
        sqlite3_close_v2(handle)
    }

    /// Process-wide settings, applied once before the first connection: no allocation statistics
    /// (a global mutex taken on every allocation, for figures ostack never reads).
    private static let configured: Bool = csqlcipher_disable_memstatus() == SQLITE_OK

    /// The SQLCipher version (e.g. "3.4.1").
    public var cipherVersion: String { (try? scalarText("PRAGMA cipher_version")) ?? nil ?? "" }

    // MARK: Executing SQL

    /// Runs one or more statements without bindings.
    public func execute(_ sql: String) throws(SQLiteError) {
        let rc = sqlite3_exec(handle, sql, nil, nil, nil)
        try check(rc, "exec")
    }

    /// Runs one statement with bindings and returns nothing.
    public func execute(_ sql: String, _ bindings: [SQLValue]) throws(SQLiteError) {
        let statement = try prepare(sql)
        try statement.bind(bindings)
        while try statement.step() {}
    }

    /// Prepares a statement for repeated use.
    public func prepare(_ sql: String) throws(SQLiteError) -> Statement {
        try Statement(database: self, sql: sql)
    }

    /// Runs a query and returns every row.
    public func query(_ sql: String, _ bindings: [SQLValue] = []) throws(SQLiteError) -> [Row] {
        let statement = try prepare(sql)
        try statement.bind(bindings)
        var rows: [Row] = []
        while try statement.step() { rows.append(statement.row()) }
        return rows
    }

    /// The first column of the first row, as an integer.
    public func scalarInteger(_ sql: String, _ bindings: [SQLValue] = []) throws(SQLiteError) -> Int64? {
        if case .integer(let value)? = try query(sql, bindings).first?.values.first { return value }
        return nil
    }

    /// The first column of the first row, as text.
    public func scalarText(_ sql: String, _ bindings: [SQLValue] = []) throws(SQLiteError) -> String? {
        switch try query(sql, bindings).first?.values.first {
        case .text(let value)?: return value
        case .integer(let value)?: return String(value)
        default: return nil
        }
    }

    /// Rows changed by the last statement.
    public var changes: Int { Int(sqlite3_changes(handle)) }

    /// The rowid of the last insert.
    public var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    // MARK: Transactions

    /// Runs `body` in a transaction: committed when it returns, rolled back when it throws.
    /// Nested calls use savepoints. The outermost transaction is `BEGIN IMMEDIATE` (takes the write
    /// lock up front, so two writers wait instead of failing at commit).
    public func transaction<R, E: Error>(_ body: () throws(E) -> R) throws -> R {
        let depth = savepointDepth
        if depth == 0 { return try enclosed(begin: "BEGIN IMMEDIATE", body) }
        return try enclosed(
            begin: "SAVEPOINT sp\(depth)", end: "RELEASE sp\(depth)",
            undo: "ROLLBACK TO sp\(depth); RELEASE sp\(depth)", body)
    }

    /// Runs `body` on one snapshot of the database: every statement in it sees the same commit,
    /// whatever other processes commit meanwhile (a deferred read transaction; in WAL mode it takes
    /// no lock that a writer waits for). Inside a transaction already open, that one is the snapshot.
    public func snapshot<R, E: Error>(_ body: () throws(E) -> R) throws -> R {
        if savepointDepth > 0 { return try body() }
        return try enclosed(begin: "BEGIN DEFERRED", body)
    }

    /// `body` between `begin` and `end`, undone with `undo` when it throws or `end` fails.
    private func enclosed<R, E: Error>(
        begin: String, end: String = "COMMIT", undo: String = "ROLLBACK", _ body: () throws(E) -> R
    ) throws -> R {
        try execute(begin)
        savepointDepth += 1
        let result: R
        do {
            result = try body()
        } catch {
            savepointDepth -= 1
            try? execute(undo)
            throw error
        }
        savepointDepth -= 1
        do {
            try execute(end)
        } catch {
            try? execute(undo)
            throw error
        }
        return result
    }

    /// Runs `body` in the transaction already open, or in a new one (`transaction`) when none is.
    /// Unlike `transaction`, a nested call sets no savepoint, so a failure inside it is not undone on
    /// its own: it must fail the enclosing transaction (a caller that catches it and goes on would
    /// keep half of the body's changes). For the small writes made many times inside one large
    /// transaction: under a savepoint SQLite journals every page a write changes, and SQLCipher
    /// encrypts each of those copies (docs/decisions/0010-pull-write-path.md).
    public func joiningTransaction<R, E: Error>(_ body: () throws(E) -> R) throws -> R {
        if savepointDepth > 0 { return try body() }
        return try transaction(body)
    }

    // MARK: Maintenance

    /// `PRAGMA integrity_check`: nil when "ok", else the first problem reported.
    public func integrityProblem() throws(SQLiteError) -> String? {
        let result = try scalarText("PRAGMA integrity_check")
        return result == "ok" ? nil : (result ?? "no answer")
    }

    /// Writes the WAL back into the database file.
    public func checkpoint() throws(SQLiteError) {
        try execute("PRAGMA wal_checkpoint(TRUNCATE)")
    }

    // MARK: Keys

    /// Re-encrypts the database in place under `newKey` (`sqlite3_rekey`). The WAL is checkpointed
    /// and the journal switched to DELETE for the duration, then back to WAL.
    public func rekey(to newKey: DatabaseKey) throws(SQLiteError) {
        try checkpoint()
        _ = try scalarText("PRAGMA journal_mode=DELETE")
        try applyKey(newKey, rekey: true)
        _ = try scalarText("PRAGMA journal_mode=WAL")
    }

    /// Copies every table into a new database file under `newKey` (`sqlcipher_export`). The caller
    /// closes this connection and swaps the files with `Database.replace(_:with:)`.
    public func export(to newPath: String, key newKey: DatabaseKey) throws(SQLiteError) {
        // Empty the WAL first: `replace` may then delete it without losing a frame, and a stale WAL
        // can never be replayed onto the new file.
        try checkpoint()
        do {
            try SecureFileSystem.removeFile(newPath)
            try SecureFileSystem.createFileIfMissing(newPath)
        } catch {
            throw SQLiteError(
                kind: .other, code: 14, extendedCode: 14, operation: "export", message: "cannot create file")
        }
        let attach = try prepare("ATTACH DATABASE ? AS rekeyed KEY ?")
        try attach.bind(.text(newPath), at: 1)
        try attach.bindSecretText(newKey.rawKeyLiteral(), at: 2)
        try attach.step()
        defer { try? execute("DETACH DATABASE rekeyed") }
        // The export keeps this database's page size (the opener tries both sizes it knows).
        if let pageSize = try scalarText("PRAGMA cipher_page_size").flatMap({ Int($0) }) {
            try execute("PRAGMA rekeyed.cipher_page_size = \(pageSize)")
        }
        _ = try query("SELECT sqlcipher_export('rekeyed')")
    }

    /// Writes a copy of every table to a new file for backup (`sqlcipher_export`): encrypted under
    /// `passphrase` with SQLCipher's default settings (the stock `sqlcipher` shell opens it with just
    /// `PRAGMA key = '…'`), or plain SQLite when `passphrase` is nil. Indexes whose definition
    /// calls a function of this process (`functionIndexes`) are dropped from the copy, so stock tools
    /// can check and query it. The file must not exist; it is created with mode 0600.
    public func backup(
        to path: String, through partial: String, passphrase: SecretBytes?, dropping functionIndexes: [String] = []
    ) throws(SQLiteError)
    {
        guard !SecureFileSystem.exists(path) else {
            throw SQLiteError(kind: .other, code: 14, extendedCode: 14, operation: "backup", message: "file exists")
        }
        // Written to `partial` (beside the name) and linked to the name only when complete (a link
        // never replaces a file): an export that fails leaves nothing under the name that looks like
        // a copy, and removes `partial`.
        do {
            try SecureFileSystem.createFileIfMissing(partial)
        } catch {
            throw SQLiteError(kind: .other, code: 14, extendedCode: 14, operation: "backup", message: "cannot create")
        }
        defer {
            try? SecureFileSystem.removeFile(partial)
            try? SecureFileSystem.removeFile(partial + "-journal")
        }
        do {
            if let passphrase {
                let attach = try prepare("ATTACH DATABASE ? AS backup KEY ?")
                try attach.bind(.text(partial), at: 1)
                try attach.bindSecretText(passphrase, at: 2)
                try attach.step()
            } else {
                try execute("ATTACH DATABASE ? AS backup KEY ''", [.text(partial)])
            }
            defer { try? execute("DETACH DATABASE backup") }
            _ = try query("SELECT sqlcipher_export('backup')")
            for name in functionIndexes where name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) {
                try execute("DROP INDEX IF EXISTS backup.\"\(name)\"")
            }
        }
        do {
            try SecureFileSystem.publish(partial, as: path)
        } catch {
            throw SQLiteError(
                kind: .other, code: 14, extendedCode: 14, operation: "backup",
                message: error.isExisting ? "file exists" : "cannot create")
        }
    }

    /// Atomically replaces the database at `path` with the exported one at `newPath`: the old WAL
    /// and shared-memory files are removed (the export is complete on its own), then the export is
    /// fsynced and renamed over the old file. Call with no connection open on either file. A crash
    /// before the rename leaves the old database intact; after it, the new one.
    public static func replace(_ path: String, with newPath: String) throws(SQLiteError) {
        do {
            try SecureFileSystem.removeFile(path + "-wal")
            try SecureFileSystem.removeFile(path + "-shm")
            try SecureFileSystem.replace(path, with: newPath)
        } catch {
            throw SQLiteError(
                kind: .other, code: 14, extendedCode: 14, operation: "replace", message: "file swap failed")
        }
    }

    private func applyKey(_ key: DatabaseKey, rekey: Bool) throws(SQLiteError) {
        let literal = key.rawKeyLiteral()
        let rc = literal.withUnsafeBytes { bytes in
            rekey
                ? sqlite3_rekey(handle, bytes.baseAddress, Int32(bytes.count))
                : sqlite3_key(handle, bytes.baseAddress, Int32(bytes.count))
        }
        try check(rc, rekey ? "rekey" : "key")
    }

    // MARK: Errors

    func check(_ rc: Int32, _ operation: String) throws(SQLiteError) {
        guard rc != SQLITE_OK && rc != SQLITE_ROW && rc != SQLITE_DONE else { return }
        throw makeError(rc, operation)
    }

    func makeError(_ rc: Int32, _ operation: String) -> SQLiteError {
        let primary = rc & 0xFF
        let kind: SQLiteError.Kind
        switch primary {
        case SQLITE_NOTADB, SQLITE_CORRUPT: kind = .unreadable
        case SQLITE_BUSY, SQLITE_LOCKED: kind = .busy
        case SQLITE_CONSTRAINT: kind = .constraint
        default: kind = .other
        }
        return SQLiteError(
            kind: kind, code: primary, extendedCode: sqlite3_extended_errcode(handle), operation: operation,
            message: String(cString: sqlite3_errmsg(handle)))
    }
}
