import Glibc
import Synchronization

/// Users, sessions and API keys, as better-auth (with the bearer plugin) behaves (PROTOCOL §2).
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
    }

    struct State {
        var sessions: [String: Session] = [:]
        var apiKeys: [String: String] = [:]  // key → user id
        var signIns = 0
        var refreshes = 0
        var rotations = 0
    }

    let configuration: DevServerConfiguration
    let state = Mutex(State())

    init(configuration: DevServerConfiguration) {
        self.configuration = configuration
        state.withLock { state in
            for (key, email) in configuration.apiKeys {
                if let user = configuration.users.first(where: { $0.email == email }) { state.apiKeys[key] = user.id }
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

    func signIn(email: String, password: String) -> Session? {
        guard
            let user = configuration.users.first(where: {
                $0.email.lowercased() == email.lowercased() && $0.password == password
            })
        else { return nil }
        let now = Self.now()
        let session = Session(
            token: Self.randomToken(), userID: user.id, createdAt: now, updatedAt: now,
            expiresAt: now + configuration.sessionTTL)
        state.withLock {
            $0.sessions[session.token] = session
            $0.signIns += 1
        }
        return session
    }

    /// The user id behind a bearer credential (session token — plain or signed `<token>.<sig>` — or
    /// API key), or nil. Using a session slides it when it is older than the update age.
    func authenticate(_ bearer: String?) -> String? {
        guard let bearer, !bearer.isEmpty else { return nil }
        return state.withLock { state in
            if let user = state.apiKeys[bearer] { return user }
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
            return session.userID
        }
    }

    /// `get-session`: the session (rotated in rotation mode) or nil.
    func getSession(_ bearer: String?) -> (session: Session, rotated: Bool)? {
        guard let bearer, !bearer.isEmpty else { return nil }
        let token = bearer.split(separator: ".").first.map(String.init) ?? bearer
        return state.withLock { state in
            if let userID = state.apiKeys[bearer] {
                state.refreshes += 1
                return (Session(token: bearer, userID: userID, createdAt: 0, updatedAt: 0, expiresAt: 0), false)
            }
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

    func mintAPIKey(for userID: String) -> String {
        let key = Self.randomToken(prefix: "osk_")
        state.withLock { $0.apiKeys[key] = userID }
        return key
    }

    func reset() {
        state.withLock { state in
            state.sessions.removeAll()
            state.signIns = 0
            state.refreshes = 0
            state.rotations = 0
        }
    }

    var counters: (signIns: Int, refreshes: Int, rotations: Int) {
        state.withLock { ($0.signIns, $0.refreshes, $0.rotations) }
    }
}
