import SodiumKit

/// A store of small binary secrets addressed by `KeyringAddress` (docs/keyring.md).
public protocol KeyringStore: Sendable {
    /// The secret, or `nil` when no such item exists. A locked collection, a missing service or a
    /// timeout are errors — never `nil` (docs/security.md#kr-3).
    func read(_ address: KeyringAddress) throws(KeyringError) -> SecretBytes?
    /// Creates or replaces the item.
    func write(_ secret: SecretBytes, for address: KeyringAddress) throws(KeyringError)
    /// Deletes the item and verifies that it is gone (docs/security.md#kr-7); deleting a missing item succeeds.
    func delete(_ address: KeyringAddress) throws(KeyringError)
    /// Every item whose `namespace` equals `namespace` exactly.
    func list(namespace: String) throws(KeyringError) -> [KeyringAddress]
}

extension KeyringStore {
    /// A real write, read-back and delete of a probe item: a connection alone proves nothing.
    public func probe(namespace: String) throws(KeyringError) {
        let address = KeyringAddress(namespace: namespace, account: "probe", kind: "probe", version: 1)
        let value = SecretBytes(randomCount: 16)
        try write(value, for: address)
        let back = try read(address)
        try delete(address)
        guard let back, back == value else { throw KeyringError.other("probe read-back mismatch") }
    }
}
