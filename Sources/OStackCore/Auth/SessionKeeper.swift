import FoundationEssentials
import PlatformKit
import SodiumKit
import Synchronization

/// Keeps one account's session alive (docs/security.md#tok-1, #tok-2, #tok-4).
///
/// - A session inside the refresh window (less than `refreshWindow` left, or last confirmed longer
///   than `updateAge` ago) is refreshed through `GET /get-session` before use.
/// - Refresh and rotation hold an exclusive `flock` on the account's session lock. Inside the lock
///   the registry and the keyring are re-read: if another process refreshed moments ago, or the
///   token we used has already been replaced, that result is adopted without a new request.
/// - A rotated token is written to the keyring and read back before the lock is released.
/// - A 401 refreshes once and retries once; a second 401 marks the account `expired` (local data
///   and queued changes are kept).
/// - API-key accounts never refresh.
/// - The token read for a request is kept for the next one while the account's registry entry stays
///   the same (`TokenMemo`): a pull asks for a page at a time, and read the keyring once per page.
public struct SessionKeeper: Sendable {
    public let environment: AuthEnvironment
    /// Refresh when less than this is left of the session (default 1 day).
    public var refreshWindow: TimeInterval = 86_400
    /// Refresh when the server last confirmed the session longer ago than this (better-auth's
    /// update age, default 1 day).
    public var updateAge: TimeInterval = 86_400
    /// A refresh by any process this recently counts as fresh: no new request.
    public var minimumInterval: TimeInterval = 30
    /// For an explicit `auth refresh`: only a refresh this recent (by a concurrent process) is adopted.
    public var explicitInterval: TimeInterval = 2
    /// The last token this keeper read, for the next request.
    let memo = TokenMemo()

    public init(environment: AuthEnvironment) {
        self.environment = environment
    }

    /// The credential to use for `account`, refreshed first when it is inside the refresh window.
    public func credential(for account: Account) throws(OStackError) -> SessionCredential {
        let account = try current(account)
        try requireSignedIn(account)
        if account.credentialKind == .apiKey || !needsRefresh(account) {
            // A PIN set meanwhile seals the token without touching the registry (`pin.env`): a kept
            // token is used only while the account has none.
            if !environment.keyIsSealed(account), let kept = memo.token(for: account) { return kept }
            return try storedToken(account, keep: true)
        }
        return try refresh(
            account, force: false, replacing: nil, freshness: minimumInterval,
            seenRefreshedAt: account.sessionRefreshedAt)
    }

    /// `ostack auth refresh`: refresh now unless another process just did (or it is an API key).
    @discardableResult
    public func refreshNow(_ account: Account) throws(OStackError) -> Account {
        let account = try current(account)
        try requireSignedIn(account)
        if account.credentialKind == .apiKey { return account }
        _ = try refresh(
            account, force: true, replacing: nil, freshness: explicitInterval,
            seenRefreshedAt: account.sessionRefreshedAt)
        return try current(account)
    }

    /// Sends an authorised request for `account`: refresh-before-use, and on a 401 one refresh and
    /// one retry. `build` makes the request for a given bearer header.
    public func send(
        _ account: Account, _ build: (_ authorization: (String, String)) -> TransportRequest
    ) throws(OStackError) -> TransportResponse {
        let token = try credential(for: account)
        let first = try transmit(build(AuthAPI.authorization(token)), account: account)
        guard first.status == 401 else { return first }
        memo.forget()
        guard account.credentialKind == .session else {
            try markExpired(account)
            throw OStackError(.sessionExpired, context: .init(account: account.alias))
        }
        let fresh = try refresh(account, force: true, replacing: token, freshness: 0)
        let second = try transmit(build(AuthAPI.authorization(fresh)), account: account)
        if second.status == 401 {
            try markExpired(account)
            throw OStackError(.sessionExpired, context: .init(account: account.alias), detail: "401 after refresh")
        }
        return second
    }

    // MARK: Refresh

