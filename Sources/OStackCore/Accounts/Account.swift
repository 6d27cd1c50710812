import FoundationEssentials

/// One registered account: non-secret metadata only (docs/storage.md). Secrets live in the keyring; the
/// account's data lives in its encrypted database under `accounts/<dataDirectory>/`.
public struct Account: Sendable, Equatable, Codable {
    /// How the account authenticates.
    public enum CredentialKind: String, Sendable, Codable {
        /// A better-auth session token that expires, slides and may rotate.
        case session
        /// An `osk_…` API key: no expiry, never refreshed.
        case apiKey = "api-key"
    }

    /// The sign-in state as last observed (the keyring holds the token itself).
    public enum SessionState: String, Sendable, Codable {
        case signedIn = "signed-in"
        case signedOut = "signed-out"
        case expired = "expired"
    }

    public var id: AccountID
    public var alias: String
    public var server: ServerURL
    public var userID: String
    public var email: String
    public var displayName: String
    public var createdAt: Date
    public var lastUsedAt: Date
    /// The keyring backend that holds this account's secrets ("secret-service" or "file").
    public var keyringBackend: String
    /// Directory name under `accounts/` (random, reveals nothing about the account).
    public var dataDirectory: String
    public var credentialKind: CredentialKind
    public var sessionState: SessionState
    /// When the server said the session expires (nil for API keys).
    public var sessionExpiresAt: Date?
    /// When the session was last confirmed or refreshed with the server.
    public var sessionRefreshedAt: Date?
    /// The server's routes as its discovery document gave them at sign-in (nil: ObjectStack's
    /// defaults under `/api/v1`). For an account in an environment, that environment's scoped routes.
    public var routes: ServerRoutes?
    /// The environment (`login --environment`) and organization (`login --organization`) this account
    /// works in; each pair of them is a context of its own (own id, keyring namespace, database).
    public var environment: String?
    public var organization: String?

    public init(
        id: AccountID, alias: String, server: ServerURL, userID: String, email: String, displayName: String,
        createdAt: Date, lastUsedAt: Date, keyringBackend: String, dataDirectory: String,
        credentialKind: CredentialKind, sessionState: SessionState, sessionExpiresAt: Date?,
        sessionRefreshedAt: Date?
    ) {
        self.id = id
        self.alias = alias
        self.server = server
        self.userID = userID
        self.email = email
        self.displayName = displayName
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
        self.keyringBackend = keyringBackend
        self.dataDirectory = dataDirectory
        self.credentialKind = credentialKind
        self.sessionState = sessionState
        self.sessionExpiresAt = sessionExpiresAt
        self.sessionRefreshedAt = sessionRefreshedAt
    }

    /// `email@host`, one of the ways a user may refer to the account.
    public var emailAtHost: String { "\(email)@\(id.host)" }
}

extension Account {
    /// `not-signed-in` or `session-expired` when the account is known to be so (as last observed).
    public func requireSignedIn() throws(OStackError) {
        switch sessionState {
        case .signedIn: return
        case .expired: throw OStackError(.sessionExpired, context: .init(account: alias))
        case .signedOut: throw OStackError(.notSignedIn, context: .init(account: alias))
        }
    }
}
