import FoundationEssentials
import PlatformKit
import SodiumKit

/// `ostack login`: sign in under the guest namespace, learn who signed in, migrate the session to
/// the account namespace, register the account and create its database (docs/security.md#tok-6).
///
/// Every step is journaled (`LoginJournal`) so that `kill -9` at any point ends, after the next
/// command, in one consistent account — or none — and never leaves a guest item behind.
public struct LoginService: Sendable {
    public let environment: AuthEnvironment

    public init(environment: AuthEnvironment) {
        self.environment = environment
    }

    public struct Request: Sendable {
        public var server: ServerURL
        public var email: String
        public var credential: LoginCredential
        public var alias: String?
        public var makeDefault: Bool
        /// After a PIN lockout: drop the account's local data and keys and start afresh (confirmed).
        public var rebuildLockedOutData = false
        /// The environment and organization to work in: each is an account context of its own.
        public var environment: String?
        public var organization: String?
        /// The second factor, for a user with two-factor sign-in.
        public var twoFactor = TwoFactorInput()

        public init(server: ServerURL, email: String, credential: LoginCredential, alias: String?, makeDefault: Bool) {
            self.server = server
            self.email = email
            self.credential = credential
            self.alias = alias
            self.makeDefault = makeDefault
        }
    }

    public func login(_ request: Request) throws(OStackError) -> Account {
        if let alias = request.alias {
            try AccountsService.validateAlias(alias)
            // Refuse a taken alias before signing in (another server or e-mail already uses it).
            if let owner = try environment.registry.accounts().first(where: { $0.alias == alias }),
                owner.server != request.server || owner.email.lowercased() != request.email.lowercased()
            {
                throw OStackError(.invalidInput, context: .init(suggestion: "The alias '\(alias)' is already used."))
            }
        }
        var discovery = try AuthAPI(server: request.server, transport: environment.transport).discover().discovery
        if let environmentID = request.environment {
            discovery = try AuthAPI(server: request.server, transport: environment.transport, routes: discovery.routes)
                .discoverEnvironment(environmentID)
        }
        let api = AuthAPI(server: request.server, transport: environment.transport, routes: discovery.routes)
        do {
            return try signIn(request, api: api, routes: discovery.routes)
        } catch {
            abandonFailedSignIn()  // a sign-in that never became an account: signed out, guest emptied
            if error.code == .wrongCredentials || error.code == .wrongTwoFactorCode {
                // No account to file it under: the global trail (the server's host only).
                environment.auditGlobal("sign-in", outcome: "failed", details: ["host": request.server.authority])
            }
            throw error
        }
    }

