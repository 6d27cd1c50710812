import DevServerCore
import Glibc
import Synchronization

/// Users, sessions and API keys, as better-auth (with the bearer plugin) behaves (docs/protocol.md#authentication).
final class AuthStore: @unchecked Sendable {
    // @unchecked Sendable: state is behind the mutex.
    struct Session {
        var token: String
        var userID: String
        var createdAt: Double
        var updatedAt: Double
        var expiresAt: Double
        /// A rotated-away token stays valid until this time (grace).
        var graceUntil: Double?
        var activeOrganizationID: String?
    }

    /// Who a request acts as, and through which credential.
    struct Principal {
        var userID: String
        /// A session (not an API key): only sessions carry the auth-policy gate and reach `/me/apps`.
        var viaSession: Bool
        var organizationID: String?
        var sessionToken: String?
    }

    /// A pending second factor (better-auth's signed `two_factor` cookie and its verification row).
    struct Challenge {
        var userID: String
        var expiresAt: Double
        var attempts = 0
    }

    struct APIKey {
        var userID: String
        var organizationID: String?
    }

    struct State {
        var sessions: [String: Session] = [:]
        var apiKeys: [String: APIKey] = [:]
        var challenges: [String: Challenge] = [:]
        var usedBackupCodes: [String: Set<String>] = [:]
        /// User id → gate code (`PASSWORD_EXPIRED`, `MFA_REQUIRED`).
        var gates: [String: String] = [:]
        var signIns = 0
        var refreshes = 0
        var rotations = 0
    }

    /// The pending-two-factor cookie (better-auth `createAuthCookie("two_factor")`, default prefix).
    static let twoFactorCookie = "better-auth.two_factor"

    let configuration: DevServerConfiguration
    let state = Mutex(State())

    init(configuration: DevServerConfiguration) {
        self.configuration = configuration
        state.withLock { state in
            for (key, email) in configuration.apiKeys {
                if let user = configuration.users.first(where: { $0.email == email }) {
                    state.apiKeys[key] = APIKey(userID: user.id, organizationID: configuration.organizations.first?.id)
                }
            }
        }
    }

    static func now() -> Double {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
    }

    static func randomToken(prefix: String = "") -> String {
        var bytes = [UInt8](repeating: 0, count: 24)
        let fd = open("/dev/urandom", O_RDONLY)
        _ = read(fd, &bytes, bytes.count)
        close(fd)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
        return prefix + String(bytes.map { alphabet[Int($0) % alphabet.count] })
    }

    func user(id: String) -> DevServerConfiguration.User? { configuration.users.first { $0.id == id } }

    /// The user with this e-mail and password, or nil.
    func user(email: String, password: String) -> DevServerConfiguration.User? {
        configuration.users.first { $0.email.lowercased() == email.lowercased() && $0.password == password }
    }

    /// Whether `user` has a second factor (a TOTP secret) and so signs in in two steps.
    func hasTwoFactor(_ user: DevServerConfiguration.User) -> Bool { configuration.totpSecrets[user.email] != nil }

    func signIn(email: String, password: String) -> Session? {
        guard let user = user(email: email, password: password) else { return nil }
        return createSession(userID: user.id)
    }

    func createSession(userID: String) -> Session {
        let now = Self.now()
        let session = Session(
            token: Self.randomToken(), userID: userID, createdAt: now, updatedAt: now,
            expiresAt: now + configuration.sessionTTL, activeOrganizationID: configuration.organizations.first?.id)
        state.withLock {
            $0.sessions[session.token] = session
            $0.signIns += 1
        }
        return session
    }

    /// Starts a two-factor challenge (10 minutes, as better-auth's `twoFactorCookieMaxAge`) and
    /// returns the cookie value that carries it: `<identifier>.<signature>`.
    func beginTwoFactor(userID: String) -> String {
        let value = "2fa-" + Self.randomToken() + "." + Self.randomToken()
        state.withLock { $0.challenges[value] = Challenge(userID: userID, expiresAt: Self.now() + 600) }
        return value
    }

