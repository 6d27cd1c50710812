import OStackTestSupport
import PlatformKit
import SQLCipherKit
import SodiumKit
import Testing

@Suite struct DatabaseOpenTests {
    let directory = TemporaryDirectory()
    var path: String { directory.appending("data.db") }

    @Test func isSQLCipher() throws {
        let database = try Database(path: path, key: .generate())
        #expect(database.cipherVersion.hasPrefix("3.4"))
    }

    @Test func wrongKeyFailsAtOpenAsUnreadable() throws {
        do {
            let database = try Database(path: path, key: .generate())
            try database.execute("CREATE TABLE t (x TEXT); INSERT INTO t VALUES ('a')")
        }
        let error = #expect(throws: SQLiteError.self) { try Database(path: path, key: .generate()) }
        #expect(error?.kind == .unreadable)
    }

    @Test func rowsOfAStatementRunAgainAfterASchemaChangeNameTheNewColumns() throws {
        let database = try Database(path: path, key: .generate())
        try database.execute("CREATE TABLE t (a TEXT, b TEXT); INSERT INTO t VALUES ('1', '2'), ('3', '4')")
        let select = try database.prepare("SELECT * FROM t")
        var rows: [Row] = []
        while try select.step() { rows.append(select.row()) }
        #expect(rows.map(\.columns) == [["a", "b"], ["a", "b"]] && rows[1].text("b") == "4")
        select.reset()
        // Same number of columns, other names: SQLite prepares the statement again on its next step.
        try database.execute("DROP TABLE t; CREATE TABLE t (c TEXT, d TEXT); INSERT INTO t VALUES ('5', '6')")
        rows = []
        while try select.step() { rows.append(select.row()) }
        #expect(rows.map(\.columns) == [["c", "d"]] && rows[0].text("d") == "6" && rows[0].text("b") == nil)
        // Stepped again after it was done, without a reset (SQLite starts it again by itself).
        try database.execute("DROP TABLE t; CREATE TABLE t (e TEXT, f TEXT); INSERT INTO t VALUES ('7', '8')")
        rows = []
        while try select.step() { rows.append(select.row()) }
        #expect(rows.map(\.columns) == [["e", "f"]] && rows[0].text("f") == "8")
        // Another number of columns.
        select.reset()
        try database.execute("DROP TABLE t; CREATE TABLE t (g TEXT); INSERT INTO t VALUES ('9')")
        rows = []
        while try select.step() { rows.append(select.row()) }
        #expect(rows.map(\.columns) == [["g"]] && rows[0].text("g") == "9")
    }

    @Test func textsAreEqualWhenTheirBytesAre() throws {
        let composed = SQLValue.text("caf\u{E9}")
        let decomposed = SQLValue.text("cafe\u{301}")
        #expect(composed != decomposed && composed == .text("caf\u{E9}"))
        #expect(Set([composed, decomposed, .text("caf\u{E9}")]).count == 2)
        // As SQLite stores and compares them.
        let database = try Database(path: path, key: .generate())
        try database.execute("CREATE TABLE t (x TEXT)")
        try database.execute("INSERT INTO t VALUES (?), (?)", [composed, decomposed])
        #expect(try database.scalarInteger("SELECT count(DISTINCT x) FROM t") == 2)
        let rows = try database.query("SELECT x FROM t ORDER BY rowid")
        #expect(rows.map { $0["x"] } == [composed, decomposed] && rows[0] != rows[1])
    }

    @Test func aPlainFileIsUnreadable() throws {
        try SecureFileSystem.writeAtomically(Array(repeating: 0x41, count: 4096), to: path)
        let error = #expect(throws: SQLiteError.self) { try Database(path: path, key: .generate()) }
        #expect(error?.kind == .unreadable)
    }

