import Synchronization
import SodiumKit

/// An in-process `SecretStore` for unit tests of the core, with injectable failures.
public final class MemorySecretStore: SecretStore, @unchecked Sendable {
    // @unchecked Sendable: all state is behind `state`'s mutex.
    private let state = Mutex<[SecretKey: [UInt8]]>([:])
    private let failure = Mutex<OStackError.Code?>(nil)

    public init() {}

    /// Makes every following call fail with `code` (e.g. `.keyringLocked`), or succeed again with nil.
    public func failAll(with code: OStackError.Code?) { failure.withLock { $0 = code } }

    public var count: Int { state.withLock { $0.count } }

    private func check() throws(OStackError) {
        if let code = failure.withLock({ $0 }) { throw OStackError(code, detail: "injected keyring failure") }
    }

    public func read(_ key: SecretKey) throws(OStackError) -> SecretBytes? {
        try check()
        return state.withLock { $0[key] }.map { SecretBytes(copying: $0) }
    }

    public func write(_ secret: SecretBytes, for key: SecretKey) throws(OStackError) {
        try check()
        let bytes = secret.withUnsafeBytes { Array($0) }
        state.withLock { $0[key] = bytes }
    }

    public func delete(_ key: SecretKey) throws(OStackError) {
        try check()
        _ = state.withLock { $0.removeValue(forKey: key) }
    }

    public func list(namespace: String) throws(OStackError) -> [SecretKey] {
        try check()
        return state.withLock { $0.keys.filter { $0.namespace == namespace } }
    }
}
