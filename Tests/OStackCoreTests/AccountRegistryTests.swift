import FoundationEssentials
import OStackCore
import OStackTestSupport
import PlatformKit
import Testing

@Suite struct AccountRegistryTests {
    /// A data directory name as ostack makes them (`acct-` and 16 hex digits), one per alias of up to
    /// eight bytes.
    static func directoryName(_ alias: String) -> String {
        let hex = alias.utf8.map { String($0, radix: 16) }.joined()
        return "acct-" + String((hex + String(repeating: "0", count: 16)).prefix(16))
    }

    static func makeAccount(_ alias: String, user: String, server: String = "crm.example.com") throws -> Account {
        let url = try ServerURL(parsing: server)
        return Account(
            id: try AccountID(server: url, userID: user), alias: alias, server: url, userID: user,
            email: "\(alias)@example.com", displayName: alias.capitalized,
            createdAt: Date(timeIntervalSince1970: 1_767_225_600),
            lastUsedAt: Date(timeIntervalSince1970: 1_767_225_600),
            keyringBackend: "secret-service", dataDirectory: directoryName(alias), credentialKind: .session,
            sessionState: .signedIn, sessionExpiresAt: nil, sessionRefreshedAt: nil)
    }

    /// A server at an IPv6 literal: the literal's own colons are part of the host, not the `::`
    /// before the user id, and such an account is kept and read back with every other one.
    @Test func anIPv6ServerAccountRoundTrips() throws {
        let home = TemporaryDirectory()
        let registry = AccountRegistry(layout: FileLayout(environment: ["OSTACK_HOME": home.path], userID: 1))
        let url = try ServerURL(parsing: "http://[::1]:44231", allowInsecureHTTP: true)
        let id = try AccountID(server: url, userID: "usr_alice")
        #expect(id.rawValue == "[::1]:44231::usr_alice")
        #expect(id.host == "[::1]:44231" && id.userID == "usr_alice")
        let scoped = try AccountID(server: url, userID: "usr_alice", environment: nil, organization: "acme")
        #expect(AccountID(rawValue: scoped.rawValue)?.userID == "usr_alice")
        #expect(KeyringLabel.host(ofAccount: id.rawValue) == "[::1]:44231")
        try registry.update { $0.append(try! Self.makeAccount("work", user: "u1")) }
        try registry.update { accounts in
            var account = try! Self.makeAccount("local", user: "usr_alice")
            account.id = id
            account.server = url
            accounts.append(account)
        }
        #expect(try registry.accounts().map(\.alias) == ["local", "work"])
        #expect(try registry.account(withID: id)?.alias == "local")
    }

    @Test func missingRegistryIsEmpty() throws {
        let home = TemporaryDirectory()
        let registry = AccountRegistry(layout: FileLayout(environment: ["OSTACK_HOME": home.path], userID: 1))
        #expect(try registry.accounts().isEmpty)
    }

