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
        let stopped = try closed.stop()
        defer { withExtendedLifetime(stopped) {} }
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

    /// Issue 14: a server with a certificate from a private CA. Refused by default; trusted through
    /// `SSL_CERT_FILE` (or `CURL_CA_BUNDLE`), as curl users expect, or the `tls.ca-file` setting.
    @Test func aPrivateCAIsTrustedOnlyWhenConfigured() throws {
        let server = try DevServerProcess()
        let work = TemporaryDirectory()
        let file = #filePath
        let fixture = String(file[..<file.lastIndex(of: "/")!]) + "/Fixtures/tls_proxy.py"
        let proxy = try ChildProcess(
            executable: "/usr/bin/python3", arguments: [fixture, work.path, String(server.port)])
        defer { proxy.kill() }
        let line = try #require(try proxy.readLine(timeout: 60))
        let parts = line.split(separator: " ").map(String.init)
        try #require(parts.count == 2)
        let url = "https://127.0.0.1:\(parts[0])"
        let ostack = OStackRunner()
        let refused = try ostack.login(url, "alice@example.com", "alice-pass")
        #expect(refused.status == 5, "\(refused.stderr)")
        #expect(refused.stderr.contains("secure connection"))
        // curl's order: CURL_CA_BUNDLE, then SSL_CERT_FILE.
        let viaEnvironment = try ostack.login(
            url, "alice@example.com", "alice-pass", environment: ["SSL_CERT_FILE": parts[1], "CURL_CA_BUNDLE": nil])
        #expect(viaEnvironment.status == 0, "\(viaEnvironment.stderr)")
        let viaBundle = try ostack.run(
            ["records", "list", "task", "--remote"], environment: ["CURL_CA_BUNDLE": parts[1]])
        #expect(viaBundle.status == 0, "\(viaBundle.stderr)")
        let system = try ostack.run(
            ["records", "list", "task", "--remote"], environment: ["CURL_CA_BUNDLE": nil, "SSL_CERT_FILE": nil])
        #expect(system.status == 5)
        #expect(try ostack.run(["config", "set", "tls.ca-file", parts[1]]).status == 0)
        let listed = try ostack.run(["records", "list", "task", "--remote"])
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(try ostack.run(["config", "set", "tls.ca-file", "relative.pem"]).status == 9)
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
