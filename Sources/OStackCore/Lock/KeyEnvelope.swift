import FoundationEssentials
import PlatformKit
import SodiumKit

/// A wrapped DEK on disk (`pin.env`, `recovery.env`; docs/storage.md, "PIN lock"): version, KDF parameters and salt,
/// nonce, and XChaCha20-Poly1305(DEK) with the account id and parameters as associated data.
///
/// `KEK = BLAKE2b-256(key = ringKey, label ‖ accountId ‖ Argon2id(secret, salt, ops, mem))`: the
/// envelope is useless without the keyring-held `ringKey`, and guessing the secret costs an Argon2id
/// run per guess.
public struct KeyEnvelope: Sendable, Equatable, Codable {
    public enum Purpose: String, Sendable, Codable {
        case pin = "ostack/pin/v1"
        case recovery = "ostack/recovery/v1"
    }

    public static let currentVersion = 1

    public var version: Int
    public var purpose: Purpose
    public var kdf: Argon2id.Parameters
    public var nonce: [UInt8]
    public var ciphertext: [UInt8]

    static func associatedData(purpose: Purpose, accountID: AccountID, kdf: Argon2id.Parameters) -> [UInt8] {
        Array("\(purpose.rawValue)|\(accountID.rawValue)|\(kdf.algorithm)|\(kdf.opsLimit)|\(kdf.memLimit)".utf8)
            + kdf.salt
    }

    static func kek(
        purpose: Purpose, secret: SecretBytes, ringKey: RingKey, accountID: AccountID, kdf: Argon2id.Parameters
    ) throws(OStackError) -> KeyEncryptionKey {
        let derived: SecretBytes
        do {
            derived = try Argon2id.deriveKey(password: secret, parameters: kdf)
        } catch .outOfMemory {
            // The OS refused Argon2id its memory (SOD-3): nothing was learnt about the secret.
            throw OStackError(
                .notEnoughMemory, context: .init(count: Int(kdf.memLimit >> 20)), detail: "key derivation: no memory")
        } catch {
            throw OStackError(.internal, detail: "key derivation failed: \(error)")
        }
        do {
            return KeyEncryptionKey(
                try BLAKE2b.keyedHash(
                    key: ringKey.bytes, parts: [Array(purpose.rawValue.utf8), Array(accountID.rawValue.utf8)],
                    secretParts: [derived]))
        } catch {
            throw OStackError(.internal, detail: "key derivation failed: \(error)")
        }
    }

    /// Refuses an envelope that asks Argon2id for more than libsodium's SENSITIVE limits (4 passes,
    /// 1 GiB) or less than its minimum. ostack writes MODERATE at most; an envelope asking more was
    /// edited, and would hold an unlock for hours or exhaust the memory before a PIN is checked.
    /// Checked before an attempt is counted.
    public func checkCost() throws(OStackError) {
        let accepted = Argon2id.acceptedCost
        guard accepted.opsLimit.contains(kdf.opsLimit), accepted.memLimit.contains(kdf.memLimit) else {
            throw OStackError(.unsupportedFormat, detail: "envelope key-derivation cost out of range")
        }
    }

    /// Seals `dek` under `secret` (PIN or recovery key: its type is the envelope's purpose) and
    /// `ringKey`, with a fresh salt and nonce.
    public static func seal<Secret: EnvelopeSecret>(
        _ dek: AccountDataKey, secret: Secret, ringKey: RingKey, accountID: AccountID, kdf: Argon2id.Parameters
    ) throws(OStackError) -> KeyEnvelope {
        let purpose = Secret.envelopePurpose
        let key = try kek(purpose: purpose, secret: secret.bytes, ringKey: ringKey, accountID: accountID, kdf: kdf)
        do {
            let box = try AEAD.seal(
                dek.bytes, key: key.bytes,
                associatedData: associatedData(purpose: purpose, accountID: accountID, kdf: kdf))
            return KeyEnvelope(
                version: currentVersion, purpose: purpose, kdf: kdf, nonce: box.nonce, ciphertext: box.ciphertext)
        } catch {
            throw OStackError(.internal, detail: "sealing failed: \(error)")
        }
    }

    /// Opens the envelope; a wrong secret (or ring, or account) is `wrong-pin`.
    public func open(secret: some EnvelopeSecret, ringKey: RingKey, accountID: AccountID) throws(OStackError)
        -> AccountDataKey
    {
        try open(kek: try deriveKEK(secret: secret, ringKey: ringKey, accountID: accountID), accountID: accountID)
    }

    /// The key-encryption key for `secret` (the expensive Argon2id step), without opening anything.
    public func deriveKEK(secret: some EnvelopeSecret, ringKey: RingKey, accountID: AccountID) throws(OStackError)
        -> KeyEncryptionKey
    {
        guard version == Self.currentVersion else {
            throw OStackError(.unsupportedFormat, detail: "envelope version \(version)")
        }
        try checkCost()
        return try Self.kek(purpose: purpose, secret: secret.bytes, ringKey: ringKey, accountID: accountID, kdf: kdf)
    }

    /// Opens the envelope with a derived KEK; a wrong one is `wrong-pin`.
    public func open(kek key: KeyEncryptionKey, accountID: AccountID) throws(OStackError) -> AccountDataKey {
        do {
            return AccountDataKey(
                try AEAD.open(
                    AEAD.SealedBox(nonce: nonce, ciphertext: ciphertext), key: key.bytes,
                    associatedData: Self.associatedData(purpose: purpose, accountID: accountID, kdf: kdf)))
        } catch {
            throw OStackError(.wrongPIN, detail: "envelope did not open")
        }
    }

    // MARK: Files (0600, atomic)

    public func write(to path: String) throws(OStackError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        do {
            try SecureFileSystem.writeAtomically(Array(encoder.encode(self)), to: path)
        } catch {
            throw OStackError(.storageFailure, detail: "writing an envelope failed")
        }
    }

    public static func read(from path: String) throws(OStackError) -> KeyEnvelope? {
        let bytes: [UInt8]?
        do {
            bytes = try SecureFileSystem.readFile(path)
        } catch {
            throw OStackError(.storageFailure, detail: "reading an envelope failed")
        }
        guard let bytes else { return nil }
        guard let envelope = try? JSONDecoder().decode(KeyEnvelope.self, from: Data(bytes)) else {
            throw OStackError(.unsupportedFormat, detail: "envelope is not readable")
        }
        return envelope
    }
}
