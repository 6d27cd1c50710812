import FoundationEssentials
import SQLCipherKit

/// One account's local data (SPEC §7–§8) in its SQLCipher database: the record mirror, the sync
/// queue, tracked objects and the metadata cache. Every method is one statement or one transaction;
/// callers compose writes with `transaction`.
///
/// Records are stored as their canonical JSON (`JSONValue.serialized`, sorted keys). Filters run in
/// SQL through `ostack_match` (the Swift `LocalFilter`, one evaluator for every query) and fields are
/// read by `ostack_field`, which also backs per-object expression indexes on equality-friendly
/// fields (select, lookup, boolean, …), so an indexed equality is an index lookup.
public final class LocalStore: @unchecked Sendable {
    // @unchecked: wraps one `Database` connection, used by one thread at a time like the connection.
    public let database: Database
    let clock: Clock

    public init(database: Database, clock: Clock = .system) throws(OStackError) {
        self.database = database
        self.clock = clock
        // `AccountDatabase.open` has registered `ostack_field` (it must exist before anything
        // touches the records' indexes); `ostack_match` is registered per query.
        // A 32 MB page cache: scans and bulk pulls touch tens of thousands of (encrypted) pages.
        try run("PRAGMA cache_size = -32768")
    }

    // MARK: Schema

    /// The data tables (migration `0002-data`), appended to the account schema.
    public static let schema = """
        CREATE TABLE records (
            object TEXT NOT NULL, id TEXT NOT NULL, data TEXT NOT NULL, version TEXT,
            schema_version INTEGER NOT NULL DEFAULT 0, invalid INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (object, id)) WITHOUT ROWID;
        CREATE TABLE queue (
            seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, object TEXT NOT NULL,
            record_id TEXT NOT NULL, operation TEXT NOT NULL, payload TEXT, base_version TEXT,
            base_snapshot TEXT, status TEXT NOT NULL DEFAULT 'pending', attempts INTEGER NOT NULL DEFAULT 0,
            retryable INTEGER NOT NULL DEFAULT 1, next_attempt_at REAL NOT NULL DEFAULT 0, last_error TEXT,
            sent INTEGER NOT NULL DEFAULT 0, revision INTEGER NOT NULL DEFAULT 0, theirs TEXT, theirs_version TEXT,
            created_at REAL NOT NULL, updated_at REAL NOT NULL);
        CREATE INDEX queue_record ON queue (object, record_id, seq);
        CREATE INDEX queue_status ON queue (status, next_attempt_at);
        CREATE TABLE tracked (
            object TEXT PRIMARY KEY NOT NULL, cursor_version TEXT, cursor_id TEXT, last_pull_at REAL,
            last_reconcile_at REAL, indexed_fields TEXT NOT NULL DEFAULT '');
        CREATE TABLE meta_objects (
            name TEXT PRIMARY KEY NOT NULL, etag TEXT, item TEXT NOT NULL, fetched_at REAL NOT NULL,
            fingerprint TEXT NOT NULL, schema_version INTEGER NOT NULL DEFAULT 1);
        CREATE TABLE meta_documents (kind TEXT PRIMARY KEY NOT NULL, body TEXT NOT NULL, fetched_at REAL NOT NULL);
        """

    static func registerFunctions(_ database: Database) throws(OStackError) {
        do {
            // ostack_field(data, name): a top-level field of a record's JSON as an SQL value.
            try database.registerRawFunction("ostack_field", argumentCount: 2, deterministic: true) { arguments in
                let value = arguments.withBytes(at: 1) { name in
                    arguments.withBytes(at: 0) { data in FieldScanner.value(of: name, in: data) }
                }
                switch value {
                case .missing, .null, .compound: return .null
                case .bool(let flag): return .integer(flag ? 1 : 0)
                case .number(let number): return .real(number)
                case .string(let text): return .text(text)
                }
            }
        } catch {
            throw OStackError(.storageFailure, detail: "registering SQL functions: \(error)")
        }
    }