    func signIn(_ request: Request, api: AuthAPI, routes: ServerRoutes = ServerRoutes()) throws(OStackError) -> Account
    {
        return try withLoginLock { () throws(OStackError) -> Account in
            try recoverLocked()
            let kind: Account.CredentialKind
            switch request.credential {
            case .password: kind = .session
            case .apiKey: kind = .apiKey
            }
            var journal = LoginJournal(
                phase: .signingIn, server: request.server.absoluteString, credentialKind: kind, alias: request.alias,
                makeDefault: request.makeDefault)
            journal.rebuild = request.rebuildLockedOutData
            journal.routes = routes
            journal.environment = request.environment
            journal.organization = request.organization
            try journal.save(environment.layout)
            FailPoint.hit("login.after-journal")

            // 1. Sign in (with a second factor when the server asks), then keep the token in the guest namespace.
            let token: SessionCredential
            // The user the sign-in answer named: get-session must name the same one.
            var signedInUser: String?
            do throws(OStackError) {
                switch request.credential {
                case .password(let password):
                    let result: SignInResult
                    switch try api.signIn(email: request.email, password: password) {
                    case .signedIn(let signedIn): result = signedIn
                    case .twoFactor(let methods, let challenge):
                        result = try completeTwoFactor(
                            methods: methods, challenge: challenge, request: request, api: api)
                    }
                    token = result.token
                    signedInUser = result.user.id
                case .apiKey(let key): token = SessionCredential(key)
                }
            } catch {
                try? LoginJournal.clear(environment.layout)  // nothing was written yet
                throw error
            }
            let guestKey = environment.guestKey(Self.secretKind(kind))
            try environment.secrets.write(token.bytes, for: guestKey)
            FailPoint.hit("login.after-guest-write")
            if let organization = request.organization {
                do throws(OStackError) {
                    try api.setActiveOrganization(organization, token: token)
                } catch {
                    if kind == .session { try? api.signOut(token: token) }
                    try? environment.secrets.delete(guestKey)
                    try? LoginJournal.clear(environment.layout)
                    throw error
                }
            }

            // 2. Who signed in? A session names its user; an API key is checked on the metadata route.
            guard let session = try identify(token, kind: kind, request: request, api: api, routes: routes) else {
                try? abandonGuest(journal)  // signs out a session the server would not name
                throw OStackError(.wrongCredentials, context: .init(host: request.server.authority))
            }
            // Identity is pinned at sign-in: a get-session naming someone else is never registered.
            if let signedInUser, session.user.id != signedInUser {
                try? abandonGuest(journal)
                throw OStackError(
                    .identityMismatch, context: .init(host: request.server.authority),
                    detail: "get-session named another user than sign-in")
            }
            // An organization's account: the session must be in it (a 2xx from set-active is no proof).
            if kind == .session, let organization = request.organization,
                session.activeOrganizationID != organization
            {
                try? abandonGuest(journal)
                throw OStackError(
                    .identityMismatch, context: .init(host: request.server.authority),
                    detail: "the session is not in the organization asked for")
            }
            // An API key is the user's own and does not rotate: a token a `get-session` made with it
            // hands out is not stored in its place.
            if kind == .session, let offered = session.rotatedToken {
                // Adopted only once the new token itself shows to be the same user's (and organization's).
                guard
                    let rotated = try api.verifiedRotation(
                        offered, userID: session.user.id, organization: request.organization)
                else {
                    try? abandonGuest(journal)
                    throw OStackError(
                        .identityMismatch, context: .init(host: request.server.authority),
                        detail: "rotated token belongs to another user")
                }
                try environment.secrets.write(rotated.bytes, for: guestKey)
            }
            let accountID = try AccountID(
                server: request.server, userID: session.user.id, environment: request.environment,
                organization: request.organization)
            // The account's namespace must be this home's before anything is written there (HomeClaim),
            // claimed under a lock every home of this user takes, held until the registry lists it.
            let claim = HomeClaim(environment: environment)
            let claimLock: FileLock?
            do throws(OStackError) {
                claimLock = try claim.lock(accountID)
                try claim.claim(accountID)
            } catch {
                try? abandonGuest(journal)
                throw error
            }
            defer { withExtendedLifetime(claimLock) {} }
            FailPoint.hit("login.after-claim")
            journal.phase = .migrating
            journal.accountID = accountID
            journal.userID = session.user.id
            journal.email = session.user.email.isEmpty ? request.email : session.user.email
            journal.displayName = session.user.name
            journal.expiresAt = kind == .session ? session.expiresAt : nil
            try journal.save(environment.layout)
            FailPoint.hit("login.after-identify")

            // 3. Migrate, register, provision — the same code that resumes after a crash.
            let account = try finish(journal)
            environment.audit(account, "migration.guest-to-account")
            environment.audit(account, "sign-in", details: ["credential": kind.rawValue])
            return account
        }
    }

    /// Finishes or cleans a login interrupted by a crash. Cheap when there is nothing to do (one
    /// `stat`), so every command can call it first.
    public func recoverInterruptedLogin() throws(OStackError) {
        guard SecureFileSystem.exists(LoginJournal.path(environment.layout)) else { return }
        try withLoginLock { () throws(OStackError) in try recoverLocked() }
    }

    // MARK: Steps

    private func recoverLocked() throws(OStackError) {
        let loaded: LoginJournal?
        do {
            loaded = try LoginJournal.load(environment.layout)
        } catch  where error.code == .unsupportedFormat {
            try abandonUnreadableJournal()
            return
        }
        guard let journal = loaded else { return }
        switch journal.phase {
        case .signingIn:
            // The account is unknown: undo — sign the new session out, empty the guest namespace
            // (LoginCleanup.swift). The user signs in again.
            try abandonGuest(journal)
        case .migrating:
            // Under the claim lock, and only while no other home that lists the account has the
            // namespace: since the crash (this home's registry did not list the account yet) another
            // home may have taken it over, and finishing would share its items (a reviewer's test).
            let claim = HomeClaim(environment: environment)
            let claimLock = try journal.accountID.flatMap { (id) throws(OStackError) in try claim.lock(id) }
            defer { withExtendedLifetime(claimLock) {} }
            if let id = journal.accountID, case .other(_, inUse: true) = try claim.owner(of: id) {
                try abandonGuest(journal)
                return
            }
            _ = try finish(journal)
        }
    }

