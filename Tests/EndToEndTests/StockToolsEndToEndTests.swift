import PlatformKit
import OStackTestSupport
import Testing

/// The stock `sqlcipher` shell (Debian's package) reads what ostack writes, by the steps in
/// docs/storage.md: an `export-database` copy, and a tracked account's live database.
@Suite(.serialized) struct StockToolsEndToEndTests {
    func trackedAccount() throws -> (DevServerProcess, OStackRunner) {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        let login = try ostack.login(server.url, "alice@example.com", "alice-pass", extra: ["--alias", "work"])
        try #require(login.status == 0, "\(login.stderr)")
        for index in 1...3 {
            #expect(try ostack.run(["records", "create", "task", "--set", "title=Stock \(index)"]).status == 0)
        }
        #expect(try ostack.run(["sync", "track", "task"]).status == 0)
        #expect(try ostack.run(["sync"]).status == 0)
        return (server, ostack)
    }

    func sqlcipher(_ file: String, _ script: String) throws -> ProcessResult {
        try runProcess(executable: "/usr/bin/sqlcipher", arguments: [file], stdin: Array(script.utf8), timeout: 60)
    }

    func mode(_ path: String) throws -> String {
        try runProcess(executable: "/usr/bin/stat", arguments: ["-c", "%a", path]).stdout.trimmingWhitespaceLite()
    }

    @Test func anExportOpensInTheStockShellWithItsPassphrase() throws {
        let (server, ostack) = try trackedAccount()
        defer { withExtendedLifetime(server) {} }
        let file = ostack.home.path + "/backup.db"
        let export = try ostack.run(["export-database", file, "--passphrase-stdin"], stdin: "correct horse battery\n")
        #expect(export.status == 0, "\(export.stderr)")
        #expect(try mode(file) == "600")
        let read = try sqlcipher(
            file,
            "PRAGMA key = 'correct horse battery';\nPRAGMA integrity_check;\nSELECT count(*) FROM records WHERE object = 'task';\n"
        )
        #expect(read.stdout.contains("ok\n3"), "\(read.stdout) \(read.stderr)")
        let wrong = try sqlcipher(file, "PRAGMA key = 'wrong horse';\nSELECT count(*) FROM records;\n")
        #expect(wrong.stderr.contains("not a database") || wrong.status != 0, "\(wrong.stdout)")
        // Never overwritten; the copy was written beside the name and nothing of that is left.
        #expect(try ostack.run(["export-database", file, "--passphrase-stdin"], stdin: "another one\n").status == 9)
        let beside = try SecureFileSystem.contentsOfDirectory(ostack.home.path)
        #expect(!beside.contains { $0.contains(".partial-") }, "\(beside)")
        // A plaintext copy opens without a key.
        let plain = ostack.home.path + "/plain.db"
        #expect(try ostack.run(["export-database", plain, "--plaintext"]).status == 0)
        let plainRead = try sqlcipher(
            plain, "PRAGMA integrity_check;\nSELECT count(*) FROM records WHERE object = 'task';\n")
        #expect(plainRead.stdout.contains("ok\n3"), "\(plainRead.stdout) \(plainRead.stderr)")
        #expect(try ostack.run(["audit", "--event", "database.export", "--json"]).stdout.contains("database.export"))
    }

