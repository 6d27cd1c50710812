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
    ])

    /// Opens (creating if needed) and migrates. Wrong key or a damaged file → `storage-unreadable`.
    public static func open(path: String, key: SecretBytes) throws(OStackError) -> Database {
        do {
            let database = try Database(path: path, key: DatabaseKey(key))
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
                    .storageFailure, detail: "database: \(error.kind) \(error.code)/\(error.extendedCode)")
            }
        } catch {
            throw OStackError(.storageFailure, detail: "database migration failed")
        }
    }

    /// The provisioning hook used at first sign-in and re-login.
    public static let provision: @Sendable (_ path: String, _ key: SecretBytes) throws(OStackError) -> Void = {
        path, key throws(OStackError) in
        _ = try open(path: path, key: key)
    }
}