    /// Copy → verify → delete guest → register → provision → clear journal. Idempotent.
    private func finish(_ journal: LoginJournal) throws(OStackError) -> Account {
        guard let accountID = journal.accountID, let userID = journal.userID else {
            throw OStackError(.unsupportedFormat, detail: "login journal without an account")
        }
        let server = try ServerURL(parsing: journal.server, allowInsecureHTTP: true)
        let kind = Self.secretKind(journal.credentialKind)
        let secrets = environment.secrets
        var guestKey = environment.guestKey(kind)
        let accountKey = environment.namespaces.key(accountID, kind)

        var found = try secrets.read(guestKey)
        // A journal an earlier version left names a token in the item it used (`guest`).
        if found == nil, let earlier = try secrets.read(environment.namespaces.legacyGuestKey(kind)) {
            guestKey = environment.namespaces.legacyGuestKey(kind)
            found = earlier
        }
        if let guestToken = found {
            if let existing = try environment.registry.accounts().first(where: { $0.id == accountID }),
                environment.keyIsSealed(existing), environment.agent?.isUnlocked(existing.id) != true
            {
                try handleSealedAccount(existing, journal: journal, guestKey: guestKey)
            }
            // A PIN-protected account keeps its token sealed under its DEK (it must be unlocked).
            var item = guestToken
            if let existing = try environment.registry.accounts().first(where: { $0.id == accountID }),
                environment.keyIsSealed(existing)
            {
                item = try TokenSeal.seal(
                    SessionCredential(guestToken), dek: try environment.databaseKey(existing), account: accountID)
            }
            try secrets.write(item, for: accountKey)
            FailPoint.hit("login.after-copy")
            guard let readBack = try secrets.read(accountKey), readBack == item else {
                throw OStackError(.keyringUnavailable, detail: "the copied session did not read back")
            }
            try secrets.delete(guestKey)
            FailPoint.hit("login.after-guest-delete")
        } else if try secrets.read(accountKey) == nil {
            // Neither copy exists: nothing to finish.
            try LoginJournal.clear(environment.layout)
            throw OStackError(.notSignedIn, detail: "interrupted login lost its session")
        }

        // Register (or update) the account, keeping an existing account's alias and data.
        let now = environment.clock.now()
        let account = try environment.registry.update { (accounts: inout [Account]) throws(OStackError) -> Account in
            if let index = accounts.firstIndex(where: { $0.id == accountID }) {
                accounts[index].sessionState = .signedIn
                accounts[index].sessionExpiresAt = journal.expiresAt
                accounts[index].sessionRefreshedAt = now
                accounts[index].lastUsedAt = now
                accounts[index].credentialKind = journal.credentialKind
                accounts[index].routes = journal.routes ?? accounts[index].routes
                if let email = journal.email { accounts[index].email = email }
                if let name = journal.displayName { accounts[index].displayName = name }
                return accounts[index]
            }
            let alias = try Self.uniqueAlias(
                preferred: journal.alias, email: journal.email ?? userID, host: server.host,
                taken: Set(accounts.map(\.alias)))
            var account = Account(
                id: accountID, alias: alias, server: server, userID: userID, email: journal.email ?? "",
                displayName: journal.displayName ?? "", createdAt: now, lastUsedAt: now,
                keyringBackend: environment.keyringBackend, dataDirectory: Self.newDirectoryName(),
                credentialKind: journal.credentialKind, sessionState: .signedIn, sessionExpiresAt: journal.expiresAt,
                sessionRefreshedAt: now)
            account.routes = journal.routes
            account.environment = journal.environment
            account.organization = journal.organization
            accounts.append(account)
            return account
        }
        FailPoint.hit("login.after-register")
        try dropStaleCredential(account, keeping: kind)

        try provisionStorage(account)
        FailPoint.hit("login.after-provision")

        if journal.makeDefault {
            try environment.configuration.update {
                $0.defaultAccount = account.id; $0.lastServer = server.absoluteString
            }
        } else {
            try environment.configuration.update { $0.lastServer = server.absoluteString }
        }
        try LoginJournal.clear(environment.layout)
        return account
    }

    /// Re-login to a PIN-protected account that is not unlocked: while its PIN still works, unlock
    /// first (locked); after a lockout, only with confirmation, drop its local data and keys so the
    /// sign-in rebuilds them (the sign-in is abandoned otherwise).
    func handleSealedAccount(_ account: Account, journal: LoginJournal, guestKey: SecretKey) throws(OStackError) {
        // The refused re-login's new session is signed out too, not just forgotten (LoginCleanup.swift).
        let abandon = { () throws(OStackError) in try self.abandonGuest(journal) }
        if environment.hasPIN(account) {
            try abandon()
            throw OStackError(.locked, context: .init(account: account.alias), detail: "re-login of a locked account")
        }
        guard journal.rebuild == true else {
            try abandon()
            throw OStackError(.pinLockedOut, context: .init(account: account.alias), detail: "rebuild not confirmed")
        }
        let namespace = environment.namespaces.account(account.id)
        for key in try environment.secrets.list(namespace: namespace) { try environment.secrets.delete(key) }
        let directory = environment.layout.accountDirectory(account.dataDirectory)
        do {
            for name in [
                "pin.env", "recovery.env", "pin.env.new", "recovery.env.new", "pin-journal.json", "db-key.pending",
                "data.db", "data.db-wal", "data.db-shm",
            ] {
                try SecureFileSystem.removeFile(directory + "/" + name)
            }
        } catch {
            throw OStackError(.storageFailure, detail: "rebuilding local data: \(error)")
        }
    }

