import FoundationEssentials
import PlatformKit

/// The account registry: one JSON file (`accounts.json`, 0600) of non-secret account metadata.
///
/// Every change is a read-modify-write under an exclusive `flock` on `locks/registry.lock`,
/// re-reading the file inside the lock and replacing it atomically (temp + fsync + rename), so two
/// processes never lose each other's changes and a crash leaves the old or the new file, never a mix.
/// Older formats are migrated on first read (see `RegistryFormat`).
public struct AccountRegistry: Sendable {
    public let layout: FileLayout
    /// How long to wait for another process holding the registry lock.
    public var lockTimeout: Double = 10

    public init(layout: FileLayout) {
        self.layout = layout
    }

    /// All accounts, sorted by alias. A missing registry is an empty one.
    public func accounts() throws(OStackError) -> [Account] {
        guard let bytes = try read() else { return [] }
        let document = try RegistryFormat.decodeCurrent(bytes, migrateWith: self)
        return document.accounts.sorted { $0.alias < $1.alias }
    }

    /// The account with `id`, decoding only its own entry (`status --short` runs at every shell
    /// prompt, and decoding 50 accounts costs a millisecond). Nil when it is not there, or when the
    /// registry is not in the current format: callers then use `accounts()`, which also migrates.
    public func account(withID id: AccountID) throws(OStackError) -> Account? {
        guard let bytes = try read() else { return nil }
        let range: Range<Int>? = bytes.withUnsafeBytes { raw in
            let version = Array("version".utf8).withUnsafeBytes { FieldScanner.value(of: $0, in: raw) }
            guard version == .number(Double(RegistryFormat.currentVersion)),
                let found = FieldScanner.objectRanges(of: "accounts", in: raw)
            else { return nil }
            let matching = Array("id".utf8).withUnsafeBytes { key in
                found.ranges.filter {
                    FieldScanner.value(of: key, in: UnsafeRawBufferPointer(rebasing: raw[$0])) == .string(id.rawValue)
                }
            }
            // Exactly one entry (a hand-edited registry with the id twice takes the full path).
            return matching.count == 1 ? matching[0] : nil
        }
        // An entry the whole registry would refuse (RegistryFormat.Document) is not answered here
        // either: the caller's `accounts()` then says why.
        guard let range, let account = try? RegistryFormat.decoder().decode(Account.self, from: Data(bytes[range])),
            account.id == id, RegistryFormat.isDataDirectoryName(account.dataDirectory),
            RegistryFormat.isPrintable(account.alias), RegistryFormat.isPrintable(id.rawValue)
        else { return nil }
        return account
    }

    /// Runs `body` on the accounts under the registry lock and writes the result back if it changed.
    @discardableResult
    public func update<R>(_ body: (inout [Account]) throws(OStackError) -> R) throws(OStackError) -> R {
        try layout.checkHome()  // another user's home is refused by name, not as "storage failed"
        do {
            try layout.createDirectories()
        } catch {
            throw OStackError.storage(error, role: "ostack's directories")
        }
        return try withLock { () throws(OStackError) -> R in
            var accounts = try accounts()
            let before = accounts
            let result = try body(&accounts)
            if accounts != before {
                try write(RegistryFormat.Document(version: RegistryFormat.currentVersion, accounts: accounts))
            }
            return result
        }
    }

    // MARK: File access

    func read() throws(OStackError) -> [UInt8]? {
        do {
            return try SecureFileSystem.readFile(layout.registryFile)
        } catch {
            throw OStackError.storage(error, role: "the account registry (\(layout.registryFile))")
        }
    }

    func write(_ document: RegistryFormat.Document) throws(OStackError) {
        try writeRaw(RegistryFormat.encode(document), to: layout.registryFile)
    }

    func writeRaw(_ bytes: [UInt8], to path: String) throws(OStackError) {
        do {
            try SecureFileSystem.writeAtomically(bytes, to: path)
        } catch {
            throw OStackError(.storageFailure, detail: "writing the registry: \(error)")
        }
    }

    func withLock<R>(_ body: () throws(OStackError) -> R) throws(OStackError) -> R {
        let lock: FileLock
        do {
            try SecureFileSystem.createDirectory(layout.locksDirectory)
            lock = try FileLock(path: layout.locksDirectory + "/registry.lock", timeout: lockTimeout)
        } catch {
            throw OStackError(.storageFailure, detail: "locking the registry: \(error)")
        }
        return try withExtendedLifetime(lock) { () throws(OStackError) -> R in try body() }
    }
}