    // MARK: Transactions and errors

    public func transaction<R>(_ body: () throws(OStackError) -> R) throws(OStackError) -> R {
        do {
            return try database.transaction(body)
        } catch let error as OStackError {
            throw error
        } catch {
            throw Self.storage(error)
        }
    }

    static func storage(_ error: any Error) -> OStackError {
        if let sqlite = error as? SQLiteError {
            if sqlite.kind == .unreadable { return OStackError(.storageUnreadable, detail: "database: \(sqlite.kind)") }
            return OStackError(
                .storageFailure,
                detail: "database: \(sqlite.kind) \(sqlite.code)/\(sqlite.extendedCode) in \(sqlite.operation)")
        }
        return OStackError(.storageFailure, detail: "database: \(type(of: error))")
    }

    /// Prepared statements by SQL text: the queue and record paths run the same few statements
    /// thousands of times per push.
    private var statements: [String: Statement] = [:]

    func statement(_ sql: String, _ bindings: [SQLValue]) throws(OStackError) -> Statement {
        do {
            let statement: Statement
            if let cached = statements[sql] {
                statement = cached
            } else {
                statement = try database.prepare(sql)
                if statements.count < 64 { statements[sql] = statement }
            }
            try statement.bind(bindings)
            return statement
        } catch {
            throw Self.storage(error)
        }
    }

    func run(_ sql: String, _ bindings: [SQLValue] = []) throws(OStackError) {
        // Statements without bindings may hold several commands (PRAGMA, DDL): not cached.
        if bindings.isEmpty {
            do { try database.execute(sql) } catch { throw Self.storage(error) }
            return
        }
        let statement = try statement(sql, bindings)
        defer { statement.reset() }
        do { while try statement.step() {} } catch { throw Self.storage(error) }
    }

    func rows(_ sql: String, _ bindings: [SQLValue] = []) throws(OStackError) -> [Row] {
        let statement = try statement(sql, bindings)
        defer { statement.reset() }
        var rows: [Row] = []
        do { while try statement.step() { rows.append(statement.row()) } } catch { throw Self.storage(error) }
        return rows
    }

    func integer(_ sql: String, _ bindings: [SQLValue] = []) throws(OStackError) -> Int {
        let statement = try statement(sql, bindings)
        defer { statement.reset() }
        do {
            guard try statement.step(), case .integer(let value) = statement.value(at: 0) else { return 0 }
            return Int(value)
        } catch {
            throw Self.storage(error)
        }
    }

    var now: Double { clock.now().timeIntervalSince1970 }

    // MARK: Records

    public struct StoredRecord: Sendable, Equatable {
        public var object: String
        public var id: String
        public var data: JSONValue
        public var version: String?
    }

    public func record(_ object: String, _ id: String) throws(OStackError) -> StoredRecord? {
        guard
            let row = try rows(
                "SELECT data, version FROM records WHERE object = ? AND id = ?", [.text(object), .text(id)]
            ).first,
            let text = row.text("data"), let data = JSONValue.parse(Array(text.utf8))
        else { return nil }
        return StoredRecord(object: object, id: id, data: data, version: row.text("version"))
    }

    /// Writes a record as the server has it (or as a local edit shows it).
    public func putRecord(_ object: String, _ data: JSONValue, version: String?) throws(OStackError) {
        guard let id = data["id"]?.stringValue else { return }
        try run(
            "INSERT OR REPLACE INTO records (object, id, data, version) VALUES (?, ?, ?, ?)",
            [
                .text(object), .text(id), .text(String(decoding: data.serialized(), as: UTF8.self)),
                version.map { .text($0) } ?? .null,
            ])
    }

    public func deleteRecord(_ object: String, _ id: String) throws(OStackError) {
        try run("DELETE FROM records WHERE object = ? AND id = ?", [.text(object), .text(id)])
    }

