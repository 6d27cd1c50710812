import SodiumKit
import Synchronization

/// A `KeyringStore` in process memory for unit tests, with injectable failures.
public final class InMemoryKeyring: KeyringStore, @unchecked Sendable {
    // @unchecked Sendable: all state is behind mutexes.
    private let items = Mutex<[KeyringAddress: [UInt8]]>([:])
    private let labels = Mutex<[KeyringAddress: String]>([:])
    private let failure = Mutex<KeyringError?>(nil)
    private let ignoringDeletes = Mutex(false)

    public init() {}

    /// How many items are stored.
    public var count: Int { items.withLock { $0.count } }

    /// Every following call fails with `error` (nil: calls succeed again).
    public func fail(with error: KeyringError?) { failure.withLock { $0 = error } }

    /// While true, deletes report success and delete nothing (a provider that drops deletes silently).
    public func ignoreDeletes(_ ignore: Bool) { ignoringDeletes.withLock { $0 = ignore } }

    /// The label the item was last written with.
    public func label(of address: KeyringAddress) -> String? { labels.withLock { $0[address] } }

    private func check() throws(KeyringError) {
        if let error = failure.withLock({ $0 }) { throw error }
    }

    public func read(_ address: KeyringAddress) throws(KeyringError) -> SecretBytes? {
        try check()
        return items.withLock { $0[address] }.map { SecretBytes(copying: $0) }
    }

    public func write(_ secret: SecretBytes, for address: KeyringAddress) throws(KeyringError) {
        try write(secret, for: address, label: "ostack credential")
    }

    public func write(_ secret: SecretBytes, for address: KeyringAddress, label: String) throws(KeyringError) {
        try check()
        let bytes = secret.withUnsafeBytes { Array($0) }
        items.withLock { $0[address] = bytes }
        labels.withLock { $0[address] = label }
    }

    public func delete(_ address: KeyringAddress) throws(KeyringError) {
        try check()
        if ignoringDeletes.withLock({ $0 }) { return }
        _ = items.withLock { $0.removeValue(forKey: address) }
    }

    public func list(namespace: String) throws(KeyringError) -> [KeyringAddress] {
        try check()
        return items.withLock { $0.keys.filter { $0.namespace == namespace } }
    }

    public func checkAvailable() throws(KeyringError) { try check() }
}
