import FoundationEssentials
import Glibc
import KeyringKit
@testable import OStackCore
import OStackTestSupport
import PlatformKit
import SodiumKit
import Testing

/// `doctor` (docs/audit.md): each problem is a failing check with a fix; a healthy setup is ok.
@Suite struct DoctorTests {
    let home = TemporaryDirectory()
    let keyring = InMemoryKeyring()
    let server = FakeObjectStack()

    var environment: AuthEnvironment {
        AuthEnvironment(
            layout: FileLayout(environment: ["OSTACK_HOME": home.path], userID: 1),
            secrets: KeyringSecretStore(keyring: keyring), namespaces: KeyringNamespaces(prefix: "test"),
            transport: server,
            keyringBackend: "secret-service", provisionDatabase: AccountDatabase.provision)
    }

    func signedIn() throws -> Account {
        let account = try LoginService(environment: environment).login(
            LoginService.Request(
                server: try ServerURL(parsing: "http://127.0.0.1:9"), email: "alice@example.com",
                credential: .password(SecretBytes(copying: Array("alice-pass".utf8))), alias: "work", makeDefault: true)
        )
        _ = try AccountSession(account: account, environment: environment)  // flushes the sign-in events
        return account
    }

    func run(_ account: Account) throws -> [Doctor.Check] {
        let current = try environment.registry.accounts().first { $0.id == account.id } ?? account
        var doctor = Doctor(environment: environment)
        doctor.probeServerDate = { _ in Date().addingTimeInterval(2) }
        return doctor.run(accounts: [current])
    }

    func status(_ checks: [Doctor.Check], _ name: String, account: Bool = true) -> Doctor.Check? {
        checks.first { $0.name == name && ($0.account != nil) == account }
    }

    @Test func aHealthySetupIsOK() throws {
        let checks = try run(try signedIn())
        #expect(checks.allSatisfy { $0.status == .ok }, "\(checks.filter { $0.status != .ok })")
        #expect(
            Set(checks.map(\.name)).isSuperset(of: [
                "keyring", "file-modes", "agent", "audit-global", "session", "keyring-items", "database", "queue",
                "queue-failed",
                "conflicts", "audit", "clock",
            ]))
    }

    @Test func aLockedKeyringFailsWithAFix() throws {
        let account = try signedIn()
        keyring.fail(with: .locked)
        let checks = try run(account)
        let check = try #require(status(checks, "keyring", account: false))
        #expect(check.status == .fail && check.message == "The keyring is locked." && check.fix != nil)
        // What needs the keyring could not be checked — said so, not reported as invalid.
        #expect(status(checks, "keyring-items")?.checked == false)
    }

    /// Issue 15 (3, 7): a provider without its default collection is not "ok", and nothing advises removal.
    @Test func aMissingDefaultCollectionFailsWithoutDestructiveAdvice() throws {
        let account = try signedIn()
        keyring.fail(with: .noCollection)
        let checks = try run(account)
        let check = try #require(status(checks, "keyring", account: false))
        #expect(
            check.status == .fail
                && check.message.rendered(spellingCommands: { "\($0)" }).contains("no open default collection"))
        #expect(status(checks, "keyring-items")?.checked == false)
        #expect(status(checks, "database")?.checked == false)
        #expect(!checks.contains { $0.fix?.commands.contains(.accountsRemove(account: "work")) == true })
    }

    /// Issue 15 (7): a database that cannot be opened because the disk is full is not "damaged".
    @Test func aFullDiskIsNotDamage() throws {
        let account = try signedIn()
        let path = environment.databasePath(account)
        _ = try? SecureFileSystem.removeFile(path + "-wal")
        _ = try? SecureFileSystem.removeFile(path + "-shm")
        try SecureFileSystem.createDirectory(path + "-wal")  // the WAL cannot be opened: an I/O failure
        defer { _ = try? SecureFileSystem.removeTree(path + "-wal") }
        var doctor = Doctor(environment: environment)
        doctor.freeSpace = { _ in 0 }
        let check = try #require(status(doctor.run(accounts: [account]), "database"))
        #expect(check.status == .warn && !check.checked, "\(check)")
        #expect(check.message.rendered(spellingCommands: { "\($0)" }).contains("disk is full"))
        #expect(check.fix?.commands.contains(.accountsRemove(account: "work")) != true)
    }

    @Test func aWrongFileModeFails() throws {
        let account = try signedIn()
        chmod(environment.databasePath(account), 0o644)
        let check = try #require(status(try run(account), "file-modes"))
        #expect(check.status == .fail && check.fix?.rendered(spellingCommands: { "\($0)" }).contains("chmod") == true)
    }

    /// Every file directly in the data, configuration and state directories is checked, and the
    /// state and configuration directories too — not only the registry and the account's files.
    @Test func aWrongModeAnywhereInTheHomeFails() throws {
        let account = try signedIn()
        #expect(status(try run(account), "file-modes", account: false)?.status == .ok)
        let layout = environment.layout
        let stray = layout.stateDirectory + "/stray.json"
        try SecureFileSystem.writeAtomically(Array("{}".utf8), to: stray)
        chmod(stray, 0o644)
        #expect(status(try run(account), "file-modes", account: false)?.status == .fail)
        chmod(stray, 0o600)
        // A configuration directory writable by others fails, as the commands refuse it; 0755 (made
        // by hand, nothing secret in it) is fine for both.
        chmod(layout.configDirectory, 0o775)
        #expect(status(try run(account), "file-modes", account: false)?.status == .fail)
        #expect(status(try run(account), "home", account: false)?.status == .fail)
        chmod(layout.configDirectory, 0o755)
        #expect(status(try run(account), "file-modes", account: false)?.status == .ok)
        #expect(status(try run(account), "home", account: false)?.status == .ok)
        chmod(layout.configDirectory, 0o700)
    }

    @Test func aCorruptedDatabaseFails() throws {
        let account = try signedIn()
        let path = environment.databasePath(account)
        var bytes = try #require(try SecureFileSystem.readFile(path))
        try #require(bytes.count > 100)
        for index in 0..<min(bytes.count, 8192) { bytes[index] ^= 0x5A }
        try SecureFileSystem.writeAtomically(bytes, to: path)
        _ = try? SecureFileSystem.removeFile(path + "-wal")
        let check = try #require(status(try run(account), "database"))
        #expect(check.status == .fail && check.checked && check.fix != nil)
    }

    @Test func anExpiredSessionFails() throws {
        let account = try signedIn()
        try environment.registry.update { (accounts: inout [Account]) throws(OStackError) in
            accounts[0].sessionState = .expired
        }
        let check = try #require(status(try run(account), "session"))
        #expect(check.status == .fail && check.fix == .run(.login(account: "work")))
    }

    @Test func aSkewedClockAndATamperedTrailFail() throws {
        let account = try signedIn()
        var doctor = Doctor(environment: environment)
        doctor.probeServerDate = { _ in Date().addingTimeInterval(3600) }
        let service = try AccountSession(account: account, environment: environment)
        try service.store.database.execute("UPDATE audit SET outcome = 'failed' WHERE seq = 1")
        let checks = doctor.run(accounts: [account])
        #expect(status(checks, "clock")?.status == .fail)
        #expect(status(checks, "audit")?.status == .fail)
    }
}
