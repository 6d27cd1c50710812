import SQLCipherKit

/// Tracked objects: which objects are mirrored, their pull cursors and their expression indexes
/// (docs/sync.md, "Pull").
extension LocalStore {
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
}