    enum TwoFactorOutcome {
        case session(Session)
        /// Inside the lock only: the code was right; a session is created after.
        case verified(userID: String)
        /// better-auth `{code, message}` and its status.
        case refused(status: Int, code: String, message: String, clearCookie: Bool)
    }

    /// `verify-totp` / `verify-backup-code` on a pending challenge: at most 5 attempts per challenge
    /// (better-auth `DEFAULT_TWO_FACTOR_ALLOWED_ATTEMPTS`), then the challenge is void.
    func completeTwoFactor(cookie: String?, code: String, backup: Bool) -> TwoFactorOutcome {
        let invalidCookie = TwoFactorOutcome.refused(
            status: 401, code: "INVALID_TWO_FACTOR_COOKIE", message: "Invalid two factor cookie", clearCookie: false)
        guard let cookie else { return invalidCookie }
        let outcome: TwoFactorOutcome? = state.withLock { state in
            guard var challenge = state.challenges[cookie], challenge.expiresAt > Self.now(),
                let user = configuration.users.first(where: { $0.id == challenge.userID })
            else { return nil }
            if challenge.attempts >= 5 {
                state.challenges[cookie] = nil
                return .refused(
                    status: 400, code: "TOO_MANY_ATTEMPTS_REQUEST_NEW_CODE",
                    message: "Too many attempts. Please request a new code.", clearCookie: true)
            }
            let valid: Bool
            if backup {
                let used = state.usedBackupCodes[user.id] ?? []
                valid = (configuration.backupCodes[user.email] ?? []).contains(code) && !used.contains(code)
                if valid { state.usedBackupCodes[user.id, default: []].insert(code) }
            } else {
                let key = configuration.totpSecrets[user.email].flatMap(OneTimePassword.base32Decode) ?? []
                valid = !key.isEmpty && OneTimePassword.verifyTOTP(code, key: key, time: Self.now())
            }
            guard valid else {
                challenge.attempts += 1
                state.challenges[cookie] = challenge
                return backup
                    ? .refused(
                        status: 401, code: "INVALID_BACKUP_CODE", message: "Invalid backup code", clearCookie: false)
                    : .refused(status: 401, code: "INVALID_CODE", message: "Invalid code", clearCookie: false)
            }
            state.challenges[cookie] = nil
            return .verified(userID: challenge.userID)
        }
        guard let outcome else { return invalidCookie }
        if case .verified(let userID) = outcome { return .session(createSession(userID: userID)) }
        return outcome
    }

    /// The principal behind a request's credential, or nil. API keys resolve first (as
    /// `resolveAuthzContext`), then sessions — plain or signed `<token>.<sig>`. Using a session slides
    /// it when it is older than the update age.
    func authenticate(_ credential: Credential?) -> Principal? {
        guard let credential else { return nil }
        return state.withLock { state in
            if let key = credential.apiKey, let entry = state.apiKeys[key] {
                return Principal(userID: entry.userID, viaSession: false, organizationID: entry.organizationID)
            }
            guard let bearer = credential.sessionToken else { return nil }
            let token = bearer.split(separator: ".").first.map(String.init) ?? bearer
            guard var session = state.sessions[token] else { return nil }
            let now = Self.now()
            if session.expiresAt <= now { return nil }
            if let grace = session.graceUntil, grace <= now { return nil }
            if session.graceUntil == nil, now - session.updatedAt > configuration.updateAge {
                session.updatedAt = now
                session.expiresAt = now + configuration.sessionTTL
                state.sessions[token] = session
            }
            return Principal(
                userID: session.userID, viaSession: true, organizationID: session.activeOrganizationID,
                sessionToken: token)
        }
    }

    /// The user id behind a credential (see `authenticate`).
    func authenticate(_ bearer: String?) -> String? {
        authenticate(bearer.map { Credential(authorization: "Bearer " + $0, apiKeyHeader: nil) }).map(\.userID)
    }

    func gate(userID: String) -> String? { state.withLock { $0.gates[userID] } }

    func setGate(userID: String, code: String?) { state.withLock { $0.gates[userID] = code } }

