import SodiumKit

/// Sends each keyring call to the backend of the account that owns the namespace (docs/keyring.md, "Backends": an
/// account that uses `secret-service` is never silently moved to `file`). The guest namespace and
/// accounts not yet registered use the default backend.
public struct RoutingSecretStore: SecretStore {
    public let defaultBackend: String
    public let backends: [String: any SecretStore]
    public let namespaces: KeyringNamespaces
    public let registry: AccountRegistry

    public init(
        defaultBackend: String, backends: [String: any SecretStore], namespaces: KeyringNamespaces,
        registry: AccountRegistry
    ) {
        self.defaultBackend = defaultBackend
        self.backends = backends
        self.namespaces = namespaces
        self.registry = registry
    }

    public func store(named name: String) throws(OStackError) -> any SecretStore {
        guard let store = backends[name] else {
            throw OStackError(.invalidInput, context: .init(suggestion: "Keyring backends: secret-service, file."))
        }
        return store
    }

    func store(for namespace: String) throws(OStackError) -> any SecretStore {
        try route(namespace).store
    }

    /// The backend of `namespace` and, for a registered account, the account (for labels).
    func route(_ namespace: String) throws(OStackError) -> (store: any SecretStore, account: Account?) {
        if namespace != namespaces.guest,
            let account = try registry.accounts().first(where: { namespaces.account($0.id) == namespace })
        {
            return (try store(named: account.keyringBackend), account)
        }
        return (try store(named: defaultBackend), nil)
    }

    /// The label of `key`'s item: kind, alias and server host (docs/keyring.md, "Labels").
    func label(for key: SecretKey, account: Account?) -> String {
        if key.namespace == namespaces.guest {
            return KeyringLabel.make(kind: key.kind, alias: nil, host: nil, guest: true)
        }
        if key.namespace == "\(namespaces.prefix):global" { return KeyringLabel.app + " global audit anchor" }
        return KeyringLabel.make(
            kind: key.kind, alias: account?.alias,
            host: account?.server.authority ?? KeyringLabel.host(ofAccount: key.account))
    }

    public func read(_ key: SecretKey) throws(OStackError) -> SecretBytes? { try store(for: key.namespace).read(key) }

    public func write(_ secret: SecretBytes, for key: SecretKey) throws(OStackError) {
        let (store, account) = try route(key.namespace)
        try store.write(secret, for: key, label: label(for: key, account: account))
    }

    public func write(_ secret: SecretBytes, for key: SecretKey, label: String) throws(OStackError) {
        try store(for: key.namespace).write(secret, for: key, label: label)
    }

    public func delete(_ key: SecretKey) throws(OStackError) { try store(for: key.namespace).delete(key) }

    public func list(namespace: String) throws(OStackError) -> [SecretKey] {
        try store(for: namespace).list(namespace: namespace)
    }

    /// The default backend can be used now.
    public func checkAvailable() throws(OStackError) { try store(named: defaultBackend).checkAvailable() }
}
