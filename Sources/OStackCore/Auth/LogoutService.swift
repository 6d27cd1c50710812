import PlatformKit
import SodiumKit

/// `ostack logout` and `ostack accounts remove` (docs/security.md#tok-8).
public struct LogoutService: Sendable {
    public let environment: AuthEnvironment

    public init(environment: AuthEnvironment) {
        self.environment = environment
    }

    public struct Outcome: Sendable, Equatable {
        public var account: Account
        /// Whether the server confirmed the sign-out (best effort; local sign-out happens anyway).
        public var serverSignedOut: Bool
        /// The account was signed out before, with no credential left in the keyring: nothing was
        /// done (and no second sign-out event recorded).
        public var alreadySignedOut = false
    }

    /// Signs out: best-effort `POST /sign-out`, then the session token is deleted from the keyring
    /// and its absence verified, then the account is marked signed out. Data stays.
    public func logout(_ account: Account) throws(OStackError) -> Outcome {
        // Under the session lock, so a concurrent refresh cannot write a rotated token back.
        let lock = try sessionLock(account)
        defer { withExtendedLifetime(lock) {} }
        let kind: SecretKind = account.credentialKind == .apiKey ? .apiKey : .sessionToken
        let key = environment.namespaces.key(account.id, kind)
        var serverSignedOut = false
        let other = environment.namespaces.key(account.id, kind == .apiKey ? .sessionToken : .apiKey)
        let held = try environment.secrets.read(key) != nil
        if account.sessionState == .signedOut, !held, (try? environment.secrets.read(other)) == nil {
            return Outcome(account: account, serverSignedOut: false, alreadySignedOut: true)
        }
        if account.credentialKind == .session, held {
            // A locked account refuses auth commands (exit 4): its token opens only when unlocked.
            let token = try SessionKeeper(environment: environment).storedToken(account)
            do {
                try AuthAPI(account: account, transport: environment.transport).signOut(token: token)
                serverSignedOut = true
            } catch {
                serverSignedOut = false  // offline or refused: the local sign-out still happens
            }
        }
        // Both kinds go: a credential of the other kind left by an older sign-in is no less stale
        // (a session token among them is signed out too, when it can be read without the PIN).
        if kind == .apiKey, let stale = try? environment.secrets.read(other), !TokenSeal.isSealed(stale) {
            try? AuthAPI(account: account, transport: environment.transport).signOut(token: SessionCredential(stale))
        }
        for item in [key, other] {
            try environment.secrets.delete(item)
            guard try environment.secrets.read(item) == nil else {
                throw OStackError(.keyringUnavailable, detail: "a credential is still in the keyring")
            }
        }
        let updated = try environment.registry.update { (accounts: inout [Account]) throws(OStackError) -> Account in
            guard let index = accounts.firstIndex(where: { $0.id == account.id }) else {
                throw OStackError(.unknownAccount, context: .init(account: account.alias))
            }
            accounts[index].sessionState = .signedOut
            accounts[index].sessionExpiresAt = nil
            return accounts[index]
        }
        environment.audit(updated, "sign-out", details: ["server-told": serverSignedOut ? "yes" : "no"])
        return Outcome(account: updated, serverSignedOut: serverSignedOut)
    }

