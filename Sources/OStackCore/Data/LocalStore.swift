import FoundationEssentials
import SQLCipherKit
import Synchronization

/// One account's local data in its SQLCipher database (docs/storage.md, docs/sync.md): the record
/// mirror, the sync queue (`QueueStore.swift`), tracked objects (`LocalStore+Tracking.swift`), local
/// queries (`LocalStore+Query.swift`) and the metadata cache. Every method is one statement or one
/// transaction; callers compose writes with `transaction`.
///
/// Records are stored as their JSON in a rowid table (`records`) that has no index of its own: new
/// rows are appended. Which row is a record's current one, and which records hold a given value of a
/// selective field (lookups, users, e-mail addresses, the name field), is kept by ostack in the
/// mirror's maps (`MirrorIndex`, migration `0006-mirror-runs`, docs/decisions/0013-mirror-runs.md):
/// sorted runs that a pull writes in order, so that no structure keyed by the (random) ids is
/// updated page by page. Filters run in SQL through `ostack_match` (the Swift `LocalFilter`, one
/// evaluator for every query). The schema needs no custom SQL function: the stock `sqlcipher` shell
/// can check and export the file.
public final class LocalStore: @unchecked Sendable {
    // @unchecked: wraps one `Database` connection, used by one thread at a time like the connection.
    public let database: Database
    let clock: Clock
    /// The mirror's key and value maps.
    private(set) lazy var index = MirrorIndex(store: self)
    /// Per object, the newest server version a push has written into the mirror and not saved yet
    /// (`noteEcho`, `saveEchoes`).
    let echoes = Mutex<[String: String]>([:])

    public init(database: Database, clock: Clock = .system) throws(OStackError) {
        self.database = database
        self.clock = clock
        // `AccountDatabase.open` has registered `ostack_field` (migrations and sort keys use it);
        // `ostack_match` is registered per query.
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

    /// Migration `0005-mirror-rowid`: the mirror becomes a rowid table with a unique `(object, id)`
    /// index (random ids no longer split wide clustered pages), and the per-object expression indexes
    /// over `ostack_field` become rows of `record_fields`, filled here from each tracked object's
    /// indexed fields. One transaction (the migrator's): a crash leaves the old schema intact.
    static let mirrorMigrationSQL = """
        CREATE TABLE records_v5 (
            rid INTEGER PRIMARY KEY, object TEXT NOT NULL, id TEXT NOT NULL, data TEXT NOT NULL, version TEXT,
            schema_version INTEGER NOT NULL DEFAULT 0, invalid INTEGER NOT NULL DEFAULT 0);
        INSERT INTO records_v5 (object, id, data, version, schema_version, invalid)
            SELECT object, id, data, version, schema_version, invalid FROM records;
        DROP TABLE records;
        ALTER TABLE records_v5 RENAME TO records;
        CREATE UNIQUE INDEX records_key ON records (object, id);
        CREATE TABLE record_fields (
            rid INTEGER NOT NULL, field TEXT NOT NULL, object TEXT NOT NULL, value TEXT NOT NULL,
            PRIMARY KEY (rid, field)) WITHOUT ROWID;
        CREATE INDEX record_fields_value ON record_fields (object, field, value);
        CREATE TRIGGER records_drop_fields AFTER DELETE ON records
            BEGIN DELETE FROM record_fields WHERE rid = old.rid; END;
        """

    static func migrateMirror(_ database: Database) throws {
        try database.execute(mirrorMigrationSQL)
        for row in try database.query("SELECT object, indexed_fields FROM tracked") {
            guard let object = row.text("object"), ObjectSchema.isIdentifier(object) else { continue }
            for field in (row.text("indexed_fields") ?? "").split(separator: ",").map(String.init)
            where ObjectSchema.isIdentifier(field) {
                try database.execute(Self.fillFieldSQL(object, field))
            }
        }
        FailPoint.hit("mirror-migration.before-commit")
    }

    /// Migration `0006-mirror-runs` (docs/decisions/0013-mirror-runs.md): the unique index
    /// `records_key` and the `record_fields` rows with their index become the mirror's maps — for each
    /// object one level, written in order from the old index (no sort in memory) — and are dropped.
    /// One transaction (the migrator's): a crash leaves the 0005 schema intact.
    static func migrateMirrorRuns(_ database: Database) throws {
        try database.execute(MirrorIndex.schema)
        let limit = MirrorIndex.chunkLimit(pageSize: Int(try database.scalarInteger("PRAGMA page_size") ?? 4096))
        let insert = try database.prepare(MirrorIndex.insertChunkSQL)
        let objects = try database.query("SELECT DISTINCT object FROM records INDEXED BY records_key").compactMap {
            $0.text("object")
        }
        var run: Int64 = 0
        for object in objects {
            run += 1
            let keys = try database.prepare(
                "SELECT id, rid FROM records INDEXED BY records_key WHERE object = ? ORDER BY id")
            try keys.bind([.text(object)])
            var keyWriter = ChunkWriter(run: run, map: MirrorIndex.Map.keys.rawValue, limit: limit, insert: insert)
            while try keys.step() {
                let rid = keys.integer(at: 1)
                try keys.withColumnBytes(at: 0) { try keyWriter.add($0, rid: rid) }
            }
            try keyWriter.flush()
            let values = try database.prepare(
                "SELECT field, value, rid FROM record_fields WHERE object = ? ORDER BY field, value, rid")
            try values.bind([.text(object)])
            var valueWriter = ChunkWriter(
                run: run, map: MirrorIndex.Map.values.rawValue, limit: limit, insert: insert)
            var key: [UInt8] = []
            while try values.step() {
                key.removeAll(keepingCapacity: true)
                values.withColumnBytes(at: 0) { key.append(contentsOf: $0) }
                key.append(0)
                values.withColumnBytes(at: 1) { key.append(contentsOf: $0) }
                let rid = values.integer(at: 2)
                try key.withUnsafeBytes { try valueWriter.add($0, rid: rid) }
            }
            try valueWriter.flush()
            try database.execute(
                "INSERT INTO mirror_levels (object, run, keys, vals) VALUES (?, ?, ?, ?)",
                [.text(object), .integer(run), .integer(Int64(keyWriter.written)), .integer(Int64(valueWriter.written))])
        }
        try database.execute(
            """
            DROP TRIGGER records_drop_fields;
            DROP INDEX record_fields_value;
            DROP TABLE record_fields;
            DROP INDEX records_key;
            """)
        FailPoint.hit("mirror-runs-migration.before-commit")
    }

    /// Copies one field of every record of `object` into `record_fields` (text values only: the
    /// indexed equality is used for non-numeric text comparands, docs/sync.md "Queries").
    static func fillFieldSQL(_ object: String, _ field: String) -> String {
        """
        INSERT OR REPLACE INTO record_fields (rid, field, object, value)
            SELECT rid, '\(field)', object, v FROM (SELECT rid, object, ostack_field(data, '\(field)') AS v
            FROM records WHERE object = '\(object)') WHERE typeof(v) = 'text'
        """
    }

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
        try Self.mappingErrors { try database.transaction(body) }
    }