    @Test func newDatabaseAndWALFilesArePrivate() throws {
        let database = try Database(path: path, key: .generate())
        try database.execute("CREATE TABLE t (x TEXT); INSERT INTO t VALUES ('a')")
        #expect(SecureFileSystem.mode(of: path) == 0o600)
        #expect(SecureFileSystem.mode(of: path + "-wal") == 0o600)
        #expect(SecureFileSystem.mode(of: path + "-shm") == 0o600)
        #expect(try database.scalarText("PRAGMA journal_mode") == "wal")
        #expect(try database.scalarInteger("PRAGMA secure_delete") == 1)
        #expect(try database.scalarInteger("PRAGMA foreign_keys") == 1)
    }

    @Test func markerNeverAppearsInTheFileBytes() throws {
        let marker = "CNRY-MARKER-\(SecureRandom.uniform(1_000_000_000))"
        let database = try Database(path: path, key: .generate())
        try database.execute("CREATE TABLE t (x TEXT)")
        for _ in 0..<50 { try database.execute("INSERT INTO t VALUES (?)", [.text(marker)]) }
        func assertNoMarker() throws {
            for file in [path, path + "-wal", path + "-shm"] {
                guard let bytes = try SecureFileSystem.readFile(file) else { continue }
                #expect(!String(decoding: bytes, as: UTF8.self).contains(marker), "marker found in \(file)")
                #expect(!bytes.isEmpty || file.hasSuffix("-shm") || file.hasSuffix("-wal"))
            }
        }
        try assertNoMarker()  // data still in the WAL
        try database.checkpoint()
        try assertNoMarker()  // data in the main file
        #expect(try database.scalarInteger("SELECT count(*) FROM t WHERE x = ?", [.text(marker)]) == 50)
    }

    @Test func twoConnectionsSeeEachOthersCommits() throws {
        let key = DatabaseKey.generate()
        let writer = try Database(path: path, key: key)
        try writer.execute("CREATE TABLE t (x INTEGER)")
        let reader = try Database(path: path, key: key)
        try writer.execute("INSERT INTO t VALUES (1)")
        #expect(try reader.scalarInteger("SELECT count(*) FROM t") == 1)
    }
}

@Suite struct StatementTests {
    let directory = TemporaryDirectory()

    @Test func typedValuesRoundTrip() throws {
        let database = try Database(path: directory.appending("t.db"), key: .generate())
        try database.execute("CREATE TABLE v (i INTEGER, r REAL, t TEXT, b BLOB, n TEXT)")
        let values: [SQLValue] = [
            .integer(Int64.min), .real(-1.5e300), .text("ünï 🎉 \u{0}x"), .blob([0, 1, 255, 0]), .null,
        ]
        try database.execute("INSERT INTO v VALUES (?, ?, ?, ?, ?)", values)
        try database.execute("INSERT INTO v VALUES (?, ?, ?, ?, ?)", [.integer(Int64.max), 0.0, "", .blob([]), nil])
        let rows = try database.query("SELECT * FROM v ORDER BY i")
        #expect(rows[0].values == values)
        #expect(rows[1]["i"] == .integer(Int64.max))
        #expect(rows[1].text("t") == "")
        #expect(rows[0].blob("b") == [0, 1, 255, 0])
    }

    @Test func namedBindingsAndReuse() throws {
        let database = try Database(path: directory.appending("t.db"), key: .generate())
        try database.execute("CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER)")
        let insert = try database.prepare("INSERT INTO kv VALUES (:k, :v)")
        for index in 0..<100 {
            try insert.bind(named: [":k": .text("key\(index)"), ":v": .integer(Int64(index))])
            try insert.step()
        }
        #expect(try database.scalarInteger("SELECT sum(v) FROM kv") == 4950)
        #expect(throws: SQLiteError.self) { try insert.bind(named: [":nope": 1]) }
    }

