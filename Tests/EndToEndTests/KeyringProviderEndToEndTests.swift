import FoundationEssentials
import Glibc
import OStackTestSupport
import Testing

/// Keyring providers in states other than "up and unlocked", each in a private D-Bus session of its own
/// (`PrivateKeyringSession`): no default collection, locked, hung. Nothing may be deleted, re-created or
/// advised away on an uncertain read (docs/security.md#kr-3), and `doctor` must tell each state apart.
@Suite(.serialized) struct KeyringProviderEndToEndTests {
    static let fast: [String: String?] = ["OSTACK_PIN_KDF": "interactive"]

    static func fixture(_ name: String) -> String {
        var path = #filePath
        path = String(path[..<path.lastIndex(of: "/")!])
        path = String(path[..<path.lastIndex(of: "/")!])
        return path + "/KeyringKitTests/Fixtures/" + name
    }

    /// An ostack runner whose keyring is `session`'s.
    struct Setup {
        let server: DevServerProcess
        let ostack: OStackRunner
        let session: PrivateKeyringSession

        @discardableResult
        func run(_ arguments: [String], stdin: String? = nil, environment extra: [String: String?] = [:]) throws
            -> ProcessResult
        {
            try ostack.run(
                arguments, stdin: stdin, environment: session.environment.merging(extra) { _, new in new },
                timeout: 60)
        }

        var accountDirectory: String {
            let listing = try? runProcess(executable: "/bin/ls", arguments: [ostack.home.path + "/data/accounts"])
            return ostack.home.path + "/data/accounts/"
                + (listing?.stdout.split(separator: "\n").first.map(String.init) ?? "")
        }
    }

    func signedIn() throws -> Setup {
        let session = try PrivateKeyringSession()
        try session.startKeyring()
        let setup = Setup(server: try DevServerProcess(), ostack: OStackRunner(), session: session)
        let login = try setup.run(
            [
                "login", "--server", setup.server.url, "--email", "alice@example.com", "--password-stdin", "--alias",
                "work",
            ],
            stdin: "alice-pass\n")
        try #require(login.status == 0, "\(login.stderr)")
        return setup
    }

    /// Issue 15 (3): gnome-keyring killed and re-activated without its login keyring. Before, the items
    /// read as "not found": unlock said "Too many wrong PINs", logout "succeeded" deleting nothing,
    /// doctor advised `accounts remove`, and `accounts remove --force` deleted the database.
    @Test func aKeyringWithoutItsDefaultCollectionChangesNothing() throws {
        let setup = try signedIn()
        defer {
            _ = try? setup.run(["agent", "stop"])
            setup.session.close()
        }
        let created = try setup.run(["records", "create", "task", "--set", "title=Unsynced", "--offline"])
        try #require(created.status == 0, "\(created.stderr)")
        #expect(try setup.run(["pin", "set", "--pin-stdin"], stdin: "7319\n", environment: Self.fast).status == 0)
        #expect(try setup.run(["lock"]).status == 0)

        try setup.session.restartWithoutLoginKeyring()

        let unlock = try setup.run(["unlock", "--pin-stdin"], stdin: "7319\n")
        #expect(unlock.status == 10, "\(unlock.stderr)")
        #expect(!unlock.stderr.contains("Too many wrong PINs"))
        #expect(unlock.stderr.contains("default collection"))
        let logout = try setup.run(["logout"])
        #expect(logout.status == 10, "\(logout.stderr)")
        let doctor = try setup.run(["doctor"])
        #expect(doctor.status == 1)
        #expect(doctor.stdout.contains("no open default collection"), "\(doctor.stdout)")
        #expect(!doctor.stdout.contains("accounts remove"), "\(doctor.stdout)")
        let remove = try setup.run(["accounts", "remove", "work", "--force"])
        #expect(remove.status == 10, "\(remove.stderr)")
        #expect(try setup.run(["accounts", "list", "--json"]).stdout.contains("\"alias\":\"work\""))
        #expect(access(setup.accountDirectory + "/data.db", F_OK) == 0)

        // The login keyring comes back: everything works, nothing was lost.
        try setup.session.restoreLoginKeyring()
        let again = try setup.run(["unlock", "--pin-stdin"], stdin: "7319\n")
        #expect(again.status == 0, "\(again.stderr)")
        let status = try setup.run(["status", "--json"])
        #expect(status.stdout.contains("\"pending\":1"), "\(status.stdout)")
        #expect(try setup.run(["logout"]).status == 0)
    }

