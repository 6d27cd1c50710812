import Glibc
import PlatformKit

/// One PIN operation per account at a time, across processes (docs/storage.md, "PIN lock"): `pin
/// set` from staging to commit, `pin change`, `pin remove` and an unlock with the PIN, each whole —
/// its counted attempt, the key derivation and the counter reset. Without it, a command starting
/// meanwhile undid a `pin set` still being committed (its journal looked interrupted), parallel
/// `pin set`s each reported a recovery key of which one worked, and parallel unlocks with the right
/// PIN were counted as failures before any of them was checked. Journal recovery takes it without
/// waiting and leaves a journal alone while a live process holds it (the kernel drops the lock of a
/// process that died, so `kill -9` still leaves a journal to recover).
enum PINLock {
    static func path(_ environment: AuthEnvironment, _ account: Account) -> String {
        environment.layout.locksDirectory + "/pin-operation-\(account.dataDirectory).lock"
    }

    /// Waits (up to the lock timeout) for the account's PIN lock.
    static func acquire(_ environment: AuthEnvironment, _ account: Account) throws(OStackError) -> FileLock {
        do {
            try SecureFileSystem.createDirectory(environment.layout.locksDirectory)
            return try FileLock(path: path(environment, account), timeout: environment.lockTimeout)
        } catch let error as PlatformError where error.operation == .lock && error.errno == EWOULDBLOCK {
            // Held all along by another command (a `pin set` whose recovery key is still on screen).
            throw OStackError(
                .pinBusy, context: .init(account: account.alias),
                detail: "PIN lock: \(error)")
        } catch {
            throw OStackError(
                .storageFailure, context: .init(account: account.alias), detail: "PIN lock: \(error)")
        }
    }

    /// The lock when no other process holds it; nil when one does (its operation is under way).
    static func acquireIfFree(_ environment: AuthEnvironment, _ account: Account) throws(OStackError) -> FileLock? {
        do {
            try SecureFileSystem.createDirectory(environment.layout.locksDirectory)
            return try FileLock(path: path(environment, account), timeout: 0)
        } catch let error as PlatformError where error.operation == .lock && error.errno == EWOULDBLOCK {
            return nil
        } catch {
            throw OStackError(
                .storageFailure, context: .init(account: account.alias), detail: "PIN lock: \(error)")
        }
    }
}