    @Test func updatesPersistAtomicallyWithPrivateMode() throws {
        let home = TemporaryDirectory()
        let layout = FileLayout(environment: ["OSTACK_HOME": home.path], userID: 1)
        let registry = AccountRegistry(layout: layout)
        try registry.update { $0.append(try! Self.makeAccount("work", user: "u1")) }
        try registry.update { $0.append(try! Self.makeAccount("home", user: "u2", server: "other.example")) }
        let accounts = try registry.accounts()
        #expect(accounts.map(\.alias) == ["home", "work"])
        #expect(SecureFileSystem.mode(of: layout.registryFile) == 0o600)
        let text = String(decoding: try #require(try SecureFileSystem.readFile(layout.registryFile)), as: UTF8.self)
        #expect(text.contains("\"version\" : 2"))
        // No temp file is left behind.
        let leftovers = try SecureFileSystem.contentsOfDirectory(layout.dataDirectory)
        #expect(!leftovers.contains { $0.contains(".tmp-") })
    }

    @Test func olderFormatIsMigratedAndKept() throws {
        let home = TemporaryDirectory()
        let layout = FileLayout(environment: ["OSTACK_HOME": home.path], userID: 1)
        try layout.createDirectories()
        let fixture = try #require(try SecureFileSystem.readFile(Self.fixturePath("accounts-v1.json")))
        try SecureFileSystem.writeAtomically(fixture, to: layout.registryFile)

        let accounts = try AccountRegistry(layout: layout).accounts()
        #expect(accounts.count == 2)
        let local = try #require(accounts.first { $0.alias == "local" })
        #expect(local.server.absoluteString == "http://127.0.0.1:8080")
        #expect(local.credentialKind == .apiKey)
        #expect(local.dataDirectory == "acct-fedcba9876543210")
        let work = try #require(accounts.first { $0.alias == "work" })
        #expect(work.createdAt == Date(timeIntervalSince1970: 1_767_225_600))
        // The original is kept beside the registry, byte for byte, and the registry is now format 2.
        #expect(try SecureFileSystem.readFile(layout.dataDirectory + "/accounts.v1.json") == fixture)
        let migrated = String(decoding: try #require(try SecureFileSystem.readFile(layout.registryFile)), as: UTF8.self)
        #expect(migrated.contains("\"version\" : 2"))
        // Idempotent: reading again changes nothing.
        #expect(try AccountRegistry(layout: layout).accounts() == accounts)
    }

    /// `account(withID:)` (status --short) decodes one entry and agrees with `accounts()`; an older
    /// format gives nil (the caller falls back to `accounts()`, which migrates).
    @Test func oneAccountByIDAgreesWithTheWholeRegistry() throws {
        let home = TemporaryDirectory()
        let layout = FileLayout(environment: ["OSTACK_HOME": home.path], userID: 1)
        let registry = AccountRegistry(layout: layout)
        #expect(try registry.account(withID: try #require(AccountID(rawValue: "crm.example.com::u1"))) == nil)
        try registry.update { accounts in
            for index in 0..<20 { accounts.append(try! Self.makeAccount("a\(index)", user: "u\(index)")) }
        }
        for account in try registry.accounts() {
            #expect(try registry.account(withID: account.id) == account)
        }
        #expect(try registry.account(withID: try #require(AccountID(rawValue: "crm.example.com::nobody"))) == nil)
        // The same id twice (a hand-edited registry): no guess, the caller reads the whole registry.
        let twice = try #require(try registry.accounts().first)
        try registry.update { $0.append(twice) }
        #expect(try registry.account(withID: twice.id) == nil)

        let older = TemporaryDirectory()
        let oldLayout = FileLayout(environment: ["OSTACK_HOME": older.path], userID: 1)
        try oldLayout.createDirectories()
        try SecureFileSystem.writeAtomically(
            try #require(try SecureFileSystem.readFile(Self.fixturePath("accounts-v1.json"))),
            to: oldLayout.registryFile)
        let oldRegistry = AccountRegistry(layout: oldLayout)
        let first = try #require(try oldRegistry.accounts().first)  // migrates to the current format
        #expect(try oldRegistry.account(withID: first.id) == first)
    }

    @Test func newerFormatIsRefusedAndUntouched() throws {
        let home = TemporaryDirectory()
        let layout = FileLayout(environment: ["OSTACK_HOME": home.path], userID: 1)
        try layout.createDirectories()
        let newer = Array(#"{"version": 99, "accounts": [], "future": true}"#.utf8)
        try SecureFileSystem.writeAtomically(newer, to: layout.registryFile)
        let error = #expect(throws: OStackError.self) { try AccountRegistry(layout: layout).accounts() }
        #expect(error?.code == .unsupportedFormat)
        #expect(try SecureFileSystem.readFile(layout.registryFile) == newer)
    }

    @Test func malformedOlderFormatStopsWithoutChanges() throws {
        let home = TemporaryDirectory()
        let layout = FileLayout(environment: ["OSTACK_HOME": home.path], userID: 1)
        try layout.createDirectories()
        let broken = Array(#"{"version": 1, "accounts": [{"id": "nonsense"}]}"#.utf8)
        try SecureFileSystem.writeAtomically(broken, to: layout.registryFile)
        #expect(throws: OStackError.self) { try AccountRegistry(layout: layout).accounts() }
        #expect(try SecureFileSystem.readFile(layout.registryFile) == broken)
    }

    /// Entries ostack never writes are refused with the whole registry (`unsupported-format`,
    /// damaged), by `accounts()` and by `account(withID:)` alike: a data directory that is not
    /// `acct-` and 16 lowercase hex digits, or that another entry has (`accounts remove` deletes the
    /// directory), an alias or id with control characters.
    @Test(arguments: [
        #""dataDirectory" : "..""#, #""dataDirectory" : """#, #""dataDirectory" : "acct-0123456789ABCDEF""#,
        #""dataDirectory" : "acct-01234567/9abcdef""#, #""alias" : "w\u001b]0;x\u0007""#,
        #""alias" : "w\u202eorl""#,
    ])
    func anEntryOstackNeverWritesIsRefused(_ replacement: String) throws {
        let home = TemporaryDirectory()
        let layout = FileLayout(environment: ["OSTACK_HOME": home.path], userID: 1)
        let registry = AccountRegistry(layout: layout)
        let work = try Self.makeAccount("work", user: "u1")
        try registry.update { $0.append(work) }
        var text = String(decoding: try #require(try SecureFileSystem.readFile(layout.registryFile)), as: UTF8.self)
        let key = String(replacement.prefix { $0 != ":" })
        let line = try #require(text.split(separator: "\n").first { $0.contains(key) })
        text = text.replacingOccurrences(of: line, with: "      " + replacement + ",")
        try SecureFileSystem.writeAtomically(Array(text.utf8), to: layout.registryFile)
        let error = #expect(throws: OStackError.self) { try registry.accounts() }
        #expect(error?.code == .unsupportedFormat)
        #expect(try registry.account(withID: work.id) == nil)
    }

    @Test func twoEntriesWithOneDataDirectoryAreRefused() throws {
        let home = TemporaryDirectory()
        let layout = FileLayout(environment: ["OSTACK_HOME": home.path], userID: 1)
        let registry = AccountRegistry(layout: layout)
        var home2 = try Self.makeAccount("home", user: "u2")
        home2.dataDirectory = Self.directoryName("work")
        try registry.update { $0 += [try! Self.makeAccount("work", user: "u1"), home2] }
        let error = #expect(throws: OStackError.self) { try registry.accounts() }
        #expect(error?.code == .unsupportedFormat)
    }

    /// A queue summary (`state.json`) with counts no queue holds is unreadable, not a trap when
    /// `status --short` adds them up at the next prompt.
    @Test func aStateSummaryWithImpossibleCountsIsUnreadable() throws {
        let home = TemporaryDirectory()
        let path = home.path + "/state.json"
        try SecureFileSystem.writeAtomically(
            Array(#"{"pending":9223372036854775807,"failed":1,"conflict":0}"#.utf8), to: path)
        #expect(AccountStateSummary.read(path) == nil)
        try SecureFileSystem.writeAtomically(Array(#"{"pending":-1,"failed":0,"conflict":0}"#.utf8), to: path)
        #expect(AccountStateSummary.read(path) == nil)
        try AccountStateSummary(pending: 2, failed: 1, conflict: 0, lastSyncAt: nil).write(to: path)
        #expect(AccountStateSummary.read(path)?.pending == 2)
    }

    static func fixturePath(_ name: String) -> String {
        let file = #filePath
        return String(file[..<file.lastIndex(of: "/")!]) + "/Fixtures/" + name
    }
}
