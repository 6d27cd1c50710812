import SodiumKit

/// The side effects account and session use cases need, bundled (SPEC §2: protocols, so tests can
/// swap each one). Built by the CLI's live environment or by a test.
public struct AuthEnvironment: Sendable {
    public var layout: FileLayout
    public var secrets: any SecretStore
    public var namespaces: KeyringNamespaces
    public var transport: any HTTPTransport
    public var clock: Clock
    /// The keyring backend name recorded for new accounts ("secret-service" or "file").
    public var keyringBackend: String
    /// Creates (or opens and checks) an account database under `key`; called at first sign-in.
    public var provisionDatabase: @Sendable (_ path: String, _ key: SecretBytes) throws(OStackError) -> Void
    /// How long to wait for another process holding a per-account or login lock.
    public var lockTimeout: Double = 30

    public init(
        layout: FileLayout, secrets: any SecretStore, namespaces: KeyringNamespaces, transport: any HTTPTransport,
        clock: Clock = .system, keyringBackend: String,
        provisionDatabase: @escaping @Sendable (_ path: String, _ key: SecretBytes) throws(OStackError) -> Void
    ) {
        self.layout = layout
        self.secrets = secrets
        self.namespaces = namespaces
        self.transport = transport
        self.clock = clock
        self.keyringBackend = keyringBackend
        self.provisionDatabase = provisionDatabase
    }

    public var registry: AccountRegistry { AccountRegistry(layout: layout) }
    public var configuration: ConfigurationStore { ConfigurationStore(layout: layout) }

    /// The account database file.
    public func databasePath(_ account: Account) -> String {
        layout.accountDirectory(account.dataDirectory) + "/data.db"
    }

    /// Per-account lock file (refresh, rotation, removal).
    public func sessionLockPath(_ account: Account) -> String {
        layout.locksDirectory + "/session-\(account.dataDirectory).lock"
    }

    public var loginLockPath: String { layout.locksDirectory + "/login.lock" }
}
