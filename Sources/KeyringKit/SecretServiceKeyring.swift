internal import CLibsecret
internal import CSecretShims
import SodiumKit
import Synchronization

/// The Secret Service backend (libsecret over D-Bus), e.g. gnome-keyring.
///
/// - One schema (`io.ostack.Secret`, DONT_MATCH_NAME) with attributes app, namespace, account,
///   kind, version; secrets are stored as binary values in the default collection.
/// - Every call runs with a `GCancellable` that a timer cancels at the deadline, so a hung daemon
///   costs at most `deadline` seconds (docs/security.md#kr-4) instead of D-Bus's ~25–50 s.
/// - Outcomes are told apart (docs/security.md#kr-3): a `nil` lookup is disambiguated by a search that reports
///   locked items; writes check the collection's lock state first; deletes are verified (#kr-7).
public final class SecretServiceKeyring: KeyringStore, @unchecked Sendable {
    // @unchecked Sendable: immutable configuration; libsecret's sync calls are thread-safe, and
    // calls are additionally serialised by `lock`.
    public let app: String
    public let deadline: Double
    public let label: String
    private let lock = Mutex(())
    /// Set once the default collection was seen unlocked in this process (ostack processes are
    /// short-lived; a collection locked later makes the store itself fail, which is still reported).
    private let knownUnlocked = Mutex(false)

    public init(app: String = "ostack", deadline: Double = 5, label: String = "ostack credential") {
        self.app = app
        self.deadline = deadline
        self.label = label
    }

    public func read(_ address: KeyringAddress) throws(KeyringError) -> SecretBytes? {
        try call { cancellable, error throws(KeyringError) -> SecretBytes? in
            let attributes = self.attributes(address)
            defer { g_hash_table_unref(attributes) }
            if let value = secret_password_lookupv_binary_sync(csecret_schema(), attributes, cancellable, &error) {
                defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
                var length = 0
                guard let bytes = secret_value_get(value, &length) else { return SecretBytes(zeroedCount: 0) }
                return bytes.withMemoryRebound(to: UInt8.self, capacity: length) {
                    SecretBytes(copying: UnsafeBufferPointer(start: $0, count: length))
                }
            }
            if let failure = error { throw Self.classify(failure) }
            // NULL without an error: not found — or present but locked. Ask a search (docs/security.md#kr-3).
            let found = try self.search(attributes, cancellable: cancellable, error: &error)
            if found.contains(where: { $0.locked }) { throw KeyringError.locked }
            return nil
        }
    }

    public func write(_ secret: SecretBytes, for address: KeyringAddress) throws(KeyringError) {
        try call { cancellable, error throws(KeyringError) in
            if !self.knownUnlocked.withLock({ $0 }) {
                let state = csecret_default_collection_locked(cancellable, &error)
                if state < 0 { throw error.map(Self.classify) ?? KeyringError.other("collection state") }
                if state == 1 { throw KeyringError.locked }
                self.knownUnlocked.withLock { $0 = true }
            }
            let attributes = self.attributes(address)
            defer { g_hash_table_unref(attributes) }
            let value = secret.withUnsafeBytes { bytes in
                csecret_value_new(bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), gsize(bytes.count))
            }
            defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
            let stored = secret_password_storev_binary_sync(
                csecret_schema(), attributes, nil, label, value, cancellable, &error)
            if stored == 0 { throw error.map(Self.classify) ?? KeyringError.other("store refused") }
        }
    }

    public func delete(_ address: KeyringAddress) throws(KeyringError) {
        try call { cancellable, error throws(KeyringError) in
            let attributes = self.attributes(address)
            defer { g_hash_table_unref(attributes) }
            _ = secret_password_clearv_sync(csecret_schema(), attributes, cancellable, &error)
            if let failure = error { throw Self.classify(failure) }
            // Verify (docs/security.md#kr-7): clear silently skips locked items.
            let remaining = try self.search(attributes, cancellable: cancellable, error: &error)
            if remaining.contains(where: { $0.locked }) { throw KeyringError.locked }
            if !remaining.isEmpty { throw KeyringError.other("item still present after delete") }
        }
    }

    public func list(namespace: String) throws(KeyringError) -> [KeyringAddress] {
        try call { cancellable, error throws(KeyringError) -> [KeyringAddress] in
            let attributes = csecret_attributes(app, namespace, nil, nil, nil)!
            defer { g_hash_table_unref(attributes) }
            return try self.search(attributes, cancellable: cancellable, error: &error).compactMap { $0.address }
        }
    }

    // MARK: Internals

    struct Found {
        var address: KeyringAddress?
        var locked: Bool
    }

    private func attributes(_ address: KeyringAddress) -> OpaquePointer {
        csecret_attributes(app, address.namespace, address.account, address.kind, String(address.version))!
    }

    private func search(
        _ attributes: OpaquePointer, cancellable: UnsafeMutablePointer<GCancellable>,
        error: inout UnsafeMutablePointer<GError>?
    ) throws(KeyringError) -> [Found] {
        let list = secret_password_searchv_sync(
            csecret_schema(), attributes, SECRET_SEARCH_ALL, cancellable, &error)
        if let failure = error { throw Self.classify(failure) }
        defer { g_list_free_full(list, g_object_unref) }
        var found: [Found] = []
        var node = list
        while let current = node {
            let item = current.pointee.data
            func attribute(_ name: String) -> String? {
                guard let raw = csecret_item_attribute(item, name) else { return nil }
                defer { g_free(raw) }
                return String(cString: raw)
            }
            var address: KeyringAddress?
            if let namespace = attribute("namespace"), let account = attribute("account"),
                let kind = attribute("kind"), let version = attribute("version").flatMap({ Int($0) })
            {
                address = KeyringAddress(namespace: namespace, account: account, kind: kind, version: version)
            }
            found.append(Found(address: address, locked: csecret_item_is_locked(item) != 0))
            node = current.pointee.next
        }
        return found
    }

    /// Runs `body` with a cancellable that fires at the deadline, and maps a cancellation to
    /// `.timeout`.
    private func call<R>(
        _ body: (UnsafeMutablePointer<GCancellable>, inout UnsafeMutablePointer<GError>?) throws(KeyringError) -> R
    ) throws(KeyringError) -> R {
        try lock.withLock { _ throws(KeyringError) -> R in
            let cancellable = g_cancellable_new()!
            defer { g_object_unref(cancellable) }
            let timer = csecret_deadline_start(cancellable, UInt32(max(1, deadline * 1000)))
            defer { csecret_deadline_stop(timer) }
            var error: UnsafeMutablePointer<GError>?
            defer { if let error { g_error_free(error) } }
            do throws(KeyringError) {
                return try body(cancellable, &error)
            } catch {
                if g_cancellable_is_cancelled(cancellable) != 0 { throw KeyringError.timeout }
                throw error
            }
        }
    }

    static func classify(_ error: UnsafeMutablePointer<GError>) -> KeyringError {
        switch Int32(csecret_classify(error)) {
        case Int32(CSECRET_ERROR_LOCKED): return .locked
        case Int32(CSECRET_ERROR_NO_SERVICE): return .noService
        case Int32(CSECRET_ERROR_TIMEOUT): return .timeout
        case Int32(CSECRET_ERROR_DENIED): return .denied
        default:
            let domain = String(cString: g_quark_to_string(error.pointee.domain))
            return .other("\(domain):\(error.pointee.code)")
        }
    }
}
