import FoundationEssentials
import KeyringKit
@testable import OStackCore
import OStackTestSupport
import PlatformKit
import SodiumKit
import SQLCipherKit
import Testing

/// The metadata cache (docs/sync.md, "Metadata"): TTL, If-None-Match/304, stale use offline, schema versions with
/// re-validation of local records — against a real SQLCipher account database and a scripted server.
@Suite struct MetadataCacheTests {
    let home = TemporaryDirectory()
    let keyring = InMemoryKeyring()
    let server = FakeObjectStack()

    func signedIn() throws -> AccountSession {
        let environment = AuthEnvironment(
            layout: FileLayout(environment: ["OSTACK_HOME": home.path], userID: 1),
            secrets: KeyringSecretStore(keyring: keyring), namespaces: KeyringNamespaces(prefix: "test"),
            transport: server,
            keyringBackend: "secret-service", provisionDatabase: AccountDatabase.provision)
        let account = try LoginService(environment: environment).login(
            LoginService.Request(
                server: try ServerURL(parsing: "http://127.0.0.1:9"), email: "alice@example.com",
                credential: .password(SecretBytes(copying: Array("alice-pass".utf8))), alias: nil, makeDefault: true))
        return try AccountSession(account: account, environment: environment)
    }

    /// Issue 14, defect 6: a remote list whose server gives a `total` it never reaches, one new
    /// record per page, is cut off at its bound (a hundredth as many pages as records) instead of
    /// asking for ever.
    @Test func aRemoteListThatNeverEndsIsCutOff() throws {
        let service = try signedIn()
        server.state.withLock { $0.endlessPages = true }
        let before = server.state.withLock { $0.dataStatuses.count }
        var handed = 0
        let error = #expect(throws: OStackError.self) {
            _ = try RecordReads(session: service).listRemote(.init(object: "task"), bound: 1_000) { _ in handed += 1 }
        }
        #expect(error?.code == .unexpectedResponse)
        #expect(handed == 10)
        #expect(server.state.withLock { $0.dataStatuses.count } - before == 11)
    }

    @Test func freshEntriesAreServedFromTheCacheThenRevalidatedWithAnETag() throws {
        let service = try signedIn()
        #expect(try service.metadata.object("task").schema.field("title")?.label == "Title")
        #expect(try service.metadata.object("task").stale == false)
        #expect(server.state.withLock { $0.metaRequests } == 1)  // second read: within the TTL

        service.metadata.ttl = 0
        let revalidated = try service.metadata.object("task")
        #expect(revalidated.schemaVersion == 1 && !revalidated.stale)
        #expect(server.state.withLock { ($0.metaRequests, $0.notModified) } == (2, 1))
    }

    /// `eachLocalJSON` (export) reads an object that is a small share of the mirror through the key
    /// index in id order, in batches: every record once, an empty id included; a large share is read
    /// in storage order, the same records.
    @Test func localReadsOfASmallShareMissNoRecord() throws {
        let service = try signedIn()
        try service.store.transaction { () throws(OStackError) in
            for index in 0..<200 { try service.store.putRecord("project", ["id": .string("n\(index)")], version: nil) }
            for id in ["b", "", "a", "c"] { try service.store.putRecord("task", ["id": .string(id)], version: nil) }
        }
        let scanner = FieldScanner(fields: ["id"])
        func ids() throws -> [String] {
            var seen: [String] = []
            let count = try service.reads.eachLocalJSON("task", filter: nil, batch: 3) { (bytes) throws(OStackError) in
                if case .string(let id) = scanner.scan(bytes)[0] { seen.append(id) }
                return true
            }
            #expect(count == seen.count)
            return seen.sorted()
        }
        #expect(try service.store.isSmallShare("task"))
        #expect(try ids() == ["", "a", "b", "c"])
        // Now `task` is most of the mirror: read in storage order, the same way complete.
        try service.store.transaction { () throws(OStackError) in
            for index in 0..<2000 { try service.store.putRecord("task", ["id": .string("t\(index)")], version: nil) }
        }
        #expect(try !service.store.isSmallShare("task"))
        #expect(try ids() == (["", "a", "b", "c"] + (0..<2000).map { "t\($0)" }).sorted())
    }

    /// A caller that fails part-way through `eachLocalJSON` (a full disk while exporting) gets its own
    /// error, and the store is usable at once: the reading thread has ended.
    @Test func aReaderStoppedPartWayLeavesTheStoreUsable() throws {
        let service = try signedIn()
        try service.store.transaction { () throws(OStackError) in
            // About 2.5 MB in all, so the reading thread is still going (ten 256 KiB chunks) when
            // the caller stops.
            let padding = JSONValue.string(String(repeating: "x", count: 480))
            for index in 0..<5000 {
                try service.store.putRecord("task", ["id": .string("t\(index)"), "notes": padding], version: nil)
            }
        }
        var seen = 0
        #expect(throws: OStackError.self) {
            try service.reads.eachLocalJSON("task", filter: nil, batch: 100) { (_) throws(OStackError) -> Bool in
                seen += 1
                if seen == 1234 { throw OStackError(.invalidInput, detail: "test stop") }
                return true
            }
        }
        #expect(seen == 1234)
        try service.store.putRecord("task", ["id": .string("after")], version: nil)
        let count = try service.reads.eachLocalJSON("task", filter: nil) { (_) throws(OStackError) in true }
        #expect(count == 5001)
    }

    @Test func staleMetadataIsUsedOfflineAndMissingMetadataIsOffline() throws {
        let service = try signedIn()
        _ = try service.metadata.object("task")
        service.metadata.ttl = 0
        server.state.withLock { $0.failure = .connectionRefused }
        let cached = try service.metadata.object("task")
        #expect(cached.stale && cached.schema.name == "task")
        #expect(throws: OStackError.self) { try service.metadata.object("project") }
        do {
            _ = try service.metadata.object("project")
        } catch {
            #expect(error.code == .offline)
        }
    }

    @Test func aChangedSchemaIsANewVersionAndLocalRecordsAreRevalidated() throws {
        let service = try signedIn()
        _ = try service.metadata.object("task")
        _ = try service.writes.create("task", data: ["title": "Short"], offline: true)
        _ = try service.writes.create("task", data: ["title": "Medium length"], offline: true)
        // Rejected now: too long for the current maxLength of 20.
        #expect(throws: OStackError.self) {
            _ = try service.writes.create("task", data: ["title": "This title is too long for twenty"], offline: true)
        }
        server.state.withLock {
            $0.taskItem =
                #"{"name":"task","label":"Task","fields":{"title":{"type":"text","label":"Title","required":true,"maxLength":10},"notes":{"type":"text","label":"Notes"}}}"#
        }
        service.metadata.ttl = 0
        let changed = try service.metadata.object("task")
        #expect(changed.schemaVersion == 2)
        #expect(changed.schema.field("notes") != nil)
        let flagged = try service.store.rows("SELECT count(*) AS n FROM records WHERE object = 'task' AND invalid = 1")
        #expect(flagged.first?.int("n") == 1)  // the 13-character title no longer passes
        let versions = try service.store.rows("SELECT DISTINCT schema_version FROM records WHERE object = 'task'")
        #expect(versions.map { $0.int("schema_version") } == [2])
        #expect(try service.metadata.object("task").schemaVersion == 2)  // unchanged again: same version
    }
}

