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
        if namespace != namespaces.guest,
            let account = try registry.accounts().first(where: { namespaces.account($0.id) == namespace })
        {
            return try store(named: account.keyringBackend)
        }
        return try store(named: defaultBackend)
    }

    public func read(_ key: SecretKey) throws(OStackError) -> SecretBytes? { try store(for: key.namespace).read(key) }

    public func write(_ secret: SecretBytes, for key: SecretKey) throws(OStackError) {
        try store(for: key.namespace).write(secret, for: key)
    }

    public func delete(_ key: SecretKey) throws(OStackError) { try store(for: key.namespace).delete(key) }

    public func list(namespace: String) throws(OStackError) -> [SecretKey] {
        try store(for: namespace).list(namespace: namespace)
    }
}
