import Glibc
import KeyringKit
import FoundationEssentials
@testable import OStackCore
import OStackTestSupport
import PlatformKit
import SodiumKit
import Synchronization
import Testing

/// Unit tests of login, refresh and logout against an in-memory keyring and a scripted server.
/// (End-to-end tests drive the real binary against the real dev server and gnome-keyring.)
@Suite struct LoginServiceTests {
    let home = TemporaryDirectory()
    let keyring = InMemoryKeyring()
    var secrets: KeyringSecretStore { KeyringSecretStore(keyring: keyring) }
    let server = FakeObjectStack()
    let provisioned = ProvisionLog()
    let namespaces = KeyringNamespaces(prefix: "test")

    var environment: AuthEnvironment {
        let provisioned = self.provisioned
        return AuthEnvironment(
            layout: FileLayout(environment: ["OSTACK_HOME": home.path], userID: 1), secrets: secrets,
            namespaces: namespaces, transport: server, keyringBackend: "secret-service",
            provisionDatabase: { path, _ in provisioned.record(path) })
    }

    func request(_ email: String = "alice@example.com", _ password: String = "alice-pass", alias: String? = nil)
        throws -> LoginService.Request
    {
        LoginService.Request(
            server: try ServerURL(parsing: "http://127.0.0.1:9"), email: email,
            credential: .password(SecretBytes(copying: Array(password.utf8))), alias: alias, makeDefault: true)
    }

    @Test func signInRegistersTheAccountAndLeavesNothingInTheGuestNamespace() throws {
        let account = try LoginService(environment: environment).login(request(alias: "work"))
        #expect(account.id.rawValue == "127.0.0.1:9::usr_alice")
        #expect(account.alias == "work")
        #expect(account.sessionState == .signedIn)
        #expect(account.sessionExpiresAt != nil)
        #expect(try secrets.list(namespace: namespaces.guest).isEmpty)
        let kinds = Set(try secrets.list(namespace: namespaces.account(account.id)).map(\.kind))
        #expect(kinds == [.sessionToken, .dbKey, .home])  // `home`: the namespace is this home's (HomeClaim)
        #expect(provisioned.count == 1)
        #expect(try environment.configuration.load().defaultAccount == account.id)
        #expect(!SecureFileSystem.exists(environment.layout.stateDirectory + "/login-journal.json"))
    }