    /// Replaces a local id with the server's (a server that ignored the client-chosen id).
    public func renameRecord(_ object: String, from oldID: String, to newID: String) throws(OStackError) {
        try run("UPDATE records SET id = ? WHERE object = ? AND id = ?", [.text(newID), .text(object), .text(oldID)])
        try run(
            "UPDATE queue SET record_id = ? WHERE object = ? AND record_id = ?",
            [.text(newID), .text(object), .text(oldID)])
    }

    public func recordCount(_ object: String) throws(OStackError) -> Int {
        try integer("SELECT count(*) FROM records WHERE object = ?", [.text(object)])
    }

    /// Pulled records, written in one transaction with one prepared statement; a record with a queued
    /// local change is left alone (SPEC §8: pending changes are never overwritten). Returns how many
    /// were written.
    public func applyPulled(_ object: String, _ records: [(id: String, version: String?, json: [UInt8])])
        throws(OStackError) -> Int
    {
        try transaction { () throws(OStackError) -> Int in
            // Records with a queued change are skipped (usually none: one query per page).
            let queued = Set(
                try rows("SELECT record_id FROM queue WHERE object = ?", [.text(object)]).compactMap {
                    $0.text("record_id")
                })
            do {
                let statement = try statement(
                    "INSERT OR REPLACE INTO records (object, id, data, version) VALUES (?, ?, ?, ?)", [])
                var written = 0
                for record in records where !queued.contains(record.id) {
                    try statement.bind([
                        .text(object), .text(record.id), .text(String(decoding: record.json, as: UTF8.self)),
                        record.version.map { .text($0) } ?? .null,
                    ])
                    _ = try statement.step()
                    written += 1
                }
                statement.reset()
                return written
            } catch {
                throw Self.storage(error)
            }
        }
    }

    // MARK: Local queries

    public struct LocalQuery: Sendable {
        public var object: String
        public var filter: FilterCondition?
        public var sort: [SortKey] = []
        public var limit: Int?
        public var offset: Int = 0
        /// Field types from metadata (`QueryChecker.fieldTypes`), so `datetime` comparisons are typed.
        public var fieldTypes: [String: String]

        public init(
            object: String, filter: FilterCondition? = nil, sort: [SortKey] = [], limit: Int? = nil, offset: Int = 0,
            fieldTypes: [String: String] = [:]
        ) {
            self.object = object
            self.filter = filter
            self.sort = sort
            self.limit = limit
            self.offset = offset
            self.fieldTypes = fieldTypes
        }
    }

    /// Runs a filter on the mirror. The whole filter is evaluated by `ostack_match`; a top-level
    /// equality (or `in`) on an indexed field is also given to SQL as an index lookup that narrows
    /// the rows first (only for comparands where SQL equality and the server's agree).
    public func query(_ query: LocalQuery) throws(OStackError) -> (records: [[UInt8]], total: Int) {
        guard ObjectSchema.isIdentifier(query.object) else { return ([], 0) }
        // The object is inlined (a checked identifier) so SQLite can use the object's partial indexes.
        var sql = "FROM records WHERE object = '\(query.object)'"
        var bindings: [SQLValue] = []
        var narrowed = false
        if let filter = query.filter {
            let indexed = try indexedFields(query.object)
            for (field, values) in Self.indexableEqualities(filter)
            where indexed.contains(field) && !["date", "datetime", "time"].contains(query.fieldTypes[field] ?? "") {
                narrowed = true
                sql += " AND ostack_field(data, '\(field)') IN (\(values.map { _ in "?" }.joined(separator: ", ")))"
                bindings += values.map { .text($0) }
            }
            let compiled = LocalFilter(filter, fieldTypes: query.fieldTypes)
            do {
                try database.registerRawFunction("ostack_match", argumentCount: 1, deterministic: false) { arguments in
                    .integer(arguments.withBytes(at: 0) { compiled.matches($0) } ? 1 : 0)
                }
            } catch {
                throw Self.storage(error)
            }
            sql += " AND ostack_match(data)"
        }
        var order = query.sort.map { key in
            key.field == "id"
                ? "id\(key.descending ? " DESC" : "")"
                : "ostack_field(data, '\(key.field)')\(key.descending ? " DESC" : "")"
        }
        // `+id`: when an index narrows the rows, do not let "ORDER BY id" talk SQLite into a full
        // primary-key scan instead (it has no statistics to know better).
        order.append(narrowed ? "+id" : "id")
        // One pass: every match is counted (for `total`), only the requested page is copied out.
        let page = "SELECT data " + sql + " ORDER BY " + order.joined(separator: ", ")
        let first = max(0, query.offset)
        let end = query.limit.map { first + $0 } ?? Int.max
        do {
            let statement = try database.prepare(page)
            try statement.bind(bindings)
            var records: [[UInt8]] = []
            var total = 0
            while try statement.step() {
                if total >= first && total < end { records.append(statement.withColumnBytes(at: 0) { Array($0) }) }
                total += 1
            }
            return (records, total)
        } catch {
            throw Self.storage(error)
        }
    }

