import Glibc
import PlatformKit
import SQLCipherKit
import SodiumKit

extension AccountDatabase {
    /// Opens the database of a registered account for a command (docs/storage.md#the-account-database).
    /// Unlike `open` (login's provisioning, the only place a database is created), it never creates
    /// one: a missing or empty `data.db` is `storage-missing` — silently starting an empty database
    /// would lose every queued change. The account directory and its files must not be symbolic
    /// links (docs/security.md#fs-2). A database another process holds (a busy open) is retried.
    public static func openExisting(layout: FileLayout, account: Account, key: AccountDataKey) throws(OStackError)
        -> Database
    {
        try layout.checkAccountFiles(
            account.dataDirectory, files: ["data.db", "data.db-wal", "data.db-shm", "audit-pending.jsonl"])
        let path = layout.accountDirectory(account.dataDirectory) + "/data.db"
        guard let size = SecureFileSystem.size(of: path),
            size > 0 || (SecureFileSystem.size(of: path + "-wal") ?? 0) > 0
        else {
            throw OStackError(
                .storageMissing, context: .init(account: account.alias),
                detail: SecureFileSystem.exists(path) ? "data.db is empty" : "data.db is missing")
        }
        return try openRetryingWhileBusy(path: path, key: key)
    }

    /// `open`, retried for up to `busyTimeout` more seconds while another process holds the file
    /// (SQLite gives up on some lock states without calling its busy handler).
    static func openRetryingWhileBusy(path: String, key: AccountDataKey) throws(OStackError) -> Database {
        var waited = 0.0
        var pause = 0.005
        while true {
            do {
                return try open(path: path, key: key)
            } catch  where error.code == .storageFailure && error.detail.contains("busy") && waited < busyTimeout {
                usleep(UInt32(pause * 1_000_000) + UInt32.random(in: 0...5_000))
                waited += pause
                pause = min(pause * 2, 0.2)
            }
        }
    }
}