    /// Sets a session's active organization (nil clears it); false when the session is unknown.
    func setActiveOrganization(token: String, organizationID: String?) -> Bool {
        state.withLock { state in
            guard state.sessions[token] != nil else { return false }
            state.sessions[token]!.activeOrganizationID = organizationID
            return true
        }
    }

    /// `get-session`: the session (rotated in rotation mode) or nil.
    /// API keys are not sessions: better-auth's `getSession` does not know them, so a key answers nil.
    func getSession(_ bearer: String?) -> (session: Session, rotated: Bool)? {
        guard let bearer, !bearer.isEmpty, !bearer.hasPrefix("osk_") else { return nil }
        let token = bearer.split(separator: ".").first.map(String.init) ?? bearer
        return state.withLock { state in
            guard var session = state.sessions[token] else { return nil }
            let now = Self.now()
            if session.expiresAt <= now { return nil }
            if let grace = session.graceUntil {
                // A rotated-away token inside its grace period: answer with the successor.
                guard grace > now,
                    let successor = state.sessions.values.first(where: {
                        $0.userID == session.userID && $0.graceUntil == nil && $0.createdAt >= session.createdAt
                    })
                else { return nil }
                state.refreshes += 1
                return (successor, false)
            }
            state.refreshes += 1
            if now - session.updatedAt > configuration.updateAge || configuration.rotateTokens {
                session.updatedAt = now
                session.expiresAt = now + configuration.sessionTTL
            }
            if configuration.rotateTokens {
                var successor = session
                successor.token = Self.randomToken()
                successor.createdAt = now
                session.graceUntil = now + configuration.rotationGrace
                state.sessions[token] = session
                state.sessions[successor.token] = successor
                state.rotations += 1
                return (successor, true)
            }
            state.sessions[token] = session
            return (session, false)
        }
    }

    func signOut(_ bearer: String?) {
        guard let bearer else { return }
        let token = bearer.split(separator: ".").first.map(String.init) ?? bearer
        _ = state.withLock { $0.sessions.removeValue(forKey: token) }
    }

    func expireAll() {
        state.withLock { $0.sessions.removeAll() }
    }

    /// A new key inherits the minter's active organization.
    func mintAPIKey(for principal: Principal) -> String {
        let key = Self.randomToken(prefix: "osk_")
        state.withLock { $0.apiKeys[key] = APIKey(userID: principal.userID, organizationID: principal.organizationID) }
        return key
    }

    func reset() {
        state.withLock { state in
            state.sessions.removeAll()
            state.challenges.removeAll()
            state.usedBackupCodes.removeAll()
            state.gates.removeAll()
            state.signIns = 0
            state.refreshes = 0
            state.rotations = 0
        }
    }

    var counters: (signIns: Int, refreshes: Int, rotations: Int) {
        state.withLock { ($0.signIns, $0.refreshes, $0.rotations) }
    }

    /// Sessions not signed out (expired ones included).
    var liveSessions: Int { state.withLock { $0.sessions.count } }
}

/// The credential of a request, split as the real server splits it (`extractApiKey`,
/// `packages/core/src/security/api-key.ts`): `X-API-Key`, `Authorization: ApiKey …` (any case) or a
/// Bearer starting `osk_` is an API key; any other Bearer is a session token.
struct Credential {
    var apiKey: String?
    var sessionToken: String?

    init(authorization: String?, apiKeyHeader: String?) {
        if let header = apiKeyHeader?.trimmed(), !header.isEmpty { apiKey = header }
        guard let authorization = authorization?.trimmed() else { return }
        let lower = authorization.lowercased()
        if lower.hasPrefix("apikey ") {
            let value = String(authorization.dropFirst(7)).trimmed()
            if apiKey == nil && !value.isEmpty { apiKey = value }
        } else if lower.hasPrefix("bearer ") {
            let value = String(authorization.dropFirst(7)).trimmed()
            if value.hasPrefix("osk_") {
                if apiKey == nil { apiKey = value }
            } else if !value.isEmpty {
                sessionToken = value
            }
        }
    }
}
