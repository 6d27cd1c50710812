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

    /// Records the object's indexed fields and, when they changed, rebuilds its values map from
    /// its records.
    func createIndexes(_ object: String, _ fields: [String]) throws(OStackError) {
        guard ObjectSchema.isIdentifier(object) else { return }
        let created = Set(fields).sorted().filter(ObjectSchema.isIdentifier)
        let before = try indexedFields(object)
        try run(
            "UPDATE tracked SET indexed_fields = ? WHERE object = ?",
            [.text(created.joined(separator: ",")), .text(object)])
        forgetWriters()
        if Set(created) != before { try rebuildValues(object) }
    }

    /// Rebuilds the values map of `object` from its records (its indexed fields changed): its levels
    /// are merged into one (no superseded row left), that level's values dropped, and the values of
    /// every record collected again, at most `rebuildBatch` at a time as value-only levels that a
    /// last merge folds in.
    func rebuildValues(_ object: String) throws(OStackError) {
        try index.mergeAll(object)
        guard let level = try index.levels(object).first else { return }
        try index.dropValues(object, run: level.run)
        let writer = try writer(for: object)
        guard !writer.fields.isEmpty else { return }
        var batch = MirrorBatch()
        func flush() throws(OStackError) {
            guard !batch.isEmpty else { return }
            batch.sort()
            try index.appendLevel(object, keys: MirrorBatch(), values: batch)
            batch = MirrorBatch()
        }
        let rows = try statement("SELECT rid, data FROM records WHERE object = ?", [.text(object)])
        defer { rows.reset() }
        do {
            while try rows.step() {
                let rid = rows.integer(at: 0)
                rows.withColumnBytes(at: 1) { json in
                    writer.forEachValue(of: json, found: nil) { field, value in
                        batch.appendValue(field: writer.fieldNames[field], value: value, rid: rid)
                    }
                }
                if batch.count >= Self.rebuildBatch { try flush() }
            }
        } catch let error as OStackError {
            throw error
        } catch {
            throw Self.storage(error)
        }
        try flush()
        try index.mergeAll(object)
    }

    /// Values collected in memory at most while rebuilding a values map.
    static let rebuildBatch = 200_000

    public func untrack(_ object: String) throws(OStackError) {
        forgetWriters()
        try transaction { () throws(OStackError) in
            try run("DELETE FROM tracked WHERE object = ?", [.text(object)])
            try removeValue(Self.echoKey(object))
            // Keep records with queued changes (they still need pushing); drop the rest of the mirror.
            let queued = try queuedRecordIDs(object)
            var kept: [(id: String, rid: Int64)] = []
            try index.forEachCurrentKey(object) { key, rid throws(OStackError) in
                let id = String(decoding: key, as: UTF8.self)
                if queued.contains(id) { kept.append((id, rid)) }
                return true
            }
            try index.drop(object)
            let keep = Set(kept.map(\.rid))
            var gone: [Int64] = []
            for row in try rows("SELECT rid FROM records WHERE object = ?", [.text(object)]) {
                if let rid = row.int("rid"), !keep.contains(rid) { gone.append(rid) }
            }
            for rid in gone { try run("DELETE FROM records WHERE rid = ?", [.integer(rid)]) }
            // The kept records (no indexed fields now) in one level.
            var keys = MirrorBatch()
            for record in kept { keys.append(Array(record.id.utf8), rid: record.rid) }
            if !keys.isEmpty {
                keys.sort()
                try index.appendLevel(object, keys: keys, values: MirrorBatch())
            }
        }
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

    static func echoKey(_ object: String) -> String { "pull.echo." + object }

    /// A delivered change put the server's record, in `version`, into the mirror: the pulls that
    /// bring that record in that version again bring nothing new, and do not count it (docs/sync.md,
    /// "Pull", own changes). Noted in memory; `saveEchoes` writes it once per object.
    func noteEcho(_ object: String, version: String) {
        echoes.withLock { noted in
            if noted[object].map({ Puller.isEarlier($0, than: version) }) ?? true { noted[object] = version }
        }
    }

    /// Saves the noted versions (after a push: one write per object instead of one per change).
    public func saveEchoes() throws(OStackError) {
        let noted = echoes.withLock { noted in
            defer { noted = [:] }
            return noted
        }
        guard !noted.isEmpty else { return }
        try transaction { () throws(OStackError) in
            // Only a tracked object is pulled, and only its pulls ever pass (and so drop) the note.
            for (object, version) in noted where try isTracked(object) {
                if let saved = try value(Self.echoKey(object)), !Puller.isEarlier(saved, than: version) { continue }
                try setValue(Self.echoKey(object), version)
            }
        }
    }

    /// The newest version a push wrote into the mirror of `object` that no pull has passed yet.
    func echo(_ object: String) throws(OStackError) -> String? { try value(Self.echoKey(object)) }

    public func markPulled(_ object: String, reconciled: Bool) throws(OStackError) {
        try run(
            "UPDATE tracked SET last_pull_at = ?1" + (reconciled ? ", last_reconcile_at = ?1" : "")
                + " WHERE object = ?2",
            [.real(now), .text(object)])
    }
}

extension LocalStore {
    /// `id.field=value` (as bytes) for every indexed value of `object`'s current records, in
    /// `(id, field)` order: what the values map holds, for tests and checks.
    func indexedValueRows(_ object: String) throws(OStackError) -> [[UInt8]] {
        let levels = try index.levels(object)
        var rows: [(id: [UInt8], field: [UInt8], row: [UInt8])] = []
        for entry in try index.allValues(object) {
            guard let separator = entry.key.firstIndex(of: 0),
                let found = try self.rows("SELECT id FROM records WHERE rid = ?", [.integer(entry.rid)]).first,
                let id = found.text("id"), try index.current(object, id, in: levels)?.rid == entry.rid
            else { continue }
            let field = Array(entry.key[..<separator])
            let value = Array(entry.key[(separator + 1)...])
            rows.append((Array(id.utf8), field, Array(id.utf8) + [UInt8(ascii: ".")] + field + [UInt8(ascii: "=")] + value))
        }
        return rows.sorted { a, b in
            a.id != b.id ? a.id.lexicographicallyPrecedes(b.id) : a.field.lexicographicallyPrecedes(b.field)
        }.map(\.row)
    }

    /// `indexedValueRows` as text.
    func indexedValueStrings(_ object: String) throws(OStackError) -> [String] {
        try indexedValueRows(object).map { String(decoding: $0, as: UTF8.self) }
    }
}