    /// Top-level `field = 'text'` / `field in ('a','b')` conjuncts whose comparands are non-numeric
    /// strings: there SQL text equality selects exactly the rows the server's comparison would.
    static func indexableEqualities(_ filter: FilterCondition) -> [(String, [String])] {
        let conjuncts: [FilterCondition]
        if case .all(let children) = filter { conjuncts = children } else { conjuncts = [filter] }
        var result: [(String, [String])] = []
        for conjunct in conjuncts {
            guard case .compare(let field, let op, .value(let value)) = conjunct, ObjectSchema.isIdentifier(field)
            else {
                continue
            }
            let strings: [JSONValue]
            switch (op, value) {
            case (.eq, .string): strings = [value]
            case (.in, .array(let items)): strings = items
            default: continue
            }
            let texts = strings.compactMap(\.stringValue)
            guard !texts.isEmpty, texts.count == strings.count, texts.allSatisfy({ Double($0) == nil }) else {
                continue
            }
            result.append((field, texts))
        }
        return result
    }

    // MARK: Tracking and indexes

    public func trackedObjects() throws(OStackError) -> [String] {
        try rows("SELECT object FROM tracked ORDER BY object").compactMap { $0.text("object") }
    }

    public func isTracked(_ object: String) throws(OStackError) -> Bool {
        try integer("SELECT count(*) FROM tracked WHERE object = ?", [.text(object)]) > 0
    }

    /// Field types worth an expression index: equality on them is selective (references, people,
    /// e-mail addresses; plus the object's name field). Selects and booleans are not: with a handful
    /// of values an index lookup per row is slower than the sequential scan.
    static let indexedTypes: Set<String> = ["lookup", "master_detail", "user", "email"]

    /// Starts mirroring `object` and creates its indexes.
    public func track(_ schema: ObjectSchema) throws(OStackError) {
        let fields =
            schema.fields.filter { Self.indexedTypes.contains($0.type) }.map(\.name)
            + (schema.nameField.map { [$0] } ?? [])
        try transaction { () throws(OStackError) in
            try run(
                "INSERT OR IGNORE INTO tracked (object) VALUES (?)", [.text(schema.name)])
            try createIndexes(schema.name, fields)
        }
    }

    func createIndexes(_ object: String, _ fields: [String]) throws(OStackError) {
        var created: [String] = []
        for field in Set(fields).sorted() where ObjectSchema.isIdentifier(field) && ObjectSchema.isIdentifier(object) {
            try run(
                "CREATE INDEX IF NOT EXISTS \"ix_\(object)__\(field)\" ON records (object, ostack_field(data, '\(field)')) WHERE object = '\(object)'"
            )
            created.append(field)
        }
        try run(
            "UPDATE tracked SET indexed_fields = ? WHERE object = ?",
            [.text(created.joined(separator: ",")), .text(object)])
    }