    /// The account's database file and its raw key (hex) from the keyring, as docs/storage.md
    /// tells a user to find them.
    func liveDatabase(_ ostack: OStackRunner) throws -> (path: String, hex: String) {
        let accounts = try ostack.run(["accounts", "list", "--json"]).stdout
        let id = try #require(
            accounts.firstRange(of: "\"id\":\"").map { String(accounts[$0.upperBound...].prefix { $0 != "\"" }) })
        let registry = try runProcess(executable: "/bin/cat", arguments: [ostack.home.path + "/data/accounts.json"])
            .stdout
        let directory = try #require(
            registry.firstRange(of: "\"dataDirectory\" : \"").map {
                String(registry[$0.upperBound...].prefix { $0 != "\"" })
            }
                ?? registry.firstRange(of: "\"dataDirectory\":\"").map {
                    String(registry[$0.upperBound...].prefix { $0 != "\"" })
                })
        let lookup = try runProcess(
            executable: "/bin/sh",
            arguments: [
                "-c",
                "secret-tool lookup app ostack namespace \"$NS\" account \"$ACCT\" kind db-key version 1 | od -An -tx1 | tr -d ' \\n'",
            ],
            environment: ostack.baseEnvironment.merging(["NS": "\(ostack.keyringPrefix):auth:\(id)", "ACCT": id]) { $1 }
        )
        try #require(lookup.stdout.count == 64, "\(lookup.stdout) \(lookup.stderr)")
        return (ostack.home.path + "/data/accounts/" + directory + "/data.db", lookup.stdout)
    }

    /// Migration `0006-mirror-runs` (docs/decisions/0013-mirror-runs.md) on a database of the
    /// previous schema (0005: `records_key` and `record_fields`, made here from a live one with the
    /// stock shell), killed (`kill -9`) just before its commit: the file keeps the 0005 schema, intact
    /// and unrecorded; the next command migrates it, and lookups by value and by id answer as before.
    @Test func theMirrorRunsMigrationSurvivesKill9() throws {
        let (server, ostack) = try trackedAccount()
        defer { withExtendedLifetime(server) {} }
        let (database, hex) = try liveDatabase(ostack)
        let unlock = "PRAGMA key = \"x'\(hex)'\";\nPRAGMA cipher_page_size = 4096;\n"
        let schemaSQL =
            "SELECT name FROM sqlite_master WHERE name IN ('records_key', 'record_fields_value', 'mirror_chunks') ORDER BY name;\n"
        let downgraded = try sqlcipher(
            database,
            unlock + """
                DROP TABLE mirror_chunks;
                DROP TABLE mirror_levels;
                CREATE UNIQUE INDEX records_key ON records (object, id);
                CREATE TABLE record_fields (
                    rid INTEGER NOT NULL, field TEXT NOT NULL, object TEXT NOT NULL, value TEXT NOT NULL,
                    PRIMARY KEY (rid, field)) WITHOUT ROWID;
                CREATE INDEX record_fields_value ON record_fields (object, field, value);
                CREATE TRIGGER records_drop_fields AFTER DELETE ON records
                    BEGIN DELETE FROM record_fields WHERE rid = old.rid; END;
                INSERT INTO record_fields SELECT rid, 'title', object,
                    substr(data, instr(data, '"title":"Stock ') + 9, 7) FROM records WHERE object = 'task';
                DELETE FROM schema_migrations WHERE name = '0006-mirror-runs';
                SELECT group_concat(value) FROM (SELECT value FROM record_fields ORDER BY value);

                """ + schemaSQL)
        #expect(
            downgraded.stdout == "Stock 1,Stock 2,Stock 3\nrecord_fields_value\nrecords_key\n",
            "\(downgraded.stdout) \(downgraded.stderr)")
        let lookup = ["records", "list", "task", "--local", "--filter", "title = 'Stock 2'", "--json"]
        let killed = try ostack.run(lookup, environment: ["OSTACK_FAILPOINT": "mirror-runs-migration.before-commit"])
        #expect(killed.status == 137, "\(killed.stderr)")
        let after = try sqlcipher(
            database,
            unlock + "PRAGMA integrity_check;\n" + schemaSQL
                + "SELECT count(*) FROM schema_migrations WHERE name = '0006-mirror-runs';\n")
        #expect(after.stdout == "ok\nrecord_fields_value\nrecords_key\n0\n", "\(after.stdout) \(after.stderr)")

        let found = try ostack.run(lookup)
        #expect(found.status == 0 && found.stdout.contains("\"total\":1") && found.stdout.contains("Stock 2"), "\(found.stdout)")
        let ids = try ostack.run(["records", "list", "task", "--local", "--json"]).stdout
        let id = try #require(ids.firstRange(of: "\"id\":\"").map { String(ids[$0.upperBound...].prefix { $0 != "\"" }) })
        #expect(try ostack.run(["records", "get", "task", "--local", "--", id]).status == 0)
        let migrated = try sqlcipher(database, unlock + "PRAGMA integrity_check;\n" + schemaSQL)
        #expect(migrated.stdout == "ok\nmirror_chunks\n", "\(migrated.stdout) \(migrated.stderr)")
    }

    /// docs/storage.md, "Opening a database with the stock sqlcipher CLI": the raw key from the
    /// keyring, the page size, then integrity_check and an export of the live database.
    @Test func theLiveDatabaseOpensByTheDocumentedSteps() throws {
        let (server, ostack) = try trackedAccount()
        defer { withExtendedLifetime(server) {} }
        let (database, hex) = try liveDatabase(ostack)
        let copy = ostack.home.path + "/live-copy.db"
        let read = try sqlcipher(
            database,
            """
            PRAGMA key = "x'\(hex)'";
            PRAGMA cipher_page_size = 4096;
            PRAGMA integrity_check;
            SELECT count(*) FROM records WHERE object = 'task';
            ATTACH DATABASE '\(copy)' AS plain KEY '';
            SELECT sqlcipher_export('plain');
            DETACH DATABASE plain;

            """)
        #expect(read.stdout.hasPrefix("ok\n3"), "\(read.stdout) \(read.stderr)")
        #expect(!read.stderr.contains("no such function"), "\(read.stderr)")
        let copied = try sqlcipher(copy, "SELECT count(*) FROM records WHERE object = 'task';\n")
        #expect(copied.stdout.contains("3"), "\(copied.stdout) \(copied.stderr)")
    }
}

extension String {
    func trimmingWhitespaceLite() -> String {
        String(drop { $0.isWhitespace }.reversed().drop { $0.isWhitespace }.reversed())
    }
}
