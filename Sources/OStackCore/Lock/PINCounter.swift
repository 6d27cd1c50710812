import PlatformKit
import SodiumKit

/// The PIN failure counter's critical sections (docs/security.md#pin-3, #pin-4). The counter lives in
/// the `pin-ring` keyring item; every read-increment-write of it — and the reset after a correct PIN —
/// happens under an exclusive `flock` on `locks/pin-<dir>.lock`, so parallel `unlock`s are counted
/// one by one: at most `PINRing.maximumFailures` PINs ever reach Argon2id, however many run at once.
extension LockService {
    /// The account's counter lock (in the state directory's `locks/`).
    func pinCounterLockPath(_ account: Account) -> String {
        environment.layout.locksDirectory + "/pin-\(account.dataDirectory).lock"
    }

    /// Takes the counter lock (bounded wait) and runs `body` under it.
    static func withCounterLock<R>(path: String, timeout: Double, _ body: () throws(OStackError) -> R)
        throws(OStackError) -> R
    {
        let lock: FileLock
        do {
            try SecureFileSystem.createDirectory(SecureFileSystem.parentDirectory(of: path))
            lock = try FileLock(path: path, timeout: timeout)
        } catch {
            throw OStackError.storage(error, role: "the PIN counter's lock file")
        }
        return try withExtendedLifetime(lock) { () throws(OStackError) -> R in try body() }
    }

    /// Gives back the attempt `countAttempt` counted, when the derivation could not run (the OS
    /// refused its memory): under the lock, the counter as it is now, one lower.
    func refundAttempt(_ account: Account) throws(OStackError) {
        let ringKey = key(account, .pinRing)
        let secrets = self.secrets
        try Self.withCounterLock(path: pinCounterLockPath(account), timeout: environment.lockTimeout) {
            () throws(OStackError) -> Void in
            guard let item = try secrets.read(ringKey) else { return }
            var ring = try PINRing(decoding: item)
            guard ring.failures > 0 else { return }
            ring.failures -= 1
            try secrets.write(ring.encoded(), for: ringKey)
        }
    }

    /// One attempt is counted: under the lock, read `pin-ring`; at the limit erase the PIN path
    /// (`pin-locked-out`); otherwise write the counter incremented — persisted before the caller runs
    /// Argon2id — and return the ring as written.
    func countAttempt(_ account: Account) throws(OStackError) -> PINRing {
        let ringKey = key(account, .pinRing)
        let secrets = self.secrets
        let outcome = try Self.withCounterLock(path: pinCounterLockPath(account), timeout: environment.lockTimeout) {
            () throws(OStackError) -> PINRing? in
            guard let item = try secrets.read(ringKey) else {
                throw OStackError(.pinLockedOut, context: .init(account: account.alias))
            }
            var ring = try PINRing(decoding: item)
            if ring.failures >= UInt32(PINRing.maximumFailures) { return nil }
            ring.failures += 1
            // Persisted BEFORE Argon2 runs, so killing the process at any point of the derivation
            // still costs the attempt; the next process reads it after we release the lock.
            try secrets.write(ring.encoded(), for: ringKey)
            return ring
        }
        guard let ring = outcome else {
            try erasePINPath(account)
            throw OStackError(.pinLockedOut, context: .init(account: account.alias))
        }
        return ring
    }
}
