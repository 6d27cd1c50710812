import KeyringKit
import SodiumKit

/// `SecretStore` over a KeyringKit backend, with the one mapping of keyring failures to user-safe
/// codes: no service → `keyring-unavailable`, locked → `keyring-locked`, timeout → `keyring-timeout`.
public struct KeyringSecretStore: SecretStore {
    public let keyring: any KeyringStore

    public init(keyring: any KeyringStore) {
        self.keyring = keyring
    }

    static func address(_ key: SecretKey) -> KeyringAddress {
        KeyringAddress(namespace: key.namespace, account: key.account, kind: key.kind.rawValue, version: key.version)
    }

    static func map(_ error: KeyringError) -> OStackError {
        switch error {
        case .noService: OStackError(.keyringUnavailable, detail: "keyring: \(error)")
        case .locked: OStackError(.keyringLocked, detail: "keyring: \(error)")
        case .timeout: OStackError(.keyringTimeout, detail: "keyring: \(error)")
        case .denied, .other: OStackError(.keyringUnavailable, detail: "keyring: \(error)")
        case .wrongPassphrase: OStackError(.wrongPassphrase, detail: "keyring: \(error)")
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

    public func delete(_ key: SecretKey) throws(OStackError) {
        do { try keyring.delete(Self.address(key)) } catch { throw Self.map(error) }
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
}
