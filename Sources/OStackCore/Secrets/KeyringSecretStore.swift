import KeyringKit
import SodiumKit

/// `SecretStore` over a KeyringKit backend, with the one mapping of keyring failures to user-safe
/// codes: no service → `keyring-unavailable`, locked or no default collection → `keyring-locked`,
/// timeout → `keyring-timeout` (with "approve the request" when the provider may be prompting).
public struct KeyringSecretStore: SecretStore {
    public let keyring: any KeyringStore

    public init(keyring: any KeyringStore) {
        self.keyring = keyring
    }

    static func address(_ key: SecretKey) -> KeyringAddress {
        KeyringAddress(namespace: key.namespace, account: key.account, kind: key.kind.rawValue, version: key.version)
    }

    /// The hint for a provider without a default collection.
    public static let noCollectionHint: Wording =
        "The keyring has no open default collection (the login keyring is not loaded, or the password manager's database is closed). Open it — log out and back in, or unlock the KeePassXC database — and try again; nothing was changed."
    /// The hint when a provider that asks the user (KeePassXC) did not answer.
    public static let approvalHint: Wording =
        "Approve the request in your keyring application (KeePassXC), then try again; nothing was changed."

    /// Whether `error` came from a provider without an open default collection.
    public static func isNoCollection(_ error: OStackError) -> Bool {
        error.code == .keyringLocked && error.context.suggestion == noCollectionHint
    }

    static func map(_ error: KeyringError) -> OStackError {
        switch error {
        case .noService: OStackError(.keyringUnavailable, detail: "keyring: \(error)")
        case .locked: OStackError(.keyringLocked, detail: "keyring: \(error)")
        case .noCollection:
            OStackError(.keyringLocked, context: .init(suggestion: noCollectionHint), detail: "keyring: \(error)")
        case .timeout: OStackError(.keyringTimeout, detail: "keyring: \(error)")
        case .approvalPending:
            OStackError(.keyringTimeout, context: .init(suggestion: approvalHint), detail: "keyring: \(error)")
        case .denied, .other: OStackError(.keyringUnavailable, detail: "keyring: \(error)")
        case .wrongPassphrase: OStackError(.wrongPassphrase, detail: "keyring: \(error)")
        case .damaged:
            OStackError(
                .keyringDamaged,
                context: .init(
                    suggestion:
                        "Restore it from a backup, or move it aside and sign in again (the data of accounts whose keys it held cannot be read without it)."
                ), detail: "keyring: \(error)")
        case .passphraseMismatch:
            OStackError(
                .invalidInput,
                context: .init(suggestion: "The two passphrases differ; nothing was created. Type the same one twice."),
                detail: "keyring: \(error)")
        case .passphraseRequired:
            OStackError(
                .inputRequired,
                context: .init(
                    suggestion: "Give the file keyring passphrase on a terminal or via OSTACK_KEYRING_PASSPHRASE_FD."),
                detail: "keyring: \(error)")
        }
    }

    public func read(_ key: SecretKey) throws(OStackError) -> SecretBytes? {
        do { return try keyring.read(Self.address(key)) } catch { throw Self.map(error) }
    }

    public func write(_ secret: SecretBytes, for key: SecretKey) throws(OStackError) {
        do { try keyring.write(secret, for: Self.address(key)) } catch { throw Self.map(error) }
    }

    public func write(_ secret: SecretBytes, for key: SecretKey, label: String) throws(OStackError) {
        do { try keyring.write(secret, for: Self.address(key), label: label) } catch { throw Self.map(error) }
    }

    /// Deletes and reads back (docs/security.md#kr-7): a delete that did not happen is an error.
    public func delete(_ key: SecretKey) throws(OStackError) {
        let stillThere: Bool
        do {
            try keyring.delete(Self.address(key))
            stillThere = try keyring.read(Self.address(key)) != nil
        } catch {
            throw Self.map(error)
        }
        if stillThere {
            throw OStackError(.keyringUnavailable, detail: "keyring: \(key.kind.rawValue) still present after delete")
        }
    }

    public func list(namespace: String) throws(OStackError) -> [SecretKey] {
        do {
            return try keyring.list(namespace: namespace).compactMap { address in
                SecretKind(rawValue: address.kind).map {
                    SecretKey(
                        namespace: address.namespace, account: address.account, kind: $0, version: address.version)
                }
            }
        } catch {
            throw Self.map(error)
        }
    }

    public func checkAvailable() throws(OStackError) {
        do { try keyring.checkAvailable() } catch { throw Self.map(error) }
    }

    public func prepareForWriting() throws(OStackError) {
        do { try keyring.prepareForWriting() } catch { throw Self.map(error) }
    }
}