    func needsRefresh(_ account: Account) -> Bool {
        let now = environment.clock.now()
        if let refreshed = account.sessionRefreshedAt, now.timeIntervalSince(refreshed) < minimumInterval {
            return false
        }
        if let expiry = account.sessionExpiresAt, expiry.timeIntervalSince(now) < refreshWindow { return true }
        guard let refreshed = account.sessionRefreshedAt else { return true }
        return now.timeIntervalSince(refreshed) > updateAge
    }

    /// Single-flight refresh. `replacing`: the token that just got a 401 — if the keyring already
    /// holds a different one, another process rotated it: adopt it without a request.
    /// - Parameter seenRefreshedAt: the refresh time this process saw before waiting for the lock; if
    ///   it changed meanwhile, another process refreshed while we waited, and its result is adopted.
    func refresh(
        _ account: Account, force: Bool, replacing: SessionCredential?, freshness: TimeInterval,
        seenRefreshedAt: Date?? = .none
    ) throws(OStackError) -> SessionCredential {
        let lock: FileLock
        do {
            try SecureFileSystem.createDirectory(environment.layout.locksDirectory)
            lock = try FileLock(path: environment.sessionLockPath(account), timeout: environment.lockTimeout)
        } catch {
            throw OStackError(.storageFailure, detail: "taking the session lock: \(error)")
        }
        return try withExtendedLifetime(lock) { () throws(OStackError) -> SessionCredential in
            let latest = try current(account)
            try requireSignedIn(latest)
            let token = try storedToken(latest)
            if let replacing, !(token == replacing) { return token }  // rotated by someone else meanwhile
            if case .some(let seen) = seenRefreshedAt, latest.sessionRefreshedAt != seen {
                return token  // refreshed by another process while this one waited for the lock
            }
            let now = environment.clock.now()
            if let refreshed = latest.sessionRefreshedAt, now.timeIntervalSince(refreshed) < freshness,
                replacing == nil
            {
                return token  // another process refreshed moments ago
            }
            if !force && !needsRefresh(latest) { return token }

            let api = AuthAPI(account: latest, transport: environment.transport)
            guard let session = try api.getSession(token: token) else {
                try markExpired(latest)
                throw OStackError(.sessionExpired, context: .init(account: latest.alias), detail: "get-session: none")
            }
            // The session must still be this account's user: a token for someone else is never adopted.
            guard session.user.id == latest.userID else {
                throw OStackError(
                    .identityMismatch, context: .init(account: latest.alias, host: latest.server.authority),
                    detail: "get-session named another user on refresh")
            }
            var result = token
            if let offered = session.rotatedToken {
                // A rotated token is adopted only once it shows to be this user's (and, for an
                // organization's account, in that organization): `AuthAPI.verifiedRotation`.
                guard
                    let rotated = try api.verifiedRotation(
                        offered, userID: latest.userID, organization: latest.organization)
                else {
                    throw OStackError(
                        .identityMismatch, context: .init(account: latest.alias, host: latest.server.authority),
                        detail: "rotated token belongs to another user or organization")
                }
                try storeToken(rotated, for: latest)
                FailPoint.hit("refresh.after-rotate-write")
                result = rotated
                environment.audit(latest, "token.rotation")
            } else {
                environment.audit(latest, "token.refresh")
            }
            try environment.registry.update { (accounts: inout [Account]) throws(OStackError) in
                // Only while still signed in: a logout or removal meanwhile wins.
                guard let index = accounts.firstIndex(where: { $0.id == latest.id }),
                    accounts[index].sessionState == .signedIn
                else { return }
                accounts[index].sessionExpiresAt = session.expiresAt ?? accounts[index].sessionExpiresAt
                accounts[index].sessionRefreshedAt = now
            }
            return result
        }
    }

    // MARK: Helpers

    func transmit(_ request: TransportRequest, account: Account) throws(OStackError) -> TransportResponse {
        do {
            return try environment.transport.send(request)
        } catch {
            throw error.asOStackError(account: account.alias, host: account.server.authority)
        }
    }

