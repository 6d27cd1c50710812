/// `ostack keyring migrate --to BACKEND`: moves every item of an account between backends (docs/keyring.md):
/// copy, verify by reading back, switch the account's backend in the registry, then delete from the
/// old backend (verified). Re-running finishes an interrupted migration: an account already on the
/// target has its leftovers removed from the other backend, but only where the target holds the
/// same secret.
public struct KeyringMigration: Sendable {
    public let store: RoutingSecretStore
    public let registry: AccountRegistry
    public let namespaces: KeyringNamespaces
    /// Whether a backend can hold items at all without asking for anything (e.g. the file backend
    /// only once its file exists), so a resumed migration never prompts for an unused backend.
    public let mayHoldItems: @Sendable (String) -> Bool

    public init(
        store: RoutingSecretStore, registry: AccountRegistry, namespaces: KeyringNamespaces,
        mayHoldItems: @escaping @Sendable (String) -> Bool
    ) {
        self.store = store
        self.registry = registry
        self.namespaces = namespaces
        self.mayHoldItems = mayHoldItems
    }

    public struct Outcome: Sendable, Equatable {
        public var account: String
        public var moved: Int
        public var cleaned: Int
    }

    public func migrate(_ account: Account, to target: String) throws(OStackError) -> Outcome {
        let destination = try store.store(named: target)
        let namespace = namespaces.account(account.id)
        var moved = 0
        if account.keyringBackend != target {
            let source = try store.store(named: account.keyringBackend)
            for key in try source.list(namespace: namespace) {
                guard let value = try source.read(key) else { continue }
                try destination.write(value, for: key)
                guard let back = try destination.read(key), back == value else {
                    throw OStackError(.keyringUnavailable, detail: "migrated item did not read back")
                }
                moved += 1
            }
            FailPoint.hit("keyring-migrate.after-copy")
            try registry.update { (accounts: inout [Account]) throws(OStackError) in
                if let index = accounts.firstIndex(where: { $0.id == account.id }) {
                    accounts[index].keyringBackend = target
                }
            }
            FailPoint.hit("keyring-migrate.after-switch")
        }
        // Remove what is left in the other backends (the whole migration when resumed).
        var cleaned = 0
        for (name, other) in store.backends
        where name != target && (name == account.keyringBackend || mayHoldItems(name)) {
            for key in try other.list(namespace: namespace) {
                guard let value = try other.read(key), let kept = try destination.read(key), kept == value else {
                    throw OStackError(
                        .unsupportedFormat, detail: "leftover keyring item differs from the migrated one; kept")
                }
                try other.delete(key)
                cleaned += 1
            }
        }
        return Outcome(account: account.alias, moved: moved, cleaned: cleaned)
    }
}
