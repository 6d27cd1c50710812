import SodiumKit

/// A store of small binary secrets addressed by `KeyringAddress` (docs/keyring.md).
public protocol KeyringStore: Sendable {
    /// The secret, or `nil` when no such item exists — and only when that is certain. A locked or
    /// missing collection, a missing service or a timeout are errors — never `nil` (docs/security.md#kr-3).
    func read(_ address: KeyringAddress) throws(KeyringError) -> SecretBytes?
    /// Creates or replaces the item.
    func write(_ secret: SecretBytes, for address: KeyringAddress) throws(KeyringError)
    /// Creates or replaces the item, with a label for people (Seahorse, KWallet, KeePassXC show it).
    /// Labels are public (docs/security.md#kr-2).
    func write(_ secret: SecretBytes, for address: KeyringAddress, label: String) throws(KeyringError)
    /// Deletes the item and verifies that it is gone (docs/security.md#kr-7); deleting an item that
    /// is certainly absent succeeds, a delete that did not happen throws.
    func delete(_ address: KeyringAddress) throws(KeyringError)
    /// Every item whose `namespace` equals `namespace` exactly (certain: an unusable collection throws).
    func list(namespace: String) throws(KeyringError) -> [KeyringAddress]
    /// Whether the store can be used now: reachable, its collection present and unlocked.
    func checkAvailable() throws(KeyringError)
    /// Ready for writes, with whatever that needs asked now (the file backend's passphrase).
    func prepareForWriting() throws(KeyringError)
}

extension KeyringStore {
    public func write(_ secret: SecretBytes, for address: KeyringAddress, label: String) throws(KeyringError) {
        try write(secret, for: address)
    }

    public func checkAvailable() throws(KeyringError) {
        _ = try list(namespace: "ostack-availability-probe")
    }

    /// Makes the store ready to take writes, asking whatever that needs now (the file backend's
    /// passphrase), so that a caller can find out before it starts work that needs writes.
    public func prepareForWriting() throws(KeyringError) { try checkAvailable() }

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
