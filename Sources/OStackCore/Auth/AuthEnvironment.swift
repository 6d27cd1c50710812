import PlatformKit
import SodiumKit

/// The side effects account and session use cases need, bundled (docs/architecture.md: protocols, so tests can
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
    public var provisionDatabase: @Sendable (_ path: String, _ key: AccountDataKey) throws(OStackError) -> Void
    /// How long to wait for another process holding a per-account or login lock.
    public var lockTimeout: Double = 30
    /// Unlocked keys of PIN-protected accounts (nil: no agent; such accounts are then locked).
    public var agent: AgentClient?

    public init(
        layout: FileLayout, secrets: any SecretStore, namespaces: KeyringNamespaces, transport: any HTTPTransport,
        clock: Clock = .system, keyringBackend: String,
        provisionDatabase: @escaping @Sendable (_ path: String, _ key: AccountDataKey) throws(OStackError) -> Void
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

    /// This home's item of a sign-in in progress (`KeyringNamespaces.guestKey(_:home:)`).
    public func guestKey(_ kind: SecretKind) -> SecretKey {
        namespaces.guestKey(kind, home: layout.dataDirectory)
    }

    /// `pin.env` of an account (its presence means: protected by a PIN).
    public func pinEnvelopePath(_ account: Account) -> String {
        layout.accountDirectory(account.dataDirectory) + "/pin.env"
    }

    public func recoveryEnvelopePath(_ account: Account) -> String {
        layout.accountDirectory(account.dataDirectory) + "/recovery.env"
    }

    public func hasPIN(_ account: Account) -> Bool {
        SecureFileSystem.exists(pinEnvelopePath(account))
    }

    /// Whether the DEK exists only in envelopes (a PIN, or after a lockout the recovery key): then
    /// the agent's unlocked copy is the only way in and the session token is sealed.
    public func keyIsSealed(_ account: Account) -> Bool {
        hasPIN(account) || SecureFileSystem.exists(recoveryEnvelopePath(account))
    }

    /// The account's DEK: the plain `db-key` item, or — with a PIN — the agent's unlocked copy.
    /// A PIN-protected account the agent does not hold is `locked` (exit 4).
    public func databaseKey(_ account: Account) throws(OStackError) -> AccountDataKey {
        if keyIsSealed(account) {
            guard let key = agent?.key(for: account.id) else {
                throw OStackError(.locked, context: .init(account: account.alias))
            }
            return key
        }
        guard let key = try secrets.readUpgrading(namespaces.key(account.id, .dbKey)) else {
            throw OStackError(.storageUnreadable, context: .init(account: account.alias), detail: "no db-key")
        }
        return AccountDataKey(key)
    }
}
