import OStackCore
import Testing

@Suite struct ServerURLTests {
    @Test(arguments: [
        ("crm.example.com", "https://crm.example.com"),
        ("CRM.Example.com/", "https://crm.example.com"),
        ("https://crm.example.com:443/", "https://crm.example.com"),
        ("https://crm.example.com:8443/api//", "https://crm.example.com:8443/api"),
        ("localhost:8080", "http://localhost:8080"),
        ("127.0.0.1", "http://127.0.0.1"),
        ("printer.local", "http://printer.local"),
        ("192.168.1.20:3000", "http://192.168.1.20:3000"),
        ("10.0.0.5", "http://10.0.0.5"),
        ("172.20.1.1", "http://172.20.1.1"),
        ("[::1]:9000", "http://[::1]:9000"),
        ("http://localhost:80/", "http://localhost"),
        ("https://localhost:4443", "https://localhost:4443"),
        ("  crm.example.com/prefix  ", "https://crm.example.com/prefix"),
    ])
    func normalises(input: String, expected: String) throws {
        #expect(try ServerURL(parsing: input).absoluteString == expected)
    }

    @Test(arguments: [
        "", "ftp://host", "https://user:pass@host", "host?x=1", "host#frag", "https://", "ho st",
        "https://host:99999", "https://host:abc", "[::1",
    ])
    func rejectsInvalidInput(input: String) {
        #expect(throws: OStackError.self) { try ServerURL(parsing: input) }
    }

    @Test func plainHTTPToARemoteHostNeedsConsent() throws {
        let error = #expect(throws: OStackError.self) { try ServerURL(parsing: "http://crm.example.com") }
        #expect(error?.code == .insecureServerURL)
        #expect(try ServerURL(parsing: "http://crm.example.com", allowInsecureHTTP: true).scheme == .http)
        // 172.32.x is not private.
        #expect(throws: OStackError.self) { try ServerURL(parsing: "http://172.32.0.1") }
    }

    @Test func authorityKeepsOnlyNonDefaultPorts() throws {
        #expect(try ServerURL(parsing: "https://a.example:443").authority == "a.example")
        #expect(try ServerURL(parsing: "a.example:8443").authority == "a.example:8443")
        #expect(try ServerURL(parsing: "http://127.0.0.1:80").authority == "127.0.0.1")
    }
}

@Suite struct AccountIDTests {
    @Test func formsHostAndUser() throws {
        let id = try AccountID(server: ServerURL(parsing: "CRM.example.com:8443"), userID: "usr_9f2c")
        #expect(id.rawValue == "crm.example.com:8443::usr_9f2c")
        #expect(id.host == "crm.example.com:8443")
        #expect(id.userID == "usr_9f2c")
        #expect(AccountID(rawValue: id.rawValue) == id)
    }

    @Test(arguments: ["", "nohost", "::user", "host::", "host::a b", "host::a::b"])
    func rejectsMalformedIDs(raw: String) {
        #expect(AccountID(rawValue: raw) == nil)
    }

    @Test func rejectsUnusableUserIDs() throws {
        let server = try ServerURL(parsing: "a.example")
        #expect(throws: OStackError.self) { try AccountID(server: server, userID: "has space") }
        #expect(throws: OStackError.self) { try AccountID(server: server, userID: "") }
    }
}
