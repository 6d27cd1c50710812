import SQLCipherKit
import SodiumKit

/// A secret with one role. Each role is a small struct over one `SecretBytes` (the storage: guarded,
/// wiped on free, constant-time `==`, `<redacted>` description), so the compiler keeps the roles
/// apart: a PIN can never be passed where a data key is expected. `init(_:)` and `bytes` are the one
/// explicit conversion, used only where a secret is encoded (keyring item, envelope, KDF, wire).
public protocol SecretRole: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The secret bytes (in `sodium_malloc` memory).
    var bytes: SecretBytes { get }
    /// Gives existing secret bytes this role (no copy).
    init(_ bytes: SecretBytes)
}

extension SecretRole {
    /// Constant time (`SecretBytes.==`).
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.bytes == rhs.bytes }
    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
}

/// An account's data-encryption key (DEK, docs/storage.md "Keys"): 32 random bytes that open the account's
/// SQLCipher database as a raw key and from which the token-seal and audit subkeys are derived. In
/// the keyring as `db-key`, or — with a PIN — only in the envelopes and in the agent.
public struct AccountDataKey: SecretRole {
    public static let length = DatabaseKey.length
    public let bytes: SecretBytes

    public init(_ bytes: SecretBytes) {
        self.bytes = bytes
    }

    /// A fresh random key from the CSPRNG.
    public static func generate() -> AccountDataKey { AccountDataKey(SecretBytes(randomCount: length)) }

    /// The key in SQLCipherKit's raw-key form; a wrong length throws.
    public func databaseKey() throws(SQLiteError) -> DatabaseKey { try DatabaseKey(bytes) }
}

/// The PIN (or passphrase) that unlocks an account's DEK (docs/storage.md, "PIN lock"), as the user typed it.
public struct PIN: EnvelopeSecret {
    public static let envelopePurpose = KeyEnvelope.Purpose.pin
    public let bytes: SecretBytes

    public init(_ bytes: SecretBytes) {
        self.bytes = bytes
    }

    /// The PIN in Unicode normalisation form C (docs/security.md#pin-7): the form new envelopes are
    /// sealed with and unlocks try first, so one passphrase typed through an input method, a
    /// terminal or a password manager that sends `é` as `e` + U+0301 is still the same PIN. ASCII
    /// (one form only) and bytes that are not UTF-8 (nothing to normalise) come back as typed.
    /// Non-ASCII PINs pass through a `String` on the way, which cannot be wiped; `PINPolicy` reads
    /// every PIN through one already.
    public var composed: PIN { bytes.composedUTF8.map(PIN.init) ?? self }

    /// What one unlock attempt tries, in order: the composed form, then the PIN as typed when that
    /// differs (an envelope sealed before ostack composed PINs, from input that was not in NFC).
    var unlockForms: [PIN] {
        let composed = composed
        return composed == self ? [self] : [composed, self]
    }
}

/// A keyring-held wrapping key `K_ring` (the `pin-ring` and `recovery-ring` items, docs/storage.md): 32
/// random bytes without which an envelope is useless, whatever the PIN or recovery key.
public struct RingKey: SecretRole {
    public static let length = 32
    public let bytes: SecretBytes

    public init(_ bytes: SecretBytes) {
        self.bytes = bytes
    }

    /// A fresh random ring key.
    public static func generate() -> RingKey { RingKey(SecretBytes(randomCount: length)) }
}

/// A key-encryption key: what Argon2id and the ring key make of a PIN or recovery key; it opens one
/// envelope.
public struct KeyEncryptionKey: SecretRole {
    public let bytes: SecretBytes

    public init(_ bytes: SecretBytes) {
        self.bytes = bytes
    }
}

/// The bearer credential of an account: its session token, or an `osk_…` API key (docs/storage.md). In the
/// keyring as `session-token` / `api-key`, sealed under the DEK when the account has a PIN.
public struct SessionCredential: SecretRole {
    public let bytes: SecretBytes

    public init(_ bytes: SecretBytes) {
        self.bytes = bytes
    }
}

/// A secret that seals a DEK in a `KeyEnvelope` (the PIN, the recovery key); its type names the
/// envelope's purpose.
public protocol EnvelopeSecret: SecretRole {
    static var envelopePurpose: KeyEnvelope.Purpose { get }
}