    public func untrack(_ object: String) throws(OStackError) {
        try transaction { () throws(OStackError) in
            for field in try indexedFields(object) where ObjectSchema.isIdentifier(object) {
                try run("DROP INDEX IF EXISTS \"ix_\(object)__\(field)\"")
            }
            try run("DELETE FROM tracked WHERE object = ?", [.text(object)])
            // Keep records with queued changes (they still need pushing); drop the rest of the mirror.
            try run(
                "DELETE FROM records WHERE object = ?1 AND NOT EXISTS (SELECT 1 FROM queue q WHERE q.object = ?1 AND q.record_id = records.id)",
                [.text(object)])
        }
    }

    /// Drops an object's expression indexes for a bulk load (`restoreIndexes` rebuilds them, once,
    /// which is far cheaper than maintaining them row by row).
    public func suspendIndexes(_ object: String) throws(OStackError) {
        for field in try indexedFields(object) where ObjectSchema.isIdentifier(object) {
            try run("DROP INDEX IF EXISTS \"ix_\(object)__\(field)\"")
        }
    }

    /// (Re)creates the object's expression indexes that are missing.
    public func restoreIndexes(_ object: String) throws(OStackError) {
        try createIndexes(object, Array(try indexedFields(object)))
    }

    public func indexedFields(_ object: String) throws(OStackError) -> Set<String> {
        let text =
            try rows("SELECT indexed_fields FROM tracked WHERE object = ?", [.text(object)]).first?.text(
                "indexed_fields") ?? ""
        return Set(text.split(separator: ",").map(String.init))
    }

    public struct TrackState: Sendable {
        public var object: String
        public var cursorVersion: String?
        public var cursorID: String?
        public var lastPullAt: Double?
        public var lastReconcileAt: Double?
    }

    public func trackState(_ object: String) throws(OStackError) -> TrackState? {
        guard let row = try rows("SELECT * FROM tracked WHERE object = ?", [.text(object)]).first else { return nil }
        func real(_ column: String) -> Double? {
            switch row[column] {
            case .real(let value): value
            case .integer(let value): Double(value)
            default: nil
            }
        }
        return TrackState(
            object: object, cursorVersion: row.text("cursor_version"), cursorID: row.text("cursor_id"),
            lastPullAt: real("last_pull_at"), lastReconcileAt: real("last_reconcile_at"))
    }

    public func advanceCursor(_ object: String, version: String, id: String) throws(OStackError) {
        try run(
            "UPDATE tracked SET cursor_version = ?, cursor_id = ? WHERE object = ?",
            [.text(version), .text(id), .text(object)])
    }

    public func markPulled(_ object: String, reconciled: Bool) throws(OStackError) {
        try run(
            "UPDATE tracked SET last_pull_at = ?1" + (reconciled ? ", last_reconcile_at = ?1" : "")
                + " WHERE object = ?2",
            [.real(now), .text(object)])
    }

    /// Local ids of an object that have no queued change (candidates for deletion by reconciliation).
    public func settledIDs(_ object: String) throws(OStackError) -> Set<String> {
        Set(
            try rows(
                "SELECT id FROM records r WHERE object = ?1 AND NOT EXISTS (SELECT 1 FROM queue q WHERE q.object = ?1 AND q.record_id = r.id)",
                [.text(object)]
            ).compactMap { $0.text("id") })
    }

    // MARK: Account-level values

    public func value(_ key: String) throws(OStackError) -> String? {
        try rows("SELECT value FROM account_info WHERE key = ?", [.text(key)]).first?.text("value")
    }

    public func setValue(_ key: String, _ value: String) throws(OStackError) {
        try run("INSERT OR REPLACE INTO account_info (key, value) VALUES (?, ?)", [.text(key), .text(value)])
    }
}