    @Test func aTakenAliasIsRefusedBeforeSigningIn() throws {
        _ = try LoginService(environment: environment).login(request(alias: "work"))
        let signIns = server.state.withLock { $0.signInCount }
        let error = #expect(throws: OStackError.self) {
            try LoginService(environment: environment).login(request("bob@example.com", "bob-pass", alias: "work"))
        }
        #expect(error?.code == .invalidInput)
        #expect(server.state.withLock { $0.signInCount } == signIns)
        #expect(!SecureFileSystem.exists(environment.layout.stateDirectory + "/login-journal.json"))
    }

    @Test func wrongPasswordIsRefusedAndLeavesNoTrace() throws {
        let error = #expect(throws: OStackError.self) {
            try LoginService(environment: environment).login(request("alice@example.com", "nope"))
        }
        #expect(error?.code == .wrongCredentials)
        // No credential, token or account remains: only the global audit trail's key and anchor,
        // because the failed sign-in is recorded there (docs/audit.md, "Global trail").
        #expect(keyring.count == 1)
        #expect(try secrets.list(namespace: "test:guest").isEmpty)
        #expect(try secrets.list(namespace: "test:global").map(\.kind) == [.auditAnchor])
        let global = GlobalAuditTrail(layout: environment.layout, secrets: secrets, namespaces: namespaces)
        #expect(global.entries().map { "\($0.event) \($0.outcome)" } == ["sign-in failed"])
        #expect(try global.verify().intact)
        #expect(try environment.registry.accounts().isEmpty)
    }

    @Test func reloginKeepsAliasDataAndKey() throws {
        let service = LoginService(environment: environment)
        let first = try service.login(request(alias: "work"))
        let key = try #require(try secrets.read(namespaces.key(first.id, .dbKey)))
        let second = try service.login(request())
        #expect(second.alias == "work")
        #expect(second.dataDirectory == first.dataDirectory)
        #expect(try secrets.read(namespaces.key(first.id, .dbKey)) == key)
        #expect(try environment.registry.accounts().count == 1)
    }

    @Test func lockedKeyringStopsLoginBeforeAnythingIsRegistered() throws {
        keyring.fail(with: .locked)
        let error = #expect(throws: OStackError.self) { try LoginService(environment: environment).login(request()) }
        #expect(error?.code == .keyringLocked)
        #expect(try environment.registry.accounts().isEmpty)
    }

    /// A session keeper that refreshes whenever asked (no minimum interval, no freshness window).
    func refreshingKeeper() -> SessionKeeper {
        var keeper = SessionKeeper(environment: environment)
        keeper.minimumInterval = 0
        keeper.explicitInterval = 0
        return keeper
    }

    @Test func rotationAdoptsTheNewTokenAndPersistsIt() throws {
        let keeper = refreshingKeeper()
        let account = try LoginService(environment: environment).login(request())
        let before = try #require(try secrets.read(namespaces.key(account.id, .sessionToken)))
        server.state.withLock { $0.rotate = true }
        try keeper.refreshNow(account)
        let after = try #require(try secrets.read(namespaces.key(account.id, .sessionToken)))
        #expect(!(after == before))
        // The new token works; the old one was revoked by the server.
        let response = try keeper.send(account) {
            TransportRequest(method: "GET", url: "http://127.0.0.1:9/api/v1/data/task", headers: [$0])
        }
        #expect(response.status == 200)
    }

    /// Issue 14, defect 9: a get-session naming another user than the sign-in is never registered;
    /// the session is signed out and nothing stays in the guest namespace.
    @Test func aSessionNamingAnotherUserIsNeverRegistered() throws {
        server.state.withLock { $0.sessionUser = "usr_bob" }
        let error = #expect(throws: OStackError.self) { try LoginService(environment: environment).login(request()) }
        #expect(error?.code == .identityMismatch)
        #expect(try environment.registry.accounts().isEmpty)
        #expect(try secrets.list(namespace: namespaces.guest).isEmpty)
        #expect(server.state.withLock { $0.signOutCount } == 1)
        #expect(server.state.withLock { $0.tokens.isEmpty })
        #expect(!SecureFileSystem.exists(environment.layout.stateDirectory + "/login-journal.json"))
    }

    /// A sign-in whose rotated token is another user's registers nothing: the first rotation's, or
    /// (issue 14, defect 9) one the check of the first hands out in a header once more.
    @Test(arguments: [false, true])
    func aLoginWhoseRotatedTokenIsAnotherUsersRegistersNothing(secondRotation: Bool) throws {
        server.state.withLock {
            $0.rotate = true
            if secondRotation { $0.rotateAgainTo = "usr_bob" } else { $0.rotatedOwner = "usr_bob" }
        }
        let error = #expect(throws: OStackError.self) { try LoginService(environment: environment).login(request()) }
        #expect(error?.code == .identityMismatch)
        #expect(try environment.registry.accounts().isEmpty)
        #expect(try secrets.list(namespace: namespaces.guest).isEmpty)
    }

    /// An alias made from an e-mail address passes the rule for aliases given by hand (letters,
    /// digits, '.', '_', '-', no leading '-', at most 64), whatever the address and the host.
    @Test(arguments: [
        ("-bob@example.com", "crm.example.com"), ("bob@example.com", "[::1]"),
        ("bob@example.com", String(repeating: "h", count: 63) + ".example.com"), ("@example.com", "localhost"),
        ("--@example.com", "127.0.0.1"), (String(repeating: "x", count: 80) + "@example.com", "a.b"),
    ])
    func aMadeAliasPassesTheAliasRule(email: String, host: String) throws {
        for taken in [[], ["bob", "account", String(repeating: "x", count: 40)]] as [Set<String>] {
            let local = String(email.prefix { $0 != "@" }.filter { $0 != "-" })
            let alias = try LoginService.uniqueAlias(
                preferred: nil, email: email, host: host, taken: taken.union(local.isEmpty ? [] : [local]))
            #expect((try? AccountsService.validateAlias(alias)) != nil, "\(alias)")
        }
    }

    /// A refresh whose get-session (and rotated token) is another user's adopts nothing.
    @Test func aRefreshNamingAnotherUserAdoptsNothing() throws {
        let keeper = refreshingKeeper()
        let account = try LoginService(environment: environment).login(request())
        let before = try #require(try secrets.read(namespaces.key(account.id, .sessionToken)))
        server.state.withLock {
            $0.rotate = true
            $0.sessionUser = "usr_bob"
        }
        let error = #expect(throws: OStackError.self) { try keeper.refreshNow(account) }
        #expect(error?.code == .identityMismatch)
        let after = try #require(try secrets.read(namespaces.key(account.id, .sessionToken)))
        #expect(after == before)
        #expect(try environment.registry.accounts().first?.sessionState == .signedIn)

        // The body names the right user but the rotated token is someone else's: checked with the
        // new token before it is adopted.
        server.state.withLock {
            $0.sessionUser = nil
            $0.rotate = false
        }
        let relogged = try LoginService(environment: environment).login(request())
        let kept = try #require(try secrets.read(namespaces.key(relogged.id, .sessionToken)))
        server.state.withLock {
            $0.rotate = true
            $0.rotatedOwner = "usr_bob"
        }
        let swapped = #expect(throws: OStackError.self) { try keeper.refreshNow(relogged) }
        #expect(swapped?.code == .identityMismatch)
        #expect(try secrets.read(namespaces.key(relogged.id, .sessionToken)) == kept)
    }

    /// Issue 14, defect 9: the check of a rotated token rotates once more, to another user's token.
    /// That token is checked too and never adopted, at a refresh or at sign-in.
    @Test func aSecondRotationToAnotherUsersTokenIsNeverAdopted() throws {
        let keeper = refreshingKeeper()
        let account = try LoginService(environment: environment).login(request())
        let before = try #require(try secrets.read(namespaces.key(account.id, .sessionToken)))
        server.state.withLock {
            $0.rotate = true
            $0.rotateAgainTo = "usr_bob"
        }
        let error = #expect(throws: OStackError.self) { try keeper.refreshNow(account) }
        #expect(error?.code == .identityMismatch)
        #expect(try secrets.read(namespaces.key(account.id, .sessionToken)) == before)
    }

    /// A check that rotates once more to the same user's token: that newest token, checked, is kept
    /// and works (the server revoked the ones before it).
    @Test func aRotationChainOfTheSameUserKeepsTheNewestCheckedToken() throws {
        let keeper = refreshingKeeper()
        let account = try LoginService(environment: environment).login(request())
        server.state.withLock {
            $0.rotate = true
            $0.rotateAgainTo = "usr_alice"
        }
        try keeper.refreshNow(account)
        #expect(server.state.withLock { $0.tokens.count } == 1)
        let response = try keeper.send(account) {
            TransportRequest(method: "GET", url: "http://127.0.0.1:9/api/v1/data/task", headers: [$0])
        }
        #expect(response.status == 200)
    }

    @Test func aRecentRefreshByAnotherProcessIsAdoptedWithoutARequest() throws {
        let account = try LoginService(environment: environment).login(request())
        let before = server.state.withLock { $0.getSessionCount }
        var keeper = SessionKeeper(environment: environment)
        keeper.explicitInterval = 60
        try keeper.refreshNow(account)  // refreshed moments ago by login
        #expect(server.state.withLock { $0.getSessionCount } == before)
    }

    @Test func aRefreshThatHappenedWhileWaitingForTheLockIsAdopted() throws {
        let keeper = SessionKeeper(environment: environment)
        _ = try LoginService(environment: environment).login(request())
        let seen = try #require(try environment.registry.accounts().first)
        // Another process refreshes while this one waits for the lock.
        try environment.registry.update { (accounts: inout [Account]) throws(OStackError) in
            accounts[0].sessionRefreshedAt = Date(timeIntervalSinceNow: -100)
        }
        let before = server.state.withLock { $0.getSessionCount }
        _ = try keeper.refresh(
            seen, force: true, replacing: nil, freshness: 0, seenRefreshedAt: seen.sessionRefreshedAt)
        #expect(server.state.withLock { $0.getSessionCount } == before)  // adopted, no request
        let latest = try #require(try environment.registry.accounts().first)
        _ = try keeper.refresh(
            latest, force: true, replacing: nil, freshness: 0, seenRefreshedAt: latest.sessionRefreshedAt)
        #expect(server.state.withLock { $0.getSessionCount } == before + 1)  // nobody else did: a real refresh
    }

    /// One `GET /api/v1/data/task` through `keeper`: the answer's status.
    static func listTasks(_ keeper: SessionKeeper, _ account: Account) throws -> Int {
        try keeper.send(account) {
            TransportRequest(method: "GET", url: "http://127.0.0.1:9/api/v1/data/task", headers: [$0])
        }.status
    }

    /// Requests after the first take the token this keeper read (no keyring round trip per page of
    /// a pull) while the registry entry is unchanged; a change to the entry reads it again.
    @Test func theTokenIsReadOnceWhileTheRegistryEntryStaysTheSame() throws {
        let keeper = SessionKeeper(environment: environment)
        let account = try LoginService(environment: environment).login(request())
        func get() throws -> Int { try Self.listTasks(keeper, account) }
        #expect(try get() == 200)
        keyring.fail(with: .locked)
        #expect(try get() == 200)  // the keyring was not asked
        // Another process refreshed: the entry changed, so the token is read again (and fails here).
        try environment.registry.update { (accounts: inout [Account]) throws(OStackError) in
            accounts[0].sessionRefreshedAt = Date().addingTimeInterval(-1)
        }
        #expect(throws: OStackError.self) { try get() }
        keyring.fail(with: nil)
        #expect(try get() == 200)
        // A PIN set by another process (its envelope, not the registry): the kept token is not used.
        let pin = environment.pinEnvelopePath(account)
        try SecureFileSystem.createDirectory(String(pin[..<pin.lastIndex(of: "/")!]))
        try SecureFileSystem.writeAtomically(Array("test".utf8), to: pin)
        keyring.fail(with: .locked)
        #expect(throws: OStackError.self) { try get() }
    }

    /// A token replaced behind the registry's back (no entry change) meets one 401: the kept token is
    /// forgotten, the keyring's new one adopted for the retry and for the requests after it.
    @Test func aTokenReplacedOutsideTheRegistryIsAdoptedAfterOne401() throws {
        let keeper = SessionKeeper(environment: environment)
        let account = try LoginService(environment: environment).login(request())
        func get() throws -> Int { try Self.listTasks(keeper, account) }
        #expect(try get() == 200)
        let key = namespaces.key(account.id, .sessionToken)
        let old = String(decoding: try #require(try secrets.read(key)).withUnsafeBytes { Array($0) }, as: UTF8.self)
        server.state.withLock { state in
            state.tokens["replaced-token"] = state.tokens[old]
            state.tokens[old] = nil
        }
        try secrets.write(SecretBytes(copying: Array("replaced-token".utf8)), for: key)
        #expect(try get() == 200)
        #expect(try get() == 200)
        #expect(server.state.withLock { $0.dataStatuses } == [200, 401, 200, 200])
    }

    @Test func revokedSessionEndsSignedOutAsExpiredWithDataKept() throws {
        var keeper = SessionKeeper(environment: environment)
        keeper.minimumInterval = 0
        let account = try LoginService(environment: environment).login(request())
        server.state.withLock { $0.tokens.removeAll() }
        let error = #expect(throws: OStackError.self) {
            try keeper.send(account) {
                TransportRequest(method: "GET", url: "http://127.0.0.1:9/api/v1/data/task", headers: [$0])
            }
        }
        #expect(error?.code == .sessionExpired)
        #expect(try environment.registry.accounts().first?.sessionState == .expired)
        #expect(try secrets.read(namespaces.key(account.id, .dbKey)) != nil)
    }

    @Test func apiKeyAccountsNeverRefresh() throws {
        // The fake accepts API keys the same way as tokens.
        server.state.withLock { $0.tokens["osk_test_key_123456"] = "usr_bob" }
        var login = try request("bob@example.com", "unused")
        login.credential = .apiKey(SecretBytes(copying: Array("osk_test_key_123456".utf8)))
        let account = try LoginService(environment: environment).login(login)
        #expect(account.credentialKind == .apiKey)
        #expect(account.sessionExpiresAt == nil)
        let before = server.state.withLock { $0.getSessionCount }
        var keeper = SessionKeeper(environment: environment)
        keeper.explicitInterval = 0
        _ = try keeper.credential(for: account)
        try keeper.refreshNow(account)
        #expect(server.state.withLock { $0.getSessionCount } == before)
    }

    @Test func interruptedMigrationIsFinishedByTheNextCommand() throws {
        let account = try LoginService(environment: environment).login(request())
        // Simulate a crash after identify: guest token present, journal in the migrating phase.
        let token = try #require(try secrets.read(namespaces.key(account.id, .sessionToken)))
        try secrets.delete(namespaces.key(account.id, .sessionToken))
        try secrets.write(token, for: environment.guestKey(.sessionToken))
        let journal =
            #"{"version":1,"phase":"migrating","server":"http://127.0.0.1:9","credentialKind":"session","makeDefault":true,"accountID":"127.0.0.1:9::usr_alice","userID":"usr_alice","email":"alice@example.com","displayName":"Alice"}"#
        try SecureFileSystem.writeAtomically(
            Array(journal.utf8), to: environment.layout.stateDirectory + "/login-journal.json")

        try LoginService(environment: environment).recoverInterruptedLogin()
        #expect(try secrets.list(namespace: namespaces.guest).isEmpty)
        #expect(try secrets.read(namespaces.key(account.id, .sessionToken)) == token)
        #expect(try environment.registry.accounts().count == 1)
        #expect(!SecureFileSystem.exists(environment.layout.stateDirectory + "/login-journal.json"))
    }

    @Test func interruptedSignInIsCleanedByTheNextCommand() throws {
        try environment.layout.createDirectories()
        try secrets.write(SecretBytes(copying: Array("tok_orphan_0001".utf8)), for: environment.guestKey(.sessionToken))
        let journal =
            #"{"version":1,"phase":"signingIn","server":"http://127.0.0.1:9","credentialKind":"session","makeDefault":true}"#
        try SecureFileSystem.writeAtomically(
            Array(journal.utf8), to: environment.layout.stateDirectory + "/login-journal.json")
        try LoginService(environment: environment).recoverInterruptedLogin()
        #expect(keyring.count == 0)
        #expect(try environment.registry.accounts().isEmpty)
    }

    @Test func logoutDeletesTheTokenAndKeepsTheAccount() throws {
        let account = try LoginService(environment: environment).login(request())
        let outcome = try LogoutService(environment: environment).logout(account)
        #expect(outcome.serverSignedOut)
        #expect(outcome.account.sessionState == .signedOut)
        #expect(try secrets.read(namespaces.key(account.id, .sessionToken)) == nil)
        #expect(try secrets.read(namespaces.key(account.id, .dbKey)) != nil)
    }

    @Test func removeRefusesUnsyncedChangesThenCryptoErases() throws {
        let account = try LoginService(environment: environment).login(request())
        let directory = environment.layout.accountDirectory(account.dataDirectory)
        #expect(SecureFileSystem.isDirectory(directory))
        let refused = #expect(throws: OStackError.self) {
            try LogoutService(environment: environment).remove(account, unsyncedChanges: 3, force: false)
        }
        #expect(refused?.code == .unsyncedChanges)
        #expect(try secrets.list(namespace: namespaces.account(account.id)).count == 3)  // token, key, home marker (+ the global audit key)

        try LogoutService(environment: environment).remove(account, unsyncedChanges: 3, force: true)
        #expect(try secrets.list(namespace: namespaces.account(account.id)).isEmpty)
        #expect(!SecureFileSystem.exists(directory))
        #expect(try environment.registry.accounts().isEmpty)
        #expect(try environment.configuration.load().defaultAccount == nil)
    }

    @Test func removeWithALockedKeyringDeletesNothing() throws {
        let account = try LoginService(environment: environment).login(request())
        keyring.fail(with: .locked)
        #expect(throws: OStackError.self) {
            try LogoutService(environment: environment).remove(account, unsyncedChanges: 0, force: false)
        }
        keyring.fail(with: nil)
        #expect(try secrets.list(namespace: namespaces.account(account.id)).count == 3)  // token, key, home marker (+ the global audit key)
        #expect(SecureFileSystem.isDirectory(environment.layout.accountDirectory(account.dataDirectory)))
        #expect(try environment.registry.accounts().count == 1)
    }
}

