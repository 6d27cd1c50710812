import SQLCipherKit

/// Tracked objects: which objects are mirrored, their pull cursors and their indexed fields
/// (docs/sync.md, "Pull").
extension LocalStore {
    // MARK: Tracking and indexes

    public func trackedObjects() throws(OStackError) -> [String] {
        try rows("SELECT object FROM tracked ORDER BY object").compactMap { $0.text("object") }
    }

    public func isTracked(_ object: String) throws(OStackError) -> Bool {
        try integer("SELECT count(*) FROM tracked WHERE object = ?", [.text(object)]) > 0
    }

    /// Field types worth indexing (`record_fields`): equality on them is selective (references, people,
    /// e-mail addresses; plus the object's name field). Selects and booleans are not: with a handful
    /// of values an index lookup per row is slower than the sequential scan.
    static let indexedTypes: Set<String> = ["lookup", "master_detail", "user", "email"]

    /// The fields of `schema` whose values go into `record_fields`.
    public static func indexedFieldNames(_ schema: ObjectSchema) -> [String] {
        schema.fields.filter { indexedTypes.contains($0.type) }.map(\.name) + (schema.nameField.map { [$0] } ?? [])
    }

    /// Starts mirroring `object` and creates its indexes.
    public func track(_ schema: ObjectSchema) throws(OStackError) {
        let fields = Self.indexedFieldNames(schema)
        try transaction { () throws(OStackError) in
            try run(
                "INSERT OR IGNORE INTO tracked (object) VALUES (?)", [.text(schema.name)])
            try createIndexes(schema.name, fields)
        }
    }

    /// Records the object's indexed fields and copies their values into `record_fields` (the
    /// lookup index `record_fields_value` serves every object).
    func createIndexes(_ object: String, _ fields: [String]) throws(OStackError) {
        guard ObjectSchema.isIdentifier(object) else { return }
        forgetWriters()
        let created = Set(fields).sorted().filter(ObjectSchema.isIdentifier)
        try run("DELETE FROM record_fields WHERE object = ?", [.text(object)])
        for field in created { try run(Self.fillFieldSQL(object, field)) }
        try run(
            "UPDATE tracked SET indexed_fields = ? WHERE object = ?",
            [.text(created.joined(separator: ",")), .text(object)])
    }

    public func untrack(_ object: String) throws(OStackError) {
        forgetWriters()
        try transaction { () throws(OStackError) in
            try run("DELETE FROM tracked WHERE object = ?", [.text(object)])
            try run("DELETE FROM record_fields WHERE object = ?", [.text(object)])
            // Keep records with queued changes (they still need pushing); drop the rest of the mirror.
            try run(
                "DELETE FROM records WHERE object = ?1 AND NOT EXISTS (SELECT 1 FROM queue q WHERE q.object = ?1 AND q.record_id = records.id)",
                [.text(object)])
        }
    }

    /// Drops the field lookup index for a bulk load (`restoreIndexes` rebuilds it once, sorted, which
    /// is far cheaper than inserting a first pull's values into it one by one). The key index
    /// `records_key` stays: every write and lookup by id relies on it.
    public func suspendIndexes(_ object: String) throws(OStackError) {
        try run("DROP INDEX IF EXISTS record_fields_value")
    }

    /// (Re)creates the field lookup index if it is missing.
    public func restoreIndexes(_ object: String) throws(OStackError) {
        try restoreFieldIndex()
    }

    /// Builds `record_fields_value` when missing (after a bulk load, or one a crash interrupted).
    /// The build sorts the values in memory (temp_store=MEMORY): the page cache is shrunk meanwhile
    /// so that the two do not add up (at 16 MB instead of 4 the build was barely faster, and a first
    /// pull of 300 000 records peaked 12 MB higher).
    func restoreFieldIndex() throws(OStackError) {
        guard try integer("SELECT count(*) FROM sqlite_master WHERE name = 'record_fields_value'") == 0 else { return }
        let restoreCache = try useCacheSize(kib: 4096)
        defer { restoreCache() }
        try run("CREATE INDEX IF NOT EXISTS record_fields_value ON record_fields (object, field, value)")
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
            "UPDATE OR FAIL tracked SET cursor_version = ?, cursor_id = ? WHERE object = ?",
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
}