/// Account databases: 4 KiB pages for new files, 1 KiB files from earlier versions still open.
@Suite struct AccountDatabasePageSizeTests {
    let home = TemporaryDirectory()

    @Test func newFilesUse4KiBPagesAndOld1KiBFilesStillOpen() throws {
        let key = AccountDataKey(SecureRandom.secret(32))
        let fresh = try AccountDatabase.open(path: home.path + "/new.db", key: key)
        #expect(try fresh.scalarText("PRAGMA cipher_page_size") == "4096")

        // A database as ostack 0.5 made it: SQLCipher's default 1 KiB pages.
        let oldPath = home.path + "/old.db"
        do {
            let old = try Database(path: oldPath, key: DatabaseKey(key.bytes))
            try Migrator(Array(AccountDatabase.migrator.migrations.prefix(1))).migrate(old)
            try old.execute("INSERT INTO account_info VALUES ('k', 'v')")
        }
        let reopened = try AccountDatabase.open(path: oldPath, key: key)
        #expect(try reopened.scalarText("PRAGMA cipher_page_size") == "1024")
        #expect(try reopened.scalarText("SELECT value FROM account_info WHERE key = 'k'") == "v")

        // A wrong key fails with both page sizes: unreadable, not something else.
        #expect(throws: OStackError.self) {
            _ = try AccountDatabase.open(path: oldPath, key: AccountDataKey(SecureRandom.secret(32)))
        }
        do {
            _ = try AccountDatabase.open(path: oldPath, key: AccountDataKey(SecureRandom.secret(32)))
        } catch {
            #expect(error.code == .storageUnreadable)
        }
    }
}
