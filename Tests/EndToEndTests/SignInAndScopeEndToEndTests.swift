import Glibc
import OStackTestSupport
import Testing

/// Two-factor sign-in, another API path, environments and organizations, against the dev server's
/// real-protocol behaviour (issue 13).
@Suite(.serialized) struct SignInAndScopeEndToEndTests {
    static let totpSecret = "JBSWY3DPEHPK3PXP"

    func currentCode(_ server: DevServerProcess) throws -> String {
        let body = try server.control("GET", "totp?email=alice@example.com")
        guard let range = body.firstRange(of: "\"code\":\"") else { return "" }
        return String(body[range.upperBound...].prefix { $0 != "\"" })
    }

    func guestIsEmpty(_ ostack: OStackRunner) throws -> Bool {
        !(try ostack.keyringItems(namespace: "\(ostack.keyringPrefix):guest")).contains("attribute")
    }

    @Test func aUserWithTOTPSignsInAtAPrompt() throws {
        let server = try DevServerProcess(arguments: ["--user-totp", "alice@example.com:\(Self.totpSecret)"])
        let ostack = OStackRunner()
        let code = try currentCode(server)
        let result = try TerminalSession.run(
            ["login", "--server", server.url, "--email", "alice@example.com", "--alias", "work"],
            environment: ostack.baseEnvironment,
            steps: [.init(expect: "Password", type: "alice-pass"), .init(expect: "Two-factor code", type: code)])
        #expect(result.status == 0, "\(result.screen)")
        #expect(result.screen.contains("Signed in"), "\(result.screen)")
        #expect(!result.screen.contains("alice-pass"))  // no echo
        #expect(try ostack.run(["records", "list", "task"]).status == 0)
    }

    @Test func aUserWithTOTPSignsInWithTheFlagAndAWrongCodeLeavesNothing() throws {
        let server = try DevServerProcess(arguments: ["--user-totp", "alice@example.com:\(Self.totpSecret)"])
        let ostack = OStackRunner()
        let wrong = try ostack.login(server.url, "alice@example.com", "alice-pass", extra: ["--totp", "000000"])
        #expect(wrong.status == 3, "\(wrong.stderr)")
        #expect(wrong.stderr.contains("two-factor code is incorrect"), "\(wrong.stderr)")
        #expect(try guestIsEmpty(ostack))
        #expect(try ostack.run(["accounts", "list", "--json"]).stdout.contains("\"accounts\":[]"))
        // Without a terminal and without --totp: a clear error naming what to pass.
        let none = try ostack.login(server.url, "alice@example.com", "alice-pass", extra: ["--no-input"])
        #expect(none.status == 3 && none.stderr.contains("--totp"), "\(none.stderr)")
        #expect(try guestIsEmpty(ostack))
        let right = try ostack.login(
            server.url, "alice@example.com", "alice-pass", extra: ["--totp", try currentCode(server)])
        #expect(right.status == 0, "\(right.stderr)")
        #expect(try guestIsEmpty(ostack))
    }

