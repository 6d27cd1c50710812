internal import CLibsecret
internal import CSecretShims
import SodiumKit
import Glibc
import Synchronization

/// The Secret Service backend (libsecret over D-Bus): gnome-keyring, KWallet (kwalletd5), KeePassXC.
///
/// - One schema (`io.ostack.Secret`, DONT_MATCH_NAME) with attributes app, namespace, account,
///   kind, version; secrets are stored as binary values in the default collection, under a label
///   for people (docs/keyring.md, "Labels").
/// - Every call runs with a `GCancellable` that a timer cancels at the deadline, so a hung daemon
///   costs at most `deadline` seconds (docs/security.md#kr-4) instead of D-Bus's ~25–50 s. After one
///   timeout the store answers every later call of the process with the same error at once, so a
///   command against a hung keyring costs one deadline, not one per call.
/// - Outcomes are told apart (docs/security.md#kr-3): "not found" is returned only when it is certain —
///   the default collection exists and is unlocked. A provider without a default collection (the
///   login keyring not loaded, a KeePassXC database closed) is `.noCollection`, never "not found";
///   deletes check the collection first and are verified afterwards (#kr-7).
public final class SecretServiceKeyring: KeyringStore, @unchecked Sendable {
    // @unchecked Sendable: immutable configuration; libsecret's sync calls are thread-safe, and
    // calls are additionally serialised by `lock`, one for the whole process: a process may build
    // several stores (one per account environment) and call them from two threads (the audit
    // anchor's queue), and a call that resets libsecret's cached service must never run beside
    // another.
    public let app: String
    public let deadline: Double
    /// The label of items written without one.
    public let label: String
    private static let lock = Mutex(())
    /// Set once the default collection was seen unlocked in this process (ostack processes are
    /// short-lived; a collection locked later makes the store itself fail, which is still reported).
    private let knownUnlocked = Mutex(false)
    /// Set after a call timed out: the provider is hung (or waiting for the user).
    private let unresponsive = Mutex<KeyringError?>(nil)
    /// The provider, asked of the bus once per process (it decides whether writes are read back).
    private let knownProvider = Mutex<Provider?>(nil)

    func provider() -> Provider {
        if let known = knownProvider.withLock({ $0 }) { return known }
        let detected = Self.detectProvider()
        knownProvider.withLock { $0 = detected }
        return detected
    }

    public init(app: String = "ostack", deadline: Double = 5, label: String = "ostack credential") {
        self.app = app
        self.deadline = deadline
        self.label = label
    }

    /// Which program serves org.freedesktop.secrets on this session bus (asked of the bus daemon).
    public enum Provider: Sendable, Equatable {
        case gnomeKeyring, kwallet, keepassxc
        case other(String)
        /// Nobody owns the name.
        case none

        /// Whether the provider keeps deleted items and replaced values (recycle bin, entry history).
        public var keepsDeletedItems: Bool { self == .keepassxc }
        /// Whether the provider may ask the user to approve access in a dialog.
        public var mayPrompt: Bool { self == .keepassxc }

        public var name: String {
            switch self {
            case .gnomeKeyring: "gnome-keyring"
            case .kwallet: "KWallet"
            case .keepassxc: "KeePassXC"
            case .other(let process): process
            case .none: "none"
            }
        }

        init(process: String?) {
            guard let process else {
                self = .none
                return
            }
            let lower = process.lowercased()
            if lower.hasPrefix("gnome-keyring") {
                self = .gnomeKeyring
            } else if lower.hasPrefix("kwalletd") || lower.hasPrefix("ksecretd") {
                self = .kwallet
            } else if lower.hasPrefix("keepassxc") {
                self = .keepassxc
            } else {
                self = .other(String(process.filter { $0.isASCII && !$0.isWhitespace }.prefix(32)))
            }
        }
    }