    /// Issue 15 (7): doctor against a keyring that never answers finishes within 10 s and says so.
    @Test func doctorAnswersWithinTenSecondsAgainstAHungKeyring() throws {
        let setup = try signedIn()
        defer { setup.session.close() }
        try setup.session.startHungService(script: Self.fixture("hung_secret_service.py"))
        let start = ChildProcess.now()
        // The default deadline (5 s), not the suite's longer one.
        let doctor = try setup.run(["doctor", "--json"], environment: ["OSTACK_KEYRING_TIMEOUT": nil])
        let elapsed = ChildProcess.now() - start
        #expect(elapsed < 10, "doctor took \(elapsed) s")
        #expect(doctor.status == 1)
        #expect(doctor.stdout.contains("did not answer in time"), "\(doctor.stdout)")
        #expect(doctor.stdout.contains("Could not check the database"))
        #expect(!doctor.stdout.contains("damaged") && !doctor.stdout.contains("accounts remove"))
    }

    /// Issue 15 (7): a locked keyring is not "ok".
    @Test func doctorReportsALockedKeyring() throws {
        let setup = try signedIn()
        defer { setup.session.close() }
        try setup.session.lockLogin()
        let doctor = try setup.run(["doctor", "--json"])
        #expect(doctor.status == 1)
        #expect(doctor.stdout.contains("\"message\":\"The keyring is locked.\""), "\(doctor.stdout)")
        #expect(!doctor.stdout.contains("damaged"))
    }

    /// Issue 15 (7): an interrupted sign-in is not "damaged"; an interrupted removal is not "restored
    /// from an older copy", and running the removal again finishes it.
    @Test func doctorTellsInterruptedOperationsFromDamage() throws {
        let session = try PrivateKeyringSession()
        defer { session.close() }
        try session.startKeyring()
        let setup = Setup(server: try DevServerProcess(), ostack: OStackRunner(), session: session)
        let killed = try setup.run(
            [
                "login", "--server", setup.server.url, "--email", "alice@example.com", "--password-stdin", "--alias",
                "work",
            ],
            stdin: "alice-pass\n", environment: ["OSTACK_FAILPOINT": "login.after-register"])
        #expect(killed.status == 137)
        let afterLogin = try setup.run(["doctor"])
        #expect(afterLogin.stdout.contains("sign-in of this account was interrupted"), "\(afterLogin.stdout)")
        #expect(!afterLogin.stdout.contains("damaged"))

        #expect(try setup.run(["auth", "refresh"]).status == 0)  // finishes the sign-in
        let removing = try setup.run(
            ["accounts", "remove", "work"], environment: ["OSTACK_FAILPOINT": "remove.after-keyring"])
        #expect(removing.status == 137)
        let afterRemove = try setup.run(["doctor"])
        #expect(afterRemove.stdout.contains("Removing this account was interrupted"), "\(afterRemove.stdout)")
        #expect(!afterRemove.stdout.contains("older copy") && !afterRemove.stdout.contains("damaged"))
        let finish = try setup.run(["accounts", "remove", "work"])
        #expect(finish.status == 0, "\(finish.stderr)")
        #expect(try setup.run(["accounts", "list", "--json"]).stdout.contains("\"accounts\":[]"))
    }

    /// Issue 15 (10): items are labelled for people: kind, alias and server.
    @Test func itemsAreLabelledForPeople() throws {
        let setup = try signedIn()
        defer { setup.session.close() }
        _ = try setup.run(["auth", "refresh"])  // rewrites the token under the account's alias
        let search = try runSecretTool(
            [
                "search", "--all", "namespace",
                "\(setup.ostack.keyringPrefix):auth:127.0.0.1:\(setup.server.port)::usr_alice",
            ],
            environment: ChildProcess.currentEnvironment().merging(["DBUS_SESSION_BUS_ADDRESS": setup.session.address])
            {
                _, new in new
            })
        let text = search.stdout + search.stderr
        let host = "127.0.0.1:\(setup.server.port)"
        #expect(
            text.contains("label = ostack database key (\(host))")
                || text.contains("label = ostack database key for work (\(host))"), "\(text)")
        #expect(text.contains("ostack session token"), "\(text)")
        #expect(!text.contains("label = ostack credential"))
        #expect(!text.contains("alice@example.com"))
    }
}
