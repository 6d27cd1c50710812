import FoundationEssentials
import Glibc
import OStackTestSupport
import SodiumKit
import Testing

@testable import OStackCore

/// Small protocol rules of a real ObjectStack deployment (issue 13): routes from discovery, scoped
/// account ids, API-key identities, locales and labels, numbers from metadata.
@Suite struct ProtocolDetailTests {
    static func json(_ text: String) -> JSONValue? { JSONValue.parse(Array(text.utf8)) }

    @Test func routesComeFromDiscoveryAndOnlyPlainPathsAreTaken() {
        let discovery = Discovery(
            document: Self.json(
                #"{"data":{"routes":{"data":"/custom/v2/data","metadata":"/custom/v2/meta","auth":"/custom/v2/auth"},"capabilities":{"conditionalBatch":{"enabled":true}}}}"#
            ))
        #expect(discovery?.routes.data == "/custom/v2/data")
        #expect(discovery?.routes.base == "/custom/v2")
        #expect(discovery?.routes.auth == "/custom/v2/auth")
        #expect(discovery?.routes.discovery == "/api/v1/discovery")  // not given: the default
        #expect(discovery?.conditionalBatch == true)
        #expect(Endpoint.apps.path(discovery!.routes) == "/custom/v2/me/apps")
        #expect(
            Endpoint.updateRecord(object: "task", id: "a b").path(discovery!.routes) == "/custom/v2/data/task/a%20b")
        // Not a discovery document without data and metadata routes; hostile routes are ignored.
        #expect(Discovery(document: Self.json(#"{"routes":{"data":"/x"}}"#)) == nil)
        for hostile in ["https://evil.example/api", "//evil.example/api", "/api/../../etc", "/api?x=1", "api/v1/data"] {
            let routes = ServerRoutes(discovery: Self.json(#"{"routes":{"data":"\#(hostile)","metadata":"/m"}}"#))
            #expect(routes.data == "/api/v1/data", "\(hostile)")
        }
        #expect(
            Discovery(
                document: Self.json(
                    #"{"routes":{"data":"/d","metadata":"/m"},"capabilities":{"conditionalBatch":true}}"#))?
                .conditionalBatch == true)
        #expect(Discovery(document: Self.json(#"{"routes":{"data":"/d","metadata":"/m"}}"#))?.conditionalBatch == false)
    }

    @Test func environmentsAndOrganizationsAreSeparateAccountIDs() throws {
        let server = try ServerURL(parsing: "crm.example.com", allowInsecureHTTP: false)
        let plain = try AccountID(server: server, userID: "usr_1")
        let staging = try AccountID(server: server, userID: "usr_1", environment: "staging", organization: nil)
        let both = try AccountID(server: server, userID: "usr_1", environment: "staging", organization: "acme")
        #expect(plain.rawValue == "crm.example.com::usr_1")
        #expect(staging.rawValue == "crm.example.com/env:staging::usr_1")
        #expect(both.rawValue == "crm.example.com/env:staging/org:acme::usr_1")
        #expect(Set([plain, staging, both]).count == 3)
        #expect(AccountID(rawValue: both.rawValue)?.userID == "usr_1")
        #expect(throws: OStackError.self) {
            try AccountID(server: server, userID: "u", environment: "a/b", organization: nil)
        }
    }

    @Test func anAPIKeyIdentityIsItsVisiblePrefixNeverTheSecret() {
        let key = SessionCredential(SecretBytes(copying: Array("osk_AbCdEf0123456789secret".utf8)))
        let identity = LoginService.apiKeyIdentity(key)
        #expect(identity == "apikey-AbCdEf")
        #expect(!identity.contains("secret"))
        #expect(
            LoginService.apiKeyIdentity(SessionCredential(SecretBytes(copying: Array("osk_".utf8)))) == "apikey-key")
    }

    @Test func localesAreLanguageTagsFromTheSettingOrLANG() {
        #expect(Setting.languageTag("de") == "de" && Setting.languageTag("fr-CA") == "fr-CA")
        #expect(Setting.languageTag("not a tag") == nil && Setting.languageTag("d") == nil)
        #expect(Setting.acceptLanguage(setting: "auto", environment: ["LANG": "de_DE.UTF-8"]) == "de-DE")
        #expect(Setting.acceptLanguage(setting: "auto", environment: ["LANG": "C.UTF-8"]) == nil)
        #expect(Setting.acceptLanguage(setting: "auto", environment: ["LC_ALL": "pt_BR", "LANG": "de_DE"]) == "pt-BR")
        #expect(Setting.acceptLanguage(setting: "fr", environment: ["LANG": "de_DE"]) == "fr")
    }