    /// The provider, from the process name of the owner of `org.freedesktop.secrets` (1 s at most).
    public static func detectProvider() -> Provider {
        var buffer = [CChar](repeating: 0, count: 64)
        let found = buffer.withUnsafeMutableBufferPointer { csecret_provider_process($0.baseAddress, gsize($0.count)) }
        guard found == 0 else { return .none }
        return Provider(
            process: String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    public func read(_ address: KeyringAddress) throws(KeyringError) -> SecretBytes? {
        try call { cancellable, error throws(KeyringError) -> SecretBytes? in
            let attributes = self.attributes(address)
            defer { g_hash_table_unref(attributes) }
            if let value = secret_password_lookupv_binary_sync(csecret_schema(), attributes, cancellable, &error) {
                defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
                var length = 0
                guard let bytes = secret_value_get(value, &length) else { return SecretBytes(zeroedCount: 0) }
                // A session with the wrong key (KWallet, about one in 170) usually leaves libsecret
                // nothing it can decrypt (below), but now and then garbage whose padding happens to
                // be valid: a value, and a wrong one. Outside gnome-keyring (libsecret's own DH code)
                // a value is read again over a new session and must be the same; a mismatch is
                // retried with new sessions (`call`), never returned.
                if self.provider() != .gnomeKeyring {
                    csecret_reset_service()
                    guard
                        let again = secret_password_lookupv_binary_sync(
                            csecret_schema(), attributes, cancellable, &error)
                    else { throw error.map(Self.classify) ?? KeyringError.other(Self.staleSession) }
                    defer { secret_value_unref(UnsafeMutableRawPointer(again)) }
                    var againLength = 0
                    let againBytes = secret_value_get(again, &againLength)
                    let same =
                        againLength == length && againBytes != nil
                        && UnsafeRawBufferPointer(start: againBytes, count: againLength).elementsEqual(
                            UnsafeRawBufferPointer(start: bytes, count: length))
                    if !same { throw KeyringError.other(Self.staleSession) }
                }
                return bytes.withMemoryRebound(to: UInt8.self, capacity: length) {
                    SecretBytes(copying: UnsafeBufferPointer(start: $0, count: length))
                }
            }
            if let failure = error { throw Self.classify(failure) }
            // NULL without an error: not found — or present but locked, or in a collection that is
            // not loaded, or present but its value did not survive the transfer. Ask a search, then
            // the collection (docs/security.md#kr-3).
            let found = try self.search(attributes, cancellable: cancellable, error: &error)
            if found.contains(where: { $0.locked }) { throw KeyringError.locked }
            // Present and unlocked, yet no value: libsecret could not decrypt what the provider sent.
            // KWallet derives a different session key for about one session in 170 (docs/keyring.md,
            // "KWallet's transfer sessions"); a new session fixes it. Never "not found".
            if !found.isEmpty { throw KeyringError.other(Self.staleSession) }
            try self.requireUsableCollection(cancellable, &error)
            return nil
        }
    }

    public func write(_ secret: SecretBytes, for address: KeyringAddress) throws(KeyringError) {
        try write(secret, for: address, label: label)
    }

    public func write(_ secret: SecretBytes, for address: KeyringAddress, label: String) throws(KeyringError) {
        try call { cancellable, error throws(KeyringError) in
            try self.requireUsableCollection(cancellable, &error)
            let attributes = self.attributes(address)
            defer { g_hash_table_unref(attributes) }
            let value = secret.withUnsafeBytes { bytes in
                csecret_value_new(bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), gsize(bytes.count))
            }
            defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
            // KeePassXC (2.7) asks the user before another process replaces an item through
            // CreateItem, even with access confirmation off: every re-login or stored token after
            // the first command would wait on a dialog. Its items are changed in place instead
            // (Item.SetSecret, which it allows as it allows reading them).
            let replaced = self.provider() == .keepassxc
                ? try self.replaceInPlace(
                    attributes, value, namespace: address.namespace, cancellable: cancellable, error: &error) : false
            if !replaced {
                let stored = secret_password_storev_binary_sync(
                    csecret_schema(), attributes, nil, label, value, cancellable, &error)
                if stored == 0 { throw error.map(Self.classify) ?? KeyringError.other("store refused") }
            }
            // Read it back: a provider that decrypted the transfer with a different session key
            // (KWallet, rarely) stores garbage without an error. A mismatch is retried with a new
            // session, which rewrites the item. gnome-keyring derives the key as libsecret does (the
            // same DH code), so its writes are not read back: one D-Bus round trip fewer per write.
            if self.provider() == .gnomeKeyring { return }
            // Over a new session: a wrong session key is symmetric, so the session that garbled the
            // write would decrypt the garbage back into the value written, and the check would pass.
            csecret_reset_service()
            guard let back = secret_password_lookupv_binary_sync(csecret_schema(), attributes, cancellable, &error)
            else { throw error.map(Self.classify) ?? KeyringError.other(Self.staleSession) }
            defer { secret_value_unref(UnsafeMutableRawPointer(back)) }
            var length = 0
            let bytes = secret_value_get(back, &length)
            let same = secret.withUnsafeBytes { expected in
                UnsafeRawBufferPointer(start: bytes, count: bytes == nil ? 0 : length).elementsEqual(expected)
            }
            if !same { throw KeyringError.other(Self.staleSession) }
        }
    }

    public func delete(_ address: KeyringAddress) throws(KeyringError) {
        try call { cancellable, error throws(KeyringError) in
            // Only a usable collection makes "nothing left" mean "deleted" (docs/security.md#kr-7).
            try self.requireUsableCollection(cancellable, &error)
            let attributes = self.attributes(address)
            defer { g_hash_table_unref(attributes) }
            _ = secret_password_clearv_sync(csecret_schema(), attributes, cancellable, &error)
            if let failure = error { throw Self.classify(failure) }
            // Verify: clear silently skips locked items.
            let remaining = try self.search(attributes, cancellable: cancellable, error: &error)
            if remaining.contains(where: { $0.locked }) { throw KeyringError.locked }
            if !remaining.isEmpty { throw KeyringError.other("item still present after delete") }
        }
    }

    public func list(namespace: String) throws(KeyringError) -> [KeyringAddress] {
        try call { cancellable, error throws(KeyringError) -> [KeyringAddress] in
            let attributes = csecret_attributes(app, namespace, nil, nil, nil)!
            defer { g_hash_table_unref(attributes) }
            let found = try self.search(attributes, cancellable: cancellable, error: &error)
            try self.requireUsableCollection(cancellable, &error)
            return found.compactMap { $0.address }
        }
    }

    public func checkAvailable() throws(KeyringError) {
        knownUnlocked.withLock { $0 = false }
        try call { cancellable, error throws(KeyringError) in try self.requireUsableCollection(cancellable, &error) }
    }

    // MARK: Internals

    struct Found {
        var address: KeyringAddress?
        var locked: Bool
    }

    /// Throws unless the default collection exists and is unlocked (cached once seen unlocked).
    private func requireUsableCollection(
        _ cancellable: UnsafeMutablePointer<GCancellable>, _ error: inout UnsafeMutablePointer<GError>?
    ) throws(KeyringError) {
        if knownUnlocked.withLock({ $0 }) { return }
        let state = csecret_default_collection_state(cancellable, &error)
        if state < 0 { throw error.map(Self.classify) ?? KeyringError.other("collection state") }
        if state == Int32(CSECRET_COLLECTION_MISSING) { throw KeyringError.noCollection }
        if state == Int32(CSECRET_COLLECTION_LOCKED) { throw KeyringError.locked }
        knownUnlocked.withLock { $0 = true }
    }

    private func attributes(_ address: KeyringAddress) -> OpaquePointer {
        csecret_attributes(app, address.namespace, address.account, address.kind, String(address.version))!
    }

    /// Sets the secret of the one unlocked item with exactly `attributes`, if there is one; false
    /// (nothing done) when there is none or more than one.
    private func replaceInPlace(
        _ attributes: OpaquePointer, _ value: OpaquePointer?, namespace: String,
        cancellable: UnsafeMutablePointer<GCancellable>, error: inout UnsafeMutablePointer<GError>?
    ) throws(KeyringError) -> Bool {
        let list = secret_password_searchv_sync(csecret_schema(), attributes, SECRET_SEARCH_ALL, cancellable, &error)
        if let failure = error { throw Self.classify(failure) }
        defer { g_list_free_full(list, g_object_unref) }
        guard let only = list, only.pointee.next == nil, csecret_item_is_locked(only.pointee.data) == 0 else {
            return false
        }
        #if DEBUG
            Self.beforeSetSecret.withLock { $0 }?(namespace)
        #endif
        if csecret_item_set_secret(only.pointee.data, value, cancellable, &error) != 0 { return true }
        // Deleted since the search (another process's removal): nothing to replace, so it is
        // created as any new item is. It failed as "no Secret Service" (GDBus's UNKNOWN_OBJECT).
        if let failure = error, Self.isGone(failure) {
            g_error_free(failure)
            error = nil
            return false
        }
        throw error.map(Self.classify) ?? KeyringError.other("set secret refused")
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
        var attempt = 1
        while true {
            do {
                return try callOnce(body)
            } catch .other(let reason) where reason == Self.staleSession && attempt < Self.sessionAttempts {
                // The transfer session failed in a way a new one fixes (KWallet refused a short DH
                // key, or derived a different key): forget libsecret's cached service, never while a
                // call of ours uses it, and try again with a new session.
                Self.lock.withLock { _ in csecret_reset_service() }
                attempt += 1
            }
        }
    }

    /// Attempts per call. About one KWallet session in 100 is bad (a different key, about 1 in 180;
    /// `OpenSession` refused, about 1 in 256), independent per session, and an attempt of a read or
    /// a write uses two sessions: about one attempt in 55 fails. Three attempts failed together
    /// about once in 160 000 calls, and a `make test` run under KWallet (1 500 calls in
    /// `everyTransferSessionDeliversTheValue` alone) met it: `stale-session`. Five fail together about
    /// once in 500 million; a good session costs nothing more.
    static let sessionAttempts = 5

    /// Drops libsecret's cached service so the next call opens a new transfer session (tests).
    func resetTransferSession() {
        Self.lock.withLock { _ in csecret_reset_service() }
    }

    private func callOnce<R>(
        _ body: (UnsafeMutablePointer<GCancellable>, inout UnsafeMutablePointer<GError>?) throws(KeyringError) -> R
    ) throws(KeyringError) -> R {
        if let earlier = unresponsive.withLock({ $0 }) { throw earlier }
        return try Self.lock.withLock { _ throws(KeyringError) -> R in
            let cancellable = g_cancellable_new()!
            defer { g_object_unref(cancellable) }
            // Milliseconds, clamped: a deadline from the environment never traps the conversion.
            let milliseconds = deadline.isFinite ? min(max(1, deadline * 1000), 600_000) : 5_000
            let timer = csecret_deadline_start(cancellable, UInt32(milliseconds))
            defer { csecret_deadline_stop(timer) }
            var error: UnsafeMutablePointer<GError>?
            defer { if let error { g_error_free(error) } }
            do throws(KeyringError) {
                #if DEBUG
                    // Tests: a call that ignores its cancellable (the stall after a provider crash).
                    if let asked = getenv("OSTACK_FAILPOINT"), String(cString: asked) == "hang:keyring.call" {
                        sleep(120)
                    }
                #endif
                return try body(cancellable, &error)
            } catch {
                if g_cancellable_is_cancelled(cancellable) != 0 || error == .timeout {
                    // A provider that asks the user (KeePassXC) may be showing a dialog.
                    let outcome: KeyringError = Self.detectProvider().mayPrompt ? .approvalPending : .timeout
                    unresponsive.withLock { $0 = outcome }
                    throw outcome
                }
                throw error
            }
        }
    }

    static let staleSession = "stale-session"

    #if DEBUG
        /// Tests: runs between the search and the SetSecret of a KeePassXC replacement, with the
        /// item's namespace (another process deleting the item at that moment).
        static let beforeSetSecret = Mutex<(@Sendable (String) -> Void)?>(nil)
    #endif

    /// Whether `error` says the object addressed no longer exists (`csecret_error_is_gone`).
    static func isGone(_ error: UnsafeMutablePointer<GError>) -> Bool { csecret_error_is_gone(error) != 0 }

    /// What the process writes to stderr before it ends itself, exit 10, when a call is still
    /// running 10 s after its deadline cancelled it (a provider that crashed mid-call can leave
    /// libsecret waiting on nothing, deaf to the cancellation). Without one, it waits.
    public static func setHangReport(_ text: String?) {
        if let text {
            text.withCString { csecret_set_hang_report($0) }
        } else {
            csecret_set_hang_report(nil)
        }
    }

    static func classify(_ error: UnsafeMutablePointer<GError>) -> KeyringError {
        switch Int32(csecret_classify(error)) {
        case Int32(CSECRET_ERROR_LOCKED): return .locked
        case Int32(CSECRET_ERROR_NO_SERVICE): return .noService
        case Int32(CSECRET_ERROR_TIMEOUT): return .timeout
        case Int32(CSECRET_ERROR_DENIED): return .denied
        case Int32(CSECRET_ERROR_STALE_SESSION): return .other(staleSession)
        default:
            let domain = String(cString: g_quark_to_string(error.pointee.domain))
            return .other("\(domain):\(error.pointee.code)")
        }
    }
}
