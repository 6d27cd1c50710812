import OStackTestSupport
import Testing

/// Each way sign-in can fail gets its own clear message and exit code, and leaves nothing behind.
@Suite struct LoginFailureEndToEndTests {
    @Test func wrongCredentials() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        let result = try ostack.login(server.url, "alice@example.com", "not-her-password")
        #expect(result.status == 3)
        #expect(result.stderr.contains("Incorrect e-mail, password or API key."))
        #expect(try ostack.run(["accounts", "list", "--json"]).stdout == "{\"accounts\":[]}\n")
    }

    @Test func unreachableServer() throws {
        let closed = try DevServerProcess()
        let port = closed.port
        closed.process.kill()
        let result = try OStackRunner().login("http://127.0.0.1:\(port)", "alice@example.com", "alice-pass")
        #expect(result.status == 5)
        #expect(result.stderr.contains("Cannot reach 127.0.0.1:\(port)"))
    }

    @Test func tlsFailure() throws {
        // TLS to a plain-HTTP server: the handshake fails; ostack never skips certificate checks.
        let server = try DevServerProcess()
        let result = try OStackRunner().login("https://127.0.0.1:\(server.port)", "alice@example.com", "alice-pass")
        #expect(result.status == 5)
        #expect(result.stderr.contains("secure connection"))
    }

    @Test func notAnObjectStackServer() throws {
        let file = #filePath
        let fixture =
            String(file[..<file.firstRange(of: "/Tests/")!.lowerBound]) + "/Tests/CurlKitTests/Fixtures/test_server.py"
        let other = try ChildProcess(executable: "/usr/bin/python3", arguments: [fixture])
        defer { other.kill() }
        let port = try #require(try other.readLine(timeout: 20))
        let result = try OStackRunner().login("http://127.0.0.1:\(port)", "alice@example.com", "alice-pass")
        #expect(result.status == 9)
        #expect(result.stderr.contains("does not look like an ObjectStack server"))
    }

    @Test func insecureRemoteURLIsRefusedWithoutConsent() throws {
        let result = try OStackRunner().login("http://crm.example.com", "alice@example.com", "alice-pass")
        #expect(result.status == 9)
        #expect(result.stderr.contains("Refusing plain http://"))
    }

    @Test func apiKeyAccountsSignInAndNeverRefresh() throws {
        let server = try DevServerProcess(arguments: ["--api-key", "bob@example.com:osk_e2e_key_1234567890"])
        let ostack = OStackRunner()
        let login = try ostack.run(
            ["login", "--server", server.url, "--api-key-stdin", "--alias", "bot"], stdin: "osk_e2e_key_1234567890\n")
        #expect(login.status == 0, "\(login.stderr)")
        func refreshes() throws -> Substring {
            try server.control("GET", "counters").split(separator: "\"refreshes\":").dropFirst().first?.prefix {
                $0.isNumber
            } ?? ""
        }
        let before = try refreshes()
        #expect(try ostack.run(["auth", "refresh"]).status == 0)
        #expect(try refreshes() == before)
        #expect(try ostack.run(["status", "--json"]).stdout.contains("\"expiresAt\":null"))
        #expect(!login.stdout.contains("osk_") && !login.stderr.contains("osk_"))
    }

    @Test func secretsAreNeverAcceptedAsArguments() throws {
        let result = try OStackRunner().run(["login", "--server", "localhost:1", "--password", "hunter2"])
        #expect(result.status == 64)
    }
}