/// Records the database paths a test's provisioning closure was asked for.
final class ProvisionLog: Sendable {
    private let paths = Mutex<[String]>([])
    func record(_ path: String) { paths.withLock { $0.append(path) } }
    var count: Int { paths.withLock { $0.count } }
}

/// From a red-team review: HomeClaim's take-over must never erase the keys of the home
/// that is signing in. A home whose directory moved (renamed, OSTACK_HOME changed, mounted
/// elsewhere) still lists the account in its own registry and still has the database the
/// namespace's `db-key` opens; the marker names the old path, which is "gone", so the re-login
/// takes the namespace "over" and deletes this very home's database key.
@Suite struct HomeClaimTests {
    let root = TemporaryDirectory()
    let keyring = InMemoryKeyring()
    var secrets: KeyringSecretStore { KeyringSecretStore(keyring: keyring) }
    let server = FakeObjectStack()
    let provisioned = ProvisionLog()
    let namespaces = KeyringNamespaces(prefix: "test")

    func environment(_ home: String) -> AuthEnvironment {
        let provisioned = self.provisioned
        return AuthEnvironment(
            layout: FileLayout(environment: ["OSTACK_HOME": home], userID: 1), secrets: secrets,
            namespaces: namespaces, transport: server, keyringBackend: "secret-service",
            provisionDatabase: { path, _ in
                // A real database file, as provisionDatabase leaves one.
                if !SecureFileSystem.exists(path) { try? SecureFileSystem.writeAtomically([1], to: path) }
                provisioned.record(path)
            })
    }