    @Test func aBackupCodeWorksOnce() throws {
        let server = try DevServerProcess(arguments: [
            "--user-totp", "alice@example.com:\(Self.totpSecret)", "--user-backup-codes",
            "alice@example.com:bk-1111,bk-2222",
        ])
        let ostack = OStackRunner()
        #expect(
            try ostack.login(server.url, "alice@example.com", "alice-pass", extra: ["--backup-code", "bk-1111"]).status
                == 0)
        let again = try OStackRunner().login(
            server.url, "alice@example.com", "alice-pass", extra: ["--backup-code", "bk-1111"])
        #expect(again.status == 3, "\(again.stderr)")
        // From stdin, on the line after the password: out of the process list.
        let fromStdin = try OStackRunner().run(
            [
                "login", "--server", server.url, "--email", "alice@example.com", "--password-stdin",
                "--backup-code-stdin",
            ], stdin: "alice-pass\nbk-2222\n")
        #expect(fromStdin.status == 0, "\(fromStdin.stderr)")
        // The hint for a missing code names flags that exist.
        let asked = try OStackRunner().login(server.url, "alice@example.com", "alice-pass", extra: ["--no-input"])
        #expect(asked.status == 3 && asked.stderr.contains("--backup-code-stdin"), "\(asked.stderr)")
    }

    /// The README's main job on a server whose API lives under another path.
    @Test func anotherAPIPathWorks() throws {
        let server = try DevServerProcess(arguments: ["--api-path", "/custom/v2"])
        let ostack = OStackRunner()
        let login = try ostack.login(server.url, "alice@example.com", "alice-pass", extra: ["--alias", "work"])
        #expect(login.status == 0, "\(login.stderr)")
        #expect(try ostack.run(["objects", "list"]).status == 0)
        let created = try ostack.run(["records", "create", "task", "--set", "title=Moved", "--json"])
        #expect(created.status == 0, "\(created.stderr)")
        #expect(try ostack.run(["records", "list", "task", "--remote"]).stdout.contains("Moved"))
        #expect(try ostack.run(["sync", "track", "task"]).status == 0)
        #expect(try ostack.run(["records", "create", "task", "--set", "title=Offline", "--offline"]).status == 0)
        #expect(try ostack.run(["sync"]).status == 0)
        #expect(try ostack.run(["records", "list", "task", "--local"]).stdout.contains("Offline"))
        #expect(try ostack.run(["auth", "refresh"]).status == 0)
        #expect(try ostack.run(["doctor"]).status == 0)
        #expect(try ostack.run(["logout"]).status == 0)
    }

    /// Two environments of one server: separate accounts that never see each other's records.
    @Test func twoEnvironmentsNeverSeeEachOthersRecords() throws {
        let server = try DevServerProcess(arguments: ["--environment", "prod", "--environment", "staging"])
        let ostack = OStackRunner()
        for environment in ["prod", "staging"] {
            let login = try ostack.login(
                server.url, "alice@example.com", "alice-pass",
                extra: ["--environment", environment, "--alias", environment])
            #expect(login.status == 0, "\(login.stderr)")
            let created = try ostack.run([
                "records", "create", "task", "--set", "title=In \(environment)", "--account", environment,
            ])
            #expect(created.status == 0, "\(created.stderr)")
            #expect(try ostack.run(["sync", "track", "task", "--account", environment]).status == 0)
            #expect(try ostack.run(["sync", "--account", environment]).status == 0)
        }
        let prod = try ostack.run(["records", "list", "task", "--remote", "--account", "prod"]).stdout
        let staging = try ostack.run(["records", "list", "task", "--local", "--account", "staging"]).stdout
        #expect(prod.contains("In prod") && !prod.contains("In staging"), "\(prod)")
        #expect(staging.contains("In staging") && !staging.contains("In prod"), "\(staging)")
        let accounts = try ostack.run(["accounts", "list", "--json"]).stdout
        #expect(accounts.contains("/env:prod::") && accounts.contains("/env:staging::"), "\(accounts)")
        let unknown = try ostack.login(
            server.url, "alice@example.com", "alice-pass", extra: ["--environment", "nope", "--alias", "nope"])
        #expect(unknown.status == 9, "\(unknown.stderr)")
    }

    /// Organizations: each is an account context; `org list` and `org switch`.
    @Test func organizationsAreSeparateContexts() throws {
        let server = try DevServerProcess(arguments: ["--organization", "acme:Acme", "--organization", "beta:Beta"])
        let ostack = OStackRunner()
        for organization in ["acme", "beta"] {
            let login = try ostack.login(
                server.url, "alice@example.com", "alice-pass",
                extra: ["--organization", organization, "--alias", organization])
            #expect(login.status == 0, "\(login.stderr)")
            #expect(
                try ostack.run([
                    "records", "create", "task", "--set", "title=For \(organization)", "--account", organization,
                ]).status == 0)
        }
        let acme = try ostack.run(["records", "list", "task", "--remote", "--account", "acme"]).stdout
        #expect(acme.contains("For acme") && !acme.contains("For beta"), "\(acme)")
        let list = try ostack.run(["org", "list", "--account", "acme", "--json"]).stdout
        #expect(list.contains("\"id\":\"beta\"") && list.contains("{\"active\":true,\"id\":\"acme\""), "\(list)")
        #expect(try ostack.run(["org", "switch", "beta", "--account", "acme"]).status == 0)
        #expect(try ostack.run(["status", "--json"]).stdout.contains("\"alias\":\"beta\""))
        let missing = try ostack.run(["org", "switch", "gamma"])
        #expect(missing.status == 7, "\(missing.stderr)")
    }

    /// A rotated token for an organization's account is adopted only when its session is in that
    /// organization: another session of the same user, active in another organization, is refused
    /// (the account's writes would otherwise land there).
    @Test func aRotatedTokenOfAnotherOrganizationIsRefused() throws {
        let server = try DevServerProcess(arguments: ["--organization", "acme:Acme", "--organization", "beta:Beta"])
        let ostack = OStackRunner()
        let login = try ostack.login(
            server.url, "alice@example.com", "alice-pass", extra: ["--organization", "acme", "--alias", "acme"])
        #expect(login.status == 0, "\(login.stderr)")
        // Another session of alice's, active in beta.
        let token = try server.signIn("alice@example.com", "alice-pass")
        _ = try runProcess(
            executable: "/usr/bin/curl",
            arguments: [
                "-s", "-X", "POST", "-H", "Content-Type: application/json", "-H", "Authorization: Bearer \(token)",
                "-d",
                #"{"organizationId":"beta"}"#, server.url + "/api/v1/auth/organization/set-active",
            ])
        let session =
            #"{"session":{"id":"ses_x","expiresAt":"2030-01-01T00:00:00.000Z","activeOrganizationId":"acme"},"user":{"id":"usr_alice","email":"alice@example.com","name":"Alice"}}"#
        _ = try server.control(
            "POST", "faults",
            #"{"action":"status","status":200,"body":\#(session),"headers":{"set-auth-token":"\#(token)"},"count":1,"match":{"pathPrefix":"/api/v1/auth/get-session"}}"#
        )
        usleep(2_100_000)  // `auth refresh` leaves a session refreshed in the last 2 s alone
        let refresh = try ostack.run(["auth", "refresh", "--account", "acme"])
        #expect(refresh.status != 0, "\(refresh.stdout)")
        #expect(
            try ostack.run(["records", "create", "task", "--set", "title=Still acme", "--account", "acme"]).status == 0)
        let acme = try ostack.run(["records", "list", "task", "--remote", "--account", "acme"]).stdout
        #expect(acme.contains("Still acme"), "\(acme)")
    }
}
