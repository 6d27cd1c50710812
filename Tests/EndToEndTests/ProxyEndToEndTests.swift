import OStackTestSupport
import Testing

/// Proxies from the environment, as curl users set them (docs/protocol.md, "Proxies"): an `https`
/// server is reached through the proxy in `HTTPS_PROXY` (a CONNECT tunnel: the proxy sees the host
/// name, never the credentials); a local or plain-`http` one never is. Before, with `http_proxy` set,
/// every request to a local dev server went to the proxy, session token in clear text, and failed
/// as "Cannot reach 127.0.0.1".
@Suite struct ProxyEndToEndTests {
    func fixture(_ name: String) -> String {
        let file = #filePath
        return String(file[..<file.lastIndex(of: "/")!]) + "/Fixtures/" + name
    }

    /// Every variable curl reads for a proxy, unset; `set` then sets some.
    func proxies(_ set: [String: String]) -> [String: String?] {
        var environment: [String: String?] = [:]
        for name in ["http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"] {
            environment[name] = .some(nil)
        }
        for (name, value) in set { environment[name] = value }
        return environment
    }

    @Test func httpsGoesThroughTheProxyAndLocalServersNever() throws {
        let server = try DevServerProcess()
        let work = TemporaryDirectory()
        // crm.ostack.test: a name only the proxy "resolves" (to the TLS front of the dev server).
        let tls = try ChildProcess(
            executable: "/usr/bin/python3",
            arguments: [fixture("tls_proxy.py"), work.path, String(server.port), "crm.ostack.test"])
        defer { tls.kill() }
        let front = try #require(try tls.readLine(timeout: 60)).split(separator: " ").map(String.init)
        try #require(front.count == 2)
        let proxy = try ChildProcess(executable: "/usr/bin/python3", arguments: [fixture("connect_proxy.py"), front[0]])
        defer { proxy.kill() }
        let proxyURL = "http://127.0.0.1:\(try #require(try proxy.readLine(timeout: 20)))"

        let remote = OStackRunner()
        var environment = proxies(["HTTPS_PROXY": proxyURL])
        environment["SSL_CERT_FILE"] = front[1]
        environment["CURL_CA_BUNDLE"] = .some(nil)
        let login = try remote.login("https://crm.ostack.test", "alice@example.com", "alice-pass", environment: environment)
        #expect(login.status == 0, "\(login.stderr)")
        let listed = try remote.run(["records", "list", "task", "--remote"], environment: environment)
        #expect(listed.status == 0, "\(listed.stderr)")
        let tunnelled = proxy.remainingStdout()
        #expect(tunnelled.contains("CONNECT crm.ostack.test:443 "), "\(tunnelled)")
        #expect(!tunnelled.split(separator: "\n").contains { !$0.hasPrefix("CONNECT ") }, "\(tunnelled)")
        // A proxy that cannot be reached is named in the hint, with the variable it came from.
        let closed = try DevServerProcess()
        let unreachable = try closed.stop()
        defer { withExtendedLifetime(unreachable) {} }
        environment["HTTPS_PROXY"] = "http://127.0.0.1:\(closed.port)"
        let failed = try remote.run(["records", "list", "task", "--remote"], environment: environment)
        #expect(failed.status == 5, "\(failed.stderr)")
        #expect(failed.stderr.contains("through the proxy in HTTPS_PROXY"), "\(failed.stderr)")

        // A local http server: every proxy variable set, the proxy is never asked.
        let local = OStackRunner()
        let everyProxy = proxies([
            "http_proxy": proxyURL, "https_proxy": proxyURL, "HTTPS_PROXY": proxyURL, "all_proxy": proxyURL,
            "ALL_PROXY": proxyURL,
        ])
        let localLogin = try local.login(server.url, "alice@example.com", "alice-pass", environment: everyProxy)
        #expect(localLogin.status == 0, "\(localLogin.stderr)")
        let localList = try local.run(["records", "list", "task", "--remote"], environment: everyProxy)
        #expect(localList.status == 0, "\(localList.stderr)")
        #expect(!localList.stderr.contains("proxy"))
        #expect(proxy.remainingStdout() == tunnelled, "the proxy was asked for a local server")
    }
}