    /// `body` on one snapshot of the database (`Database.snapshot`): a read that takes several
    /// statements (the levels, then a probe of each) never mixes two commits of another process.
    func reading<R>(_ body: () throws(OStackError) -> R) throws(OStackError) -> R {
        try Self.mappingErrors { try database.snapshot(body) }
    }

    /// `body` as part of the transaction already open (no savepoint: a failure fails that
    /// transaction), or in its own when none is (`Database.joiningTransaction`).
    func joiningTransaction<R>(_ body: () throws(OStackError) -> R) throws(OStackError) -> R {
        try Self.mappingErrors { try database.joiningTransaction(body) }
    }

    /// `work`'s own errors as they are, SQLite's as storage errors.
    static func mappingErrors<R>(_ work: () throws -> R) throws(OStackError) -> R {
        do {
            return try work()
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
                sqlite.isDiskFull ? .storageFull : .storageFailure,
                detail: "database: \(sqlite.kind) \(sqlite.code)/\(sqlite.extendedCode) in \(sqlite.operation)")
        }
        return OStackError(.storageFailure, detail: "database: \(type(of: error))")
    }

    /// Prepared statements by SQL text: the queue and record paths run the same few statements
    /// thousands of times per push.
    private var statements: [String: Statement] = [:]

    /// The statement for `sql`, prepared once.
    func prepared(_ sql: String) throws(OStackError) -> Statement {
        if let cached = statements[sql] { return cached }
        do {
            let statement = try database.prepare(sql)
            if statements.count < 64 { statements[sql] = statement }
            return statement
        } catch {
            throw Self.storage(error)
        }
    }

    /// A mirror writer per object, with the `data_version` it was made at: settling a push writes
    /// each acknowledged record on its own, and a writer costs a query and five statement lookups.
    /// Made again when another connection has committed since (it may have changed the object's
    /// indexed fields) or after `createIndexes` / `untrack` here (`forgetWriters`).
    private var writers: [String: (version: Int, writer: MirrorWriter)] = [:]

    func writer(for object: String) throws(OStackError) -> MirrorWriter {
        let version = try integer("PRAGMA data_version")
        if let kept = writers[object], kept.version == version { return kept.writer }
        let writer = try MirrorWriter(store: self, object: object)
        writers[object] = (version, writer)
        return writer
    }

    func forgetWriters() { writers.removeAll() }

    func statement(_ sql: String, _ bindings: [SQLValue]) throws(OStackError) -> Statement {
        let statement = try prepared(sql)
        do { try statement.bind(bindings) } catch { throw Self.storage(error) }
        return statement
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
        try reading { () throws(OStackError) -> StoredRecord? in
            guard let (rid, _) = try index.current(object, id),
                let row = try rows("SELECT data, version FROM records WHERE rid = ?", [.integer(rid)]).first,
                let text = row.text("data"), let data = JSONValue.parse(Array(text.utf8))
            else { return nil }
            return StoredRecord(object: object, id: id, data: data, version: row.text("version"))
        }
    }

    /// The versions (`updated_at`) the mirror holds for records, without decoding them: `.some(nil)`
    /// for a record stored without one; ids the mirror does not hold are absent from the answer.
    /// Each level is searched once for all of them (`MirrorIndex.current(_:_:in:)`): a look-back
    /// page of 5 000 records looked up one by one cost every quiet pull about 50 ms.
    func mirrorVersions(_ object: String, _ ids: Set<String>) throws(OStackError) -> [String: String?] {
        guard !ids.isEmpty else { return [:] }
        let found = try index.current(object, ids, in: try index.levels(object))
        var versions: [String: String?] = [:]
        do {
            let read = try statement("SELECT version FROM records WHERE rid = ?", [.null])
            defer { read.reset() }
            for (id, location) in found {
                read.reset()
                try read.bind([.integer(location.rid)])
                guard try read.step() else { continue }
                if case .text(let version) = read.value(at: 0) { versions[id] = .some(version) } else { versions[id] = .some(nil) }
            }
        } catch let error as OStackError {
            throw error
        } catch {
            throw Self.storage(error)
        }
        return versions
    }

    /// Writes a record as the server has it (or as a local edit shows it).
    public func putRecord(_ object: String, _ data: JSONValue, version: String?) throws(OStackError) {
        guard let id = data["id"]?.stringValue else { return }
        let json = data.serialized()
        // The writer is taken inside the transaction: its indexed fields are then the ones the
        // transaction sees (another process may have just tracked the object again).
        try joiningTransaction { () throws(OStackError) in
            try writer(for: object).write(id: id, json: json, version: version)
        }
    }

    /// The server's copy of a record fetched outside any transaction (`records get --remote`, the
    /// refresh after a discard): stored — or, with `data` nil (the server has none), the local copy
    /// deleted — only if no change of the record is queued, decided in the transaction that writes
    /// it. A change another command queued during the request stays what the mirror shows. A copy
    /// that names another id is no copy of this record and is not stored.
    public func storeFetched(_ object: String, id: String, _ data: JSONValue?) throws(OStackError) {
        if let data, data["id"]?.stringValue != id { return }
        try transaction { () throws(OStackError) in
            guard try !hasQueuedChange(object, recordID: id) else { return }
            if let data {
                try putRecord(object, data, version: data["updated_at"]?.stringValue)
            } else {
                try deleteRecord(object, id)
            }
        }
    }

    /// Flags a mirrored record as not valid (its server version could not be taken: it is stale).
    public func markInvalid(_ object: String, _ id: String) throws(OStackError) {
        guard let (rid, _) = try index.current(object, id) else { return }
        try run("UPDATE OR FAIL records SET invalid = 1 WHERE rid = ?", [.integer(rid)])
    }

    /// Deletes a record: its current row and any older one a level still names, with their keys and
    /// values.
    public func deleteRecord(_ object: String, _ id: String) throws(OStackError) {
        try joiningTransaction { () throws(OStackError) in
            let writer = try writer(for: object)
            for (rid, run) in try index.allRIDs(object, id) { try remove(writer, id: id, rid: rid, run: run) }
        }
    }

    /// Removes one row of `id` and its entries in level `run`.
    private func remove(_ writer: MirrorWriter, id: String, rid: Int64, run: Int64) throws(OStackError) {
        let values = try writer.storedValueKeys(rid: rid)
        try index.removeKey(writer.object, id: id, run: run, values: values, rid: rid)
        try writer.deleteRow(rid)
    }

    /// Replaces a local id with the server's (a server that ignored the client-chosen id).
    /// The mirror's copy of `newID`, if any, gives way: the caller has established that it is the
    /// server's copy of this very record (pulled before the create was confirmed).
    public func renameRecord(_ object: String, from oldID: String, to newID: String) throws(OStackError) {
        try joiningTransaction { () throws(OStackError) in
            try deleteRecord(object, newID)
            let writer = try writer(for: object)
            let rows = try index.allRIDs(object, oldID)
            if let (rid, run) = rows.first {
                // Older rows of the old id (superseded) go; the current one keeps its rid and level.
                for (older, level) in rows.dropFirst() { try remove(writer, id: oldID, rid: older, run: level) }
                try index.renameKey(object, from: oldID, to: newID, rid: rid, run: run)
                // The stored record names its new id too (reads, filters on `id`, later edits).
                let stored = try self.rows("SELECT data FROM records WHERE rid = ?", [.integer(rid)]).first
                let data = stored?.text("data").flatMap { JSONValue.parse(Array($0.utf8)) }.map {
                    SQLValue.text(String(decoding: Self.renamed($0, to: newID).serialized(), as: UTF8.self))
                }
                try self.run(
                    "UPDATE OR FAIL records SET id = ?, data = coalesce(?, data) WHERE rid = ?",
                    [.text(newID), data ?? .null, .integer(rid)])
            }
            try renameQueuedRecord(object, from: oldID, to: newID)
            // The id the user was shown keeps working (docs/sync.md, "Acknowledgement"). The new id
            // is a record's own from now on: an alias from it (an earlier record created here under
            // that id, which the server renamed) would lead lookups of it to the other record, and
            // is dropped.
            try removeValue(Self.aliasKey(object, newID))
            try setValue(Self.aliasKey(object, oldID), newID)
        }
    }

    /// `record` with its `id` member set to `id`.
    static func renamed(_ record: JSONValue, to id: String) -> JSONValue {
        guard case .object(var members) = record else { return record }
        members["id"] = .string(id)
        return .object(members)
    }

    /// The id the server gave a record created here as `id`, when it assigned its own.
    public func adoptedID(_ object: String, _ id: String) throws(OStackError) -> String? {
        try value(Self.aliasKey(object, id))
    }

    /// Of `ids`, those adopted by a server under another id whose record is here (one query per 500).
    public func adoptedIDs(_ object: String, among ids: [String]) throws(OStackError) -> Set<String> {
        var found = Set<String>()
        let prefix = Self.aliasKey(object, "")
        var start = 0
        while start < ids.count {
            let chunk = ids[start..<Swift.min(start + 500, ids.count)]
            let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
            for row in try rows(
                "SELECT key, value FROM account_info WHERE key IN (\(marks))",
                chunk.map { .text(Self.aliasKey(object, $0)) })
            {
                if let key = row.text("key"), key.hasPrefix(prefix), let adopted = row.text("value"),
                    try hasRecord(object, adopted)
                {
                    found.insert(String(key.dropFirst(prefix.count)))
                }
            }
            start += 500
        }
        return found
    }

    /// Whether `id` names a record of `object` made here: one with queued changes, or one the server
    /// renamed (an alias leads to it). A record that is neither only came from the server.
    public func isLocalRecord(_ object: String, _ id: String) throws(OStackError) -> Bool {
        try integer(
            """
            SELECT EXISTS (SELECT 1 FROM queue WHERE object = ? AND record_id = ?)
                OR EXISTS (SELECT 1 FROM account_info WHERE key >= ? AND key < ? AND value = ?)
            """,
            [
                .text(object), .text(id), .text(Self.aliasKey(object, "")), .text(Self.aliasKey(object, "\u{10FFFF}")),
                .text(id),
            ]) != 0
    }

    /// Whether a record of `object` with `id` is here (no decoding).
    public func hasRecord(_ object: String, _ id: String) throws(OStackError) -> Bool {
        try reading { () throws(OStackError) -> Bool in try index.current(object, id) != nil }
    }

    /// `id` as the server knows it now: followed through adoptions (a few hops at most).
    public func currentID(_ object: String, _ id: String) throws(OStackError) -> String {
        var current = id
        for _ in 0..<4 {
            guard let next = try adoptedID(object, current), next != current else { break }
            current = next
        }
        return current
    }

    static func aliasKey(_ object: String, _ id: String) -> String { "id-alias.\(object).\(id)" }

    public func recordCount(_ object: String) throws(OStackError) -> Int {
        try reading { () throws(OStackError) -> Int in try index.count(object) }
    }

    /// Pulled records, written in one transaction; a record with a queued local change is left alone
    /// (pending changes are never overwritten). Returns how many were written.
    /// `bulk`: the pull's writer for its transaction (its `finish` is the caller's); without one,
    /// the records are written as a level of their own here. `fields`: each record's values of the
    /// indexed fields `names`, already found in its bytes (`MirrorWriter.fields` order).
    /// `load`: the first load these records are part of (`firstLoad`).
    public func applyPulled(
        _ object: String, _ records: [(id: String, version: String?, json: [UInt8])],
        fields: (names: [String], values: [[FieldScanner.RawValue]])? = nil, load: MirrorLoad? = nil
    ) throws(OStackError) -> Int {
        try joiningTransaction { () throws(OStackError) -> Int in
            let bulk = try bulkWriter(for: object, load: load)
            let written = try applyPulled(object, records, fields: fields, into: bulk)
            try bulk.finish()
            return written
        }
    }

    func applyPulled(
        _ object: String, _ records: [(id: String, version: String?, json: [UInt8])],
        fields: (names: [String], values: [[FieldScanner.RawValue]])?, into bulk: MirrorBulkWriter
    ) throws(OStackError) -> Int {
        // Values found for other fields than the writer's (the indexed set changed meanwhile) are not
        // used: the writer finds its own.
        let values = fields.flatMap {
            $0.names == bulk.writer.fields && $0.values.count == records.count ? $0.values : nil
        }
        // Records with a queued change are skipped (usually none: one query per page).
        let queued = try queuedRecordIDs(object)
        var written = 0
        for (index, record) in records.enumerated() where !queued.contains(record.id) {
            try bulk.append(id: record.id, json: record.json, version: record.version, found: values?[index])
            written += 1
        }
        return written
    }

    /// A writer for many records of `object` in the open transaction (taken inside it: its indexed
    /// fields are the ones the transaction sees).
    func bulkWriter(for object: String, supersedes: Bool = true, load: MirrorLoad? = nil) throws(OStackError)
        -> MirrorBulkWriter
    {
        // A first load stays one only while the object's levels are the ones it left: another
        // process may have written a record of the object between two of its transactions (a
        // `records get --remote`, a push), and a load level would then not be disjoint from it.
        var load = load
        if let current = load, current.levels != (try index.levels(object)) {
            current.abandoned = true
        }
        if load?.abandoned == true { load = nil }
        return MirrorBulkWriter(writer: try writer(for: object), supersedes: supersedes, load: load)
    }

    /// A first load of `object` (its records written over several transactions with `load:`), when
    /// the mirror holds none of its records; nil otherwise.
    public func firstLoad(_ object: String) throws(OStackError) -> MirrorLoad? {
        try index.levels(object).isEmpty ? MirrorLoad(object: object) : nil
    }

    /// Sets `PRAGMA synchronous` to `level` for a while; the function returned puts the previous
    /// level back (`defer` it).
    func useSynchronous(_ level: String) throws(OStackError) -> () -> Void {
        let previous = try integer("PRAGMA synchronous")
        try run("PRAGMA synchronous = \(level)")
        return { [self] in try? run("PRAGMA synchronous = \(previous)") }
    }

    /// Sets the page cache to `kib` KiB for a while; the function returned puts the previous size
    /// back (`defer` it).
    func useCacheSize(kib: Int) throws(OStackError) -> () -> Void {
        let previous = try integer("PRAGMA cache_size")
        try run("PRAGMA cache_size = -\(kib)")
        return { [self] in try? run("PRAGMA cache_size = \(previous)") }
    }

    // MARK: Account-level values

    public func value(_ key: String) throws(OStackError) -> String? {
        try rows("SELECT value FROM account_info WHERE key = ?", [.text(key)]).first?.text("value")
    }

    public func setValue(_ key: String, _ value: String) throws(OStackError) {
        try run("INSERT OR REPLACE INTO account_info (key, value) VALUES (?, ?)", [.text(key), .text(value)])
    }

    public func removeValue(_ key: String) throws(OStackError) {
        try run("DELETE FROM account_info WHERE key = ?", [.text(key)])
    }

    /// Removes `key` only while it still holds `value` (another process may have set it since).
    func removeValue(_ key: String, ifItIs value: String) throws(OStackError) {
        try run("DELETE FROM account_info WHERE key = ? AND value = ?", [.text(key), .text(value)])
    }
}
