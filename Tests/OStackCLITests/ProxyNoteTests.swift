import OStackCore
import Testing

@testable import OStackCLI

/// The proxy hint follows what the HTTP client does (`ProxyUse`): an https server that is not this
/// machine goes through a proxy from the environment, LAN addresses too (they had no hint), and a
/// plain-http server or a loopback one never does (an http one was said to).
@Suite struct ProxyNoteTests {
    func note(_ authority: String, scheme: String = "https") -> String? {
        CommandRunner.proxyNote(
            OStackError(.offline, context: .init(host: authority), detail: "x"),
            environment: ["https_proxy": "http://proxy.corp:3128"], scheme: scheme)
    }

    @Test func onlyWhatGoesThroughTheProxyIsSaidTo() {
        for authority in ["crm.example.com", "10.1.2.3:8443", "nas.local", "[fe80::1]:8443"] {
            #expect(note(authority)?.contains("https_proxy") == true, "\(authority)")
        }
        for authority in ["127.0.0.1:8443", "127.1:8443", "localhost.:8443", "[::1]:8443", "[0::1]"] {
            #expect(note(authority) == nil, "\(authority)")
        }
        #expect(note("crm.example.com", scheme: "http") == nil)
    }
}