    @Test func labelsMayBeLocaleMapsAndNumbersAreRangeChecked() throws {
        ObjectSchema.preferredLocale = "de-AT"
        defer { ObjectSchema.preferredLocale = nil }
        let item = try #require(
            Self.json(
                #"{"name":"task","label":{"en":"Task","de":"Aufgabe"},"fields":{"title":{"type":"text","label":{"fr":"Titre"},"maxLength":1e19,"minLength":-3,"scale":1e300},"amount":{"type":"number","label":"Amount","max":1e308,"scale":2}}}"#
            ))
        let schema = try #require(ObjectSchema(item: item))
        #expect(schema.label == "Aufgabe")
        #expect(schema.field("title")?.label == "Titre")
        #expect(schema.field("title")?.maxLength == nil && schema.field("title")?.minLength == nil)
        #expect(schema.field("amount")?.scale == 2)
    }

    /// A 409's `currentRecord` is read with system rights: only fields the metadata lists are kept.
    @Test func aConflictKeepsOnlyFieldsTheMetadataLists() throws {
        let directory = OStackTestSupport.TemporaryDirectory()
        let store = try LocalStore(
            database: try AccountDatabase.open(path: directory.appending("a.db"), key: AccountDataKey.generate()))
        try store.run(
            "INSERT INTO meta_objects (name, etag, item, fetched_at, fingerprint) VALUES ('task', NULL, ?, 0, 'f')",
            [.text(#"{"name":"task","label":"Task","fields":{"title":{"type":"text","label":"Title"}}}"#)])
        try store.putRecord("task", ["id": "r1", "title": "a", "updated_at": "v1"], version: "v1")
        try store.enqueue(
            object: "task", recordID: "r1", operation: .update, payload: ["title": "b"], baseVersion: "v1",
            baseSnapshot: ["id": "r1", "title": "a", "updated_at": "v1"])
        let entry = try #require(try store.entries().first)
        var report = PushReport()
        try ConflictResolver(store: store).resolveConcurrent(
            entry, theirs: ["id": "r1", "title": "a", "salary": 90000, "updated_at": "v2"], version: "v2", &report)
        #expect(report.merged == 1)
        let stored = try #require(try store.record("task", "r1"))
        #expect(stored.data["salary"] == nil && stored.data["title"] == "b")
        #expect(try store.entries().first?.baseSnapshot?["salary"] == nil)
    }

    /// Issue 14, item 10: a server whose clock is 8 days behind. Its session expiry is read in this
    /// machine's clock (shifted by the answer's `Date`), so a session valid for 7 more days is not
    /// shown as expired.
    @Test func sessionExpiryIsReadInTheLocalClock() throws {
        let now = Date()
        let serverNow = now.addingTimeInterval(-8 * 86_400)
        func httpDate(_ date: Date) -> String {
            var seconds = time_t(date.timeIntervalSince1970)
            var parts = tm()
            gmtime_r(&seconds, &parts)
            var buffer = [CChar](repeating: 0, count: 64)
            let count = strftime(&buffer, buffer.count, "%a, %d %b %Y %H:%M:%S GMT", &parts)
            return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        let expiresServer = serverNow.addingTimeInterval(7 * 86_400)
        let response = TransportResponse(status: 200, headers: [("Date", httpDate(serverNow))])
        let local = AuthAPI.localTime(expiresServer, response: response, now: now)
        #expect(abs(local.timeIntervalSince(now) - 7 * 86_400) < 5)
        // No Date, a small difference or an absurd one: unchanged.
        #expect(AuthAPI.localTime(expiresServer, response: TransportResponse(status: 200), now: now) == expiresServer)
        let close = TransportResponse(status: 200, headers: [("Date", httpDate(now.addingTimeInterval(-30)))])
        #expect(AuthAPI.localTime(expiresServer, response: close, now: now) == expiresServer)
        let absurd = TransportResponse(status: 200, headers: [("Date", "Mon, 01 Jan 1990 00:00:00 GMT")])
        #expect(AuthAPI.localTime(expiresServer, response: absurd, now: now) == expiresServer)
    }
}