    @Test func errorsNeverContainBoundValues() throws {
        let canary = "CNRY-BOUND-\(SecureRandom.uniform(1_000_000))"
        let database = try Database(path: directory.appending("t.db"), key: .generate())
        try database.execute("CREATE TABLE u (x TEXT UNIQUE NOT NULL)")
        try database.execute("INSERT INTO u VALUES (?)", [.text(canary)])
        let error = #expect(throws: SQLiteError.self) {
            try database.execute("INSERT INTO u VALUES (?)", [.text(canary)])
        }
        #expect(error?.kind == .constraint)
        #expect(!String(describing: error).contains(canary))
        #expect(!String(reflecting: error).contains(canary))
    }
}

@Suite struct TransactionTests {
    let directory = TemporaryDirectory()
    struct Boom: Error {}

    @Test func commitsOnReturnAndRollsBackOnThrow() throws {
        let database = try Database(path: directory.appending("t.db"), key: .generate())
        try database.execute("CREATE TABLE t (x INTEGER)")
        try database.transaction { () throws -> Void in try database.execute("INSERT INTO t VALUES (1)") }
        #expect(throws: Boom.self) {
            try database.transaction { () throws -> Void in
                try database.execute("INSERT INTO t VALUES (2)")
                throw Boom()
            }
        }
        #expect(try database.scalarInteger("SELECT count(*) FROM t") == 1)
    }

    /// `snapshot`: every statement in it sees the commit it started on while another connection
    /// commits (WAL: the writer does not wait); the next read outside sees the new commit. Nested in
    /// a transaction, it is that transaction.
    @Test func aSnapshotSeesOneCommitWhileAnotherConnectionWrites() throws {
        let path = directory.appending("s.db")
        let key = DatabaseKey.generate()
        let reader = try Database(path: path, key: key)
        try reader.execute("CREATE TABLE t (x INTEGER)")
        let writer = try Database(path: path, key: key)
        let seen = try reader.snapshot { () throws -> [Int64?] in
            let before = try reader.scalarInteger("SELECT count(*) FROM t")
            try writer.execute("INSERT INTO t VALUES (1)")
            return [before, try reader.scalarInteger("SELECT count(*) FROM t")]
        }
        #expect(seen == [0, 0])
        #expect(try reader.scalarInteger("SELECT count(*) FROM t") == 1)
        try reader.transaction { () throws -> Void in
            try reader.snapshot { () throws -> Void in try reader.execute("INSERT INTO t VALUES (2)") }
        }
        #expect(try writer.scalarInteger("SELECT count(*) FROM t") == 2)
        #expect(throws: Boom.self) { try reader.snapshot { () throws -> Void in throw Boom() } }
        #expect(try reader.scalarInteger("SELECT count(*) FROM t") == 2)
    }

    @Test func nestedSavepointRollsBackOnlyItsPart() throws {
        let database = try Database(path: directory.appending("t.db"), key: .generate())
        try database.execute("CREATE TABLE t (x INTEGER)")
        try database.transaction { () throws -> Void in
            try database.execute("INSERT INTO t VALUES (1)")
            try? database.transaction { () throws -> Void in
                try database.execute("INSERT INTO t VALUES (2)")
                throw Boom()
            }
            try database.execute("INSERT INTO t VALUES (3)")
        }
        #expect(try database.query("SELECT x FROM t ORDER BY x").map { $0[0] } == [1, 3])
    }
}

@Suite struct MigratorTests {
    let directory = TemporaryDirectory()
    let migrator = Migrator([
        .init("create-items", sql: "CREATE TABLE items (id TEXT PRIMARY KEY, body BLOB)"),
        .init("add-index", sql: "CREATE INDEX items_body ON items(body)"),
    ])

    @Test func runsFromEmptyAndIsIdempotent() throws {
        let database = try Database(path: directory.appending("t.db"), key: .generate())
        #expect(try migrator.migrate(database) == ["create-items", "add-index"])
        #expect(try migrator.migrate(database).isEmpty)
        #expect(try database.scalarInteger("SELECT count(*) FROM schema_migrations") == 2)
        #expect(try database.scalarInteger("SELECT count(*) FROM sqlite_master WHERE name = 'items_body'") == 1)
    }

