/// Everything `ostack-devserver`'s flags can set.
public struct DevServerConfiguration: Sendable {
    public struct User: Sendable {
        public var email: String
        public var password: String
        public var name: String
        public var id: String

        public init(email: String, password: String, name: String, id: String? = nil) {
            self.email = email
            self.password = password
            self.name = name
            self.id = id ?? "usr_" + String(email.prefix { $0 != "@" }.filter { $0.isLetter || $0.isNumber })
        }
    }

    public var host = "127.0.0.1"
    public var port = 0
    public var users: [User] = [
        User(email: "alice@example.com", password: "alice-pass", name: "Alice"),
        User(email: "bob@example.com", password: "bob-pass", name: "Bob"),
    ]
    /// Pre-seeded API keys: key → user e-mail.
    public var apiKeys: [String: String] = [:]
    /// Session lifetime (better-auth default 7 days).
    public var sessionTTL: Double = 7 * 86_400
    /// Sliding update age (default 1 day): a session older than this is extended when read.
    public var updateAge: Double = 86_400
    /// `get-session` issues a new token each time; the previous one works for `rotationGrace` s.
    public var rotateTokens = false
    public var rotationGrace: Double = 10
    public var batchCap = 200
    /// Added to every response.
    public var latencyMilliseconds = 0
    /// `--honour-idempotency-key` (invented): replay the first response for a repeated
    /// `Idempotency-Key`. The real server reads no such header; off by default.
    public var honourIdempotencyKey = false
    /// `--conditional-batch` (invented): updateMany/deleteMany/batch honour per-row expected versions
    /// and discovery advertises `capabilities.conditionalBatch`. Off: they are ignored, as for real.
    public var conditionalBatch = false
    /// `--assign-ids` (another server's behaviour): creates ignore the client's `id` and get a new one.
    public var assignIDs = false
    /// `--microsecond-stamps` (ObjectStack on Postgres): `updated_at` is kept in microseconds, shown
    /// in milliseconds; a bulk write's rows share one stamp (docs/devserver.md).
    public var microsecondStamps = false
    /// `--user-totp EMAIL:BASE32`: users with two-factor (TOTP) enabled.
    public var totpSecrets: [String: String] = [:]
    /// `--user-backup-codes EMAIL:CODE,CODE`: single-use two-factor backup codes.
    public var backupCodes: [String: [String]] = [:]
    /// `--api-path`: where every route lives (data, meta, auth, discovery); `/.well-known/objectstack`
    /// stays at the root.
    public var apiPath = "/api/v1"
    /// `--environment ID` (repeatable): environments with separate data, addressed by the
    /// `X-Environment-Id` header or `{apiPath}/environments/ID/…`. The first is the default.
    public var environments: [String] = []
    /// `--organization ID:NAME` (repeatable): every user is a member of each; data is separate per
    /// active organization (a new session starts in the first one).
    public var organizations: [(id: String, name: String)] = []
    /// `--conformance-objects`: also serve the objects of the conformance tables
    /// (`ObjectDefinition.conformance`).
    public var conformanceObjects = false

    public init() {}

    /// Only loopback: the dev server never listens on another interface.
    public static func isLoopback(_ host: String) -> Bool {
        host == "127.0.0.1" || host == "localhost" || host == "::1"
    }
}
