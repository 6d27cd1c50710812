import PlatformKit
import SQLCipherKit
import SodiumKit

/// Opens an account's SQLCipher database under its DEK and brings its schema up to date.
public enum AccountDatabase {
    /// The account schema, append-only: account facts, then the data tables of the sync core.
    public static let migrator = Migrator([
        .init(
            "0001-account-info",
            sql: "CREATE TABLE account_info (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL)"),
        .init("0002-data", sql: LocalStore.schema),
        .init("0003-audit", sql: AuditTrail.schema),
        .init("0004-queue-failures", sql: LocalStore.queueFailureMigration),
        .init("0005-mirror-rowid", apply: LocalStore.migrateMirror),
        .init("0006-mirror-runs", apply: LocalStore.migrateMirrorRuns),
    ])

    /// Opens (creating if needed) and migrates. Wrong key or a damaged file → `storage-unreadable`.
    public static func open(path: String, key: AccountDataKey) throws(OStackError) -> Database {
        do {
            let database = try openTryingPageSizes(path: path, key: key.databaseKey())
            try LocalStore.registerFunctions(database)  // before anything touches the records' indexes
            try migrator.migrate(database)
            return database
        } catch let error as SQLiteError {
            switch error.kind {
            case .unreadable: throw OStackError(.storageUnreadable, detail: "database: \(error.kind)")
            case .unknownMigrations: throw OStackError(.unsupportedFormat, detail: "database from a newer ostack")
            case .notSQLCipher: throw OStackError(.internal, detail: "SQLCipher is not the loaded SQLite")
            default:
                throw OStackError(
                    error.isDiskFull ? .storageFull : .storageFailure,
                    detail: "database: \(error.kind) \(error.code)/\(error.extendedCode)")
            }
        } catch {
            throw OStackError(.storageFailure, detail: "database migration failed")
        }
    }

    /// Account databases use 4 KiB pages (a quarter of the per-page decrypt/encrypt work of
    /// SQLCipher's default 1 KiB on scans and bulk pulls); files created before 0.6 have 1 KiB pages.
    /// A new file gets 4 KiB; an existing one is opened with 4 KiB, else 1 KiB (a wrong key fails both).
    static let pageSizes = [4096, 1024]

    /// How long a connection waits for another process's lock (AccountDatabaseFiles.swift: many
    /// parallel writers of one account wait their turn instead of failing).
    static let busyTimeout: Double = 30

    static func openTryingPageSizes(path: String, key: DatabaseKey) throws(SQLiteError) -> Database {
        var options = Database.Options()
        options.busyTimeout = busyTimeout
        let existing = (SecureFileSystem.size(of: path) ?? 0) > 0 || (SecureFileSystem.size(of: path + "-wal") ?? 0) > 0
        var lastError: SQLiteError?
        for size in existing ? pageSizes : [pageSizes[0]] {
            options.pageSize = size
            do {
                return try Database(path: path, key: key, options: options)
            } catch  where error.kind == .unreadable {
                lastError = error
            } catch  where error.isDiskFull && existing {
                // On a full disk the first connection cannot grow the `-shm` file: the index is kept
                // in memory instead, holding the file's lock until this command ends, so that what
                // is stored can still be read (writes fail as `storage-full`).
                options.exclusiveLocking = true
                do {
                    return try Database(path: path, key: key, options: options)
                } catch  where error.kind == .unreadable {
                    lastError = error
                }
                options.exclusiveLocking = false
            }
        }
        throw lastError
            ?? SQLiteError(kind: .unreadable, code: 26, extendedCode: 26, operation: "open", message: "unreadable")
    }

    /// The provisioning hook used at first sign-in and re-login.
    public static let provision: @Sendable (_ path: String, _ key: AccountDataKey) throws(OStackError) -> Void = {
        path, key throws(OStackError) in
        _ = try open(path: path, key: key)
    }
}