    func current(_ account: Account) throws(OStackError) -> Account {
        // Every request asks: the account's own entry is decoded alone (as `status --short` does),
        // and the whole registry only when that cannot be done (another format, a hand-edited file).
        if let latest = try environment.registry.account(withID: account.id) { return latest }
        guard let latest = try environment.registry.accounts().first(where: { $0.id == account.id }) else {
            throw OStackError(.unknownAccount, context: .init(account: account.alias))
        }
        return latest
    }

    func requireSignedIn(_ account: Account) throws(OStackError) {
        try account.requireSignedIn()
    }

    /// The account's token as the keyring holds it now. `keep`: remembered for the next request of
    /// this keeper while the registry entry stays `account` (not a sealed one: see `TokenMemo`).
    func storedToken(_ account: Account, keep: Bool = false) throws(OStackError) -> SessionCredential {
        let kind: SecretKind = account.credentialKind == .apiKey ? .apiKey : .sessionToken
        guard let item = try environment.secrets.readUpgrading(environment.namespaces.key(account.id, kind)) else {
            throw OStackError(.notSignedIn, context: .init(account: account.alias), detail: "no token in the keyring")
        }
        guard TokenSeal.isSealed(item) else {
            let token = SessionCredential(item)
            if keep { memo.keep(token, for: account) }
            return token
        }
        // PIN-protected: the token opens only with the DEK the agent holds (locked → exit 4).
        return try TokenSeal.open(item, dek: try environment.databaseKey(account), account: account.id)
    }

    /// Writes a (rotated) token, sealed when the account has a PIN, and reads it back.
    func storeToken(_ token: SessionCredential, for account: Account) throws(OStackError) {
        memo.forget()
        let key = environment.namespaces.key(account.id, .sessionToken)
        let item =
            environment.keyIsSealed(account)
            ? try TokenSeal.seal(token, dek: try environment.databaseKey(account), account: account.id) : token.bytes
        try environment.secrets.write(item, for: key)
        guard let readBack = try environment.secrets.read(key), readBack == item else {
            throw OStackError(.keyringUnavailable, detail: "rotated token did not read back")
        }
    }

    func markExpired(_ account: Account) throws(OStackError) {
        try environment.registry.update { (accounts: inout [Account]) throws(OStackError) in
            guard let index = accounts.firstIndex(where: { $0.id == account.id }),
                accounts[index].sessionState == .signedIn
            else { return }
            accounts[index].sessionState = .expired
        }
        environment.audit(account, "session.expired", outcome: "failed")
    }
}

extension SessionKeeper {
    /// The organizations of the account's user (`org list`), asked with the account's session.
    public func organizations(of account: Account) throws(OStackError) -> [(id: String, name: String)] {
        let token = try credential(for: account)
        return try AuthAPI(account: account, transport: environment.transport).organizations(token: token)
    }
}

/// The token a `SessionKeeper` last read from the keyring, kept in this process's memory (where the
/// request holds it anyway) for as long as the account's registry entry is exactly the same.
/// Whatever replaces a token changes the entry as well: a refresh or rotation by any process sets
/// `sessionRefreshedAt`, a logout the session state, a new sign-in the whole entry. A token replaced
/// some other way meets a 401, which forgets it and reads the keyring again before the one retry.
/// A sealed (PIN-protected) token is never kept, and a kept one is not used once the account has a
/// PIN (set by another process meanwhile): a sealed token is opened with the agent's key on every
/// request, so `ostack lock` in another shell stops the next request as before. (An API key has no
/// retry: its 401 ends the account's session as before.)
final class TokenMemo: Sendable {
    private let slot = Mutex<(account: Account, token: SessionCredential)?>(nil)

    func token(for account: Account) -> SessionCredential? {
        slot.withLock { kept in kept.flatMap { $0.account == account ? $0.token : nil } }
    }

    func keep(_ token: SessionCredential, for account: Account) {
        slot.withLock { $0 = (account, token) }
    }

    func forget() {
        slot.withLock { $0 = nil }
    }
}