    /// Creates the account directory, its DEK (keyring `db-key`) and its database on first sign-in;
    /// on re-login opens the existing database with the existing key (data is kept).
    func provisionStorage(_ account: Account) throws(OStackError) {
        let directory = environment.layout.accountDirectory(account.dataDirectory)
        do {
            try SecureFileSystem.createDirectory(directory)
        } catch {
            throw OStackError(.storageFailure, detail: "creating the account directory: \(error)")
        }
        let keyKey = environment.namespaces.key(account.id, .dbKey)
        let databasePath = environment.databasePath(account)
        if let existing = try environment.secrets.readUpgrading(keyKey) {
            try environment.provisionDatabase(databasePath, AccountDataKey(existing))
            return
        }
        if SecureFileSystem.exists(directory + "/pin.env") || SecureFileSystem.exists(directory + "/recovery.env") {
            return  // The DEK is sealed behind the PIN; the database exists and stays as it is.
        }
        if SecureFileSystem.exists(databasePath) {
            // A database without its key cannot be read: keep the file, report it (never re-key blindly).
            throw OStackError(
                .storageUnreadable, context: .init(account: account.alias), detail: "database present, db-key missing")
        }
        let key = AccountDataKey.generate()
        try environment.secrets.write(key.bytes, for: keyKey)
        guard let readBack = try environment.secrets.read(keyKey), readBack == key.bytes else {
            throw OStackError(.keyringUnavailable, detail: "the database key did not read back")
        }
        try environment.provisionDatabase(databasePath, key)
    }

    // MARK: Helpers

    private func withLoginLock<R>(_ body: () throws(OStackError) -> R) throws(OStackError) -> R {
        let lock: FileLock
        do {
            try environment.layout.createDirectories()
            lock = try FileLock(path: environment.loginLockPath, timeout: environment.lockTimeout)
        } catch {
            throw OStackError(.storageFailure, detail: "taking the login lock: \(error)")
        }
        return try withExtendedLifetime(lock) { () throws(OStackError) -> R in try body() }
    }

    /// The account signed in before with the other kind of credential (a password, now an API key,
    /// or the reverse): that credential is stale. Its session is ended on the server (best effort;
    /// a sealed one cannot be read here) and the item deleted, so `logout` and `doctor` find only
    /// the credential in use.
    func dropStaleCredential(_ account: Account, keeping kind: SecretKind) throws(OStackError) {
        let other: SecretKind = kind == .apiKey ? .sessionToken : .apiKey
        let key = environment.namespaces.key(account.id, other)
        guard let stale = try environment.secrets.read(key) else { return }
        if other == .sessionToken, !environment.keyIsSealed(account) {
            try? AuthAPI(account: account, transport: environment.transport).signOut(token: SessionCredential(stale))
        }
        try environment.secrets.delete(key)
    }

    static func secretKind(_ kind: Account.CredentialKind) -> SecretKind {
        kind == .apiKey ? .apiKey : .sessionToken
    }

    /// `acct-` and 16 random hex digits.
    static func newDirectoryName() -> String {
        RandomID.make(prefix: "acct-", count: 16, alphabet: RandomID.hexDigits)
    }

    /// The alias: the preferred one, else the e-mail's local part, made unique with the host or a number.
    static func uniqueAlias(preferred: String?, email: String, host: String, taken: Set<String>) throws(OStackError)
        -> String
    {
        if let preferred {
            guard !taken.contains(preferred) else {
                throw OStackError(
                    .invalidInput, context: .init(suggestion: "The alias '\(preferred)' is already used."))
            }
            return preferred
        }
        // Made to pass `AccountsService.validateAlias` as an alias given by hand must: letters,
        // digits, '.', '_', '-', not starting with '-', at most 64 characters.
        let local = email.split(separator: "@").first.map(String.init) ?? "account"
        let base = String(
            local.filter { $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }.drop { $0 == "-" }
                .prefix(40))
        let start = base.isEmpty ? "account" : base
        if !taken.contains(start) { return start }
        let label = String((host.split(separator: ".").first ?? "").filter { $0.isASCII && ($0.isLetter || $0.isNumber) }.prefix(20))
        let withHost = "\(start)-\(label.isEmpty ? "server" : label)"
        if !taken.contains(withHost) { return withHost }
        var counter = 2
        while taken.contains("\(start)-\(counter)") { counter += 1 }
        return "\(start)-\(counter)"
    }
}