    @Test func appliesOnlyWhatIsNew() throws {
        let database = try Database(path: directory.appending("t.db"), key: .generate())
        try Migrator(Array(migrator.migrations.prefix(1))).migrate(database)
        #expect(try migrator.migrate(database) == ["add-index"])
    }

    @Test func refusesUnknownRecordedMigrations() throws {
        let database = try Database(path: directory.appending("t.db"), key: .generate())
        try Migrator(migrator.migrations + [.init("from-the-future", sql: "CREATE TABLE f (x)")]).migrate(database)
        let error = #expect(throws: SQLiteError.self) { try migrator.migrate(database) }
        #expect(error?.kind == .unknownMigrations)
    }

    @Test func aFailingMigrationChangesNothing() throws {
        let database = try Database(path: directory.appending("t.db"), key: .generate())
        let broken = Migrator(migrator.migrations + [.init("broken", sql: "CREATE TABLE z (x); THIS IS NOT SQL")])
        #expect(throws: (any Error).self) { try broken.migrate(database) }
        #expect(try database.scalarInteger("SELECT count(*) FROM schema_migrations") == 2)
        #expect(try database.scalarInteger("SELECT count(*) FROM sqlite_master WHERE name = 'z'") == 0)
    }
}

@Suite struct FunctionAndKeyTests {
    let directory = TemporaryDirectory()

    @Test func registeredFunctionIsCallable() throws {
        let database = try Database(path: directory.appending("t.db"), key: .generate())
        try database.registerFunction("ostack_reverse", argumentCount: 1) { arguments in
            guard case .text(let text) = arguments[0] else { return .null }
            return .text(String(text.reversed()))
        }
        #expect(try database.scalarText("SELECT ostack_reverse('abc')") == "cba")
        #expect(try database.scalarText("SELECT ostack_reverse(NULL)") == nil)
        struct Refused: Error {}
        try database.registerFunction("ostack_fail", argumentCount: 0) { _ in throw Refused() }
        #expect(throws: SQLiteError.self) { try database.scalarText("SELECT ostack_fail()") }
    }

    @Test func rekeyInPlace() throws {
        let path = directory.appending("t.db")
        let old = DatabaseKey.generate()
        let new = DatabaseKey.generate()
        do {
            let database = try Database(path: path, key: old)
            try database.execute("CREATE TABLE t (x TEXT); INSERT INTO t VALUES ('kept')")
            try database.rekey(to: new)
        }
        #expect(try Database(path: path, key: new).scalarText("SELECT x FROM t") == "kept")
        let error = #expect(throws: SQLiteError.self) { try Database(path: path, key: old) }
        #expect(error?.kind == .unreadable)
    }

    @Test func exportAndReplace() throws {
        let path = directory.appending("t.db")
        let old = DatabaseKey.generate()
        let new = DatabaseKey.generate()
        do {
            let database = try Database(path: path, key: old)
            try database.execute("CREATE TABLE t (x TEXT); INSERT INTO t VALUES ('kept')")
            try database.export(to: path + ".rekey", key: new)
        }
        try Database.replace(path, with: path + ".rekey")
        #expect(try Database(path: path, key: new).scalarText("SELECT x FROM t") == "kept")
        #expect(throws: SQLiteError.self) { try Database(path: path, key: old) }
        #expect(!SecureFileSystem.exists(path + ".rekey"))
        #expect(SecureFileSystem.mode(of: path) == 0o600)
    }

    @Test func integrityCheckPasses() throws {
        let database = try Database(path: directory.appending("t.db"), key: .generate())
        try database.execute("CREATE TABLE t (x)")
        #expect(try database.integrityProblem() == nil)
    }
}