    func request() throws -> LoginService.Request {
        LoginService.Request(
            server: try ServerURL(parsing: "http://127.0.0.1:9"), email: "alice@example.com",
            credential: .password(SecretBytes(copying: Array("alice-pass".utf8))), alias: "work", makeDefault: true)
    }

    @Test func reloginInAMovedHomeKeepsItsDatabaseKey() throws {
        let before = root.path + "/before"
        let after = root.path + "/after"
        let first = try LoginService(environment: environment(before)).login(request())
        let key = try #require(try secrets.read(namespaces.key(first.id, .dbKey)))
        // The user moves the whole home (mv, a new OSTACK_HOME, another mount point).
        #expect(rename(before, after) == 0)
        // Everything but a sign-in works there; the session expires; the user signs in again.
        let again = try LoginService(environment: environment(after)).login(request())
        #expect(again.dataDirectory == first.dataDirectory)
        #expect(try secrets.read(namespaces.key(first.id, .dbKey)) == key, "the moved home's database key was deleted")
    }

    /// 5de49c6 renamed the guest item (`guest` → `guest:<hash>`); a sign-in interrupted by a crash
    /// under the previous version left its live token under `guest`. The recovery now reads only the
    /// new item: the old token is neither signed out nor deleted (doctor does not look there either).
    @Test func aGuestTokenLeftByThePreviousVersionIsSignedOutAndDeleted() throws {
        let environment = environment(root.path + "/home")
        try environment.layout.createDirectories()
        let legacy = SecretKey(namespace: namespaces.guest, account: KeyringNamespaces.guestAccount, kind: .sessionToken)
        try secrets.write(SecretBytes(copying: Array("tok_orphan_0001".utf8)), for: legacy)
        let journal =
            #"{"version":1,"phase":"signingIn","server":"http://127.0.0.1:9","credentialKind":"session","makeDefault":true}"#
        try SecureFileSystem.writeAtomically(
            Array(journal.utf8), to: environment.layout.stateDirectory + "/login-journal.json")
        try LoginService(environment: environment).recoverInterruptedLogin()
        #expect(try secrets.read(legacy) == nil, "the previous version's guest token is orphaned")
    }
}
