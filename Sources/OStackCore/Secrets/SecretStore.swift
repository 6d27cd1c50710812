import PlatformKit
import SodiumKit

/// What the core needs from a keyring (docs/keyring.md), in core terms. The live implementations adapt
/// KeyringKit's Secret Service and file backends and map their failures to `OStackError`
/// (`keyring-locked`, `keyring-unavailable`, `keyring-timeout`) in one place.
///
/// "Not found" is `nil` only when it is certain, never an error, and never a reason to delete anything
/// (docs/security.md#kr-3).
public protocol SecretStore: Sendable {
    func read(_ key: SecretKey) throws(OStackError) -> SecretBytes?
    func write(_ secret: SecretBytes, for key: SecretKey) throws(OStackError)
    /// Writes with a label for people (docs/keyring.md, "Labels"; public: docs/security.md#kr-2).
    func write(_ secret: SecretBytes, for key: SecretKey, label: String) throws(OStackError)
    /// Deletes the item and verifies it is gone (docs/security.md#kr-7); a delete that did not happen throws.
    func delete(_ key: SecretKey) throws(OStackError)
    /// Every item of one namespace (exact match on app + namespace).
    func list(namespace: String) throws(OStackError) -> [SecretKey]
    /// Whether the store can be used now (reachable, its collection present and unlocked).
    func checkAvailable() throws(OStackError)
    /// Ready for writes, with whatever that needs asked now (the file backend's passphrase).
    func prepareForWriting() throws(OStackError)
}

extension SecretStore {
    public func write(_ secret: SecretBytes, for key: SecretKey, label: String) throws(OStackError) {
        try write(secret, for: key)
    }

    public func checkAvailable() throws(OStackError) {
        _ = try list(namespace: "ostack-availability-probe")
    }

    public func prepareForWriting() throws(OStackError) { try checkAvailable() }
}

/// The kinds of keyring items (docs/storage.md, "Keyring items").
public enum SecretKind: String, Sendable, Hashable, CaseIterable {
    case sessionToken = "session-token"
    case apiKey = "api-key"
    case dbKey = "db-key"
    case pinRing = "pin-ring"
    case recoveryRing = "recovery-ring"
    case auditAnchor = "audit-anchor"
    /// `pin set` in progress: the new ring keys before the commit (PINJournal).
    case pendingPINRing = "pin-ring-pending"
    case pendingRecoveryRing = "recovery-ring-pending"
    /// Which ostack home the namespace serves: that home's data directory (HomeClaim).
    case home = "home"
}

/// The address of one keyring item: namespace, account, kind and item format version.
public struct SecretKey: Sendable, Hashable, CustomStringConvertible {
    public static let currentVersion = 1

    public var namespace: String
    public var account: String
    public var kind: SecretKind
    public var version: Int

    public init(namespace: String, account: String, kind: SecretKind, version: Int = SecretKey.currentVersion) {
        self.namespace = namespace
        self.account = account
        self.kind = kind
        self.version = version
    }

    public var description: String { "\(namespace)/\(kind.rawValue)/v\(version)" }
}

/// Keyring namespaces (docs/storage.md, "Keyring items"): `<prefix>:auth:<accountId>` and `<prefix>:guest`.
public struct KeyringNamespaces: Sendable, Equatable {
    public static let guestAccount = "guest"

    public let prefix: String

    /// `OSTACK_KEYRING_PREFIX` (letters, digits, `-`, `_`, `.`), default `ostack`.
    public init(environment: [String: String]) {
        let candidate = environment["OSTACK_KEYRING_PREFIX"] ?? ""
        let valid =
            !candidate.isEmpty && candidate.count <= 64
            && candidate.unicodeScalars.allSatisfy {
                $0.isASCII
                    && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "-_.".unicodeScalars.contains($0))
            }
        prefix = valid ? candidate : "ostack"
    }

    public init(prefix: String) {
        self.prefix = prefix
    }

    public var guest: String { "\(prefix):guest" }
    public func account(_ id: AccountID) -> String { "\(prefix):auth:\(id.rawValue)" }

    public func key(_ id: AccountID, _ kind: SecretKind) -> SecretKey {
        SecretKey(namespace: account(id), account: id.rawValue, kind: kind)
    }

    /// A sign-in in progress as versions before per-home guest items kept it (`account` `guest`):
    /// finished or signed out by the recovery of a journal such a version left.
    public func legacyGuestKey(_ kind: SecretKind) -> SecretKey {
        SecretKey(namespace: guest, account: Self.guestAccount, kind: kind)
    }

    /// A sign-in in progress of the home whose data directory is `home`: its `account` is
    /// `guest:<16 hex>`, a hash of that directory (links resolved), so that two homes on one prefix
    /// signing in at once never take or delete each other's token.
    public func guestKey(_ kind: SecretKind, home: String) -> SecretKey {
        let digest = BLAKE2b.hash(Array(SecureFileSystem.canonicalPath(home).utf8), length: 8)
        return SecretKey(namespace: guest, account: "\(Self.guestAccount):\(Hex.encode(digest))", kind: kind)
    }
}