    /// Crypto-erase: every keyring item of the account is deleted and verified gone FIRST (without the
    /// DEK the database is unreadable), then its files, then its registry entry. Refuses while
    /// `unsyncedChanges > 0` unless `force`. A locked or missing keyring stops it before anything
    /// is deleted.
    public func remove(_ account: Account, unsyncedChanges: Int, force: Bool) throws(OStackError) {
        if unsyncedChanges > 0 && !force {
            throw OStackError(.unsyncedChanges, context: .init(account: account.alias, count: unsyncedChanges))
        }
        let lock = try sessionLock(account)
        // Not while a PIN operation runs on it (a `pin set` showing its recovery key would commit
        // into whatever account is registered under this id afterwards).
        let pinLock = try PINLock.acquire(environment, account)
        defer { withExtendedLifetime((lock, pinLock)) {} }
        let namespace = environment.namespaces.account(account.id)
        AnchorWrites.settle()  // no anchor this process still writes comes back after the erase
        // A certain listing (a locked or missing collection throws: nothing is deleted).
        var items = try environment.secrets.list(namespace: namespace)
        // Items another home claimed and still uses (homes that shared a namespace before markers
        // existed) are that home's: they stay, its session is not signed out (HomeClaim).
        let anotherHomes: Bool
        if case .other(_, inUse: true) = try HomeClaim(environment: environment).owner(of: account.id) {
            anotherHomes = true
            items = []
        } else {
            anotherHomes = false
        }
        // The agent's unlocked copy of the DEK goes first (it would open a copy of the database); an
        // agent that cannot be reached safely stops the removal before anything is deleted.
        try environment.agent?.forgetChecked(account.id)
        // Marked first, so that an interrupted removal is told apart from damage (`doctor`) and the
        // next `accounts remove` finishes it without counting changes it can no longer read.
        let directory = environment.layout.accountDirectory(account.dataDirectory)
        do {
            try SecureFileSystem.createDirectory(directory)
            try SecureFileSystem.writeAtomically(
                Array("{\"version\":1}".utf8), to: Self.removalMarker(environment, account))
        } catch {
            throw OStackError(.storageFailure, detail: "marking the removal: \(error)")
        }
        FailPoint.hit("remove.after-marker")
        if !anotherHomes, account.sessionState == .signedIn, account.credentialKind == .session,
            let token = try? SessionKeeper(environment: environment).storedToken(account)
        {
            try? AuthAPI(account: account, transport: environment.transport).signOut(token: token)  // best effort
        }
        // Each verified (docs/security.md#kr-7). The `home` item last: while it is there, another
        // home's sign-in to this account is refused (this registry still lists it), so none can
        // start on the key material being deleted (a reviewer's finding: in the keyring's listing
        // order the marker could go first, and a sign-in then reused the `db-key` deleted next).
        for item in items.filter({ $0.kind != .home }) + items.filter({ $0.kind == .home }) {
            if item.kind == .home { FailPoint.hit("remove.before-home-item") }
            try environment.secrets.delete(item)
        }
        let remaining = anotherHomes ? [] : try environment.secrets.list(namespace: namespace)
        guard remaining.isEmpty else {
            throw OStackError(.keyringUnavailable, detail: "keyring items remain after removal")
        }
        FailPoint.hit("remove.after-keyring")
        do {
            try SecureFileSystem.removeTree(environment.layout.accountDirectory(account.dataDirectory))
            try SecureFileSystem.removeFile(environment.sessionLockPath(account))
        } catch {
            throw OStackError(.storageFailure, detail: "removing account files: \(error)")
        }
        try environment.registry.update { (accounts: inout [Account]) throws(OStackError) in
            accounts.removeAll { $0.id == account.id }
        }
        try environment.configuration.update { configuration in
            if configuration.defaultAccount == account.id { configuration.defaultAccount = nil }
        }
        environment.auditGlobal(
            "account.removed",
            details: ["account": account.id.rawValue, "forced": force && unsyncedChanges > 0 ? "yes" : "no"])
    }

    /// `removing.json` in the account directory: an `accounts remove` has started.
    public static func removalMarker(_ environment: AuthEnvironment, _ account: Account) -> String {
        environment.layout.accountDirectory(account.dataDirectory) + "/removing.json"
    }

    /// Whether an `accounts remove` of `account` was interrupted.
    public static func removalPending(_ environment: AuthEnvironment, _ account: Account) -> Bool {
        SecureFileSystem.exists(removalMarker(environment, account))
    }

    func sessionLock(_ account: Account) throws(OStackError) -> FileLock {
        do {
            try SecureFileSystem.createDirectory(environment.layout.locksDirectory)
            return try FileLock(path: environment.sessionLockPath(account), timeout: environment.lockTimeout)
        } catch {
            throw OStackError(.storageFailure, detail: "taking the session lock: \(error)")
        }
    }
}
