import SQLCipherKit

/// Writes records of one object into the mirror: the record's row into `records`, its key and the text
/// values of its indexed fields into the mirror's maps (`MirrorIndex`,
/// docs/decisions/0013-mirror-runs.md). Like the REPLACE it stands for, a write resets
/// `schema_version` and `invalid`.
///
/// Two ways in:
/// - `write` — one record where it stands (a local edit, an acknowledged push, a record read from
///   the server): its row is updated in place and only the values that changed move in their level;
///   a record the mirror does not hold is appended and its key added to the oldest level.
/// - `MirrorBulkWriter` — many records in one transaction (a pull, an import): rows are appended and
///   their keys and values collected in memory, then written in order as a new level.
///
/// No statement opens a statement journal — under one, SQLite copies every page the statement
/// changes and SQLCipher encrypts each copy (docs/decisions/0010-pull-write-path.md): hence
/// `UPDATE OR FAIL` (for one row the same as the default ABORT) and plain INSERTs.
struct MirrorWriter {
    let object: String
    let fields: [String]
    /// Each field's name as bytes (the start of its values' keys).
    let fieldNames: [[UInt8]]
    let index: MirrorIndex
    private let database: Database
    private let scanner: FieldScanner
    private let insert: Statement
    private let update: Statement
    private let readData: Statement
    private let delete: Statement

    init(store: LocalStore, object: String) throws(OStackError) {
        self.object = object
        index = store.index
        database = store.database
        fields = try store.indexedFields(object).sorted()
        fieldNames = fields.map { Array($0.utf8) }
        scanner = FieldScanner(fields: fields)
        insert = try store.prepared("INSERT INTO records (object, id, data, version) VALUES (?, ?, ?, ?)")
        update = try store.prepared(
            "UPDATE OR FAIL records SET data = ?, version = ?, schema_version = 0, invalid = 0 WHERE rid = ?")
        readData = try store.prepared("SELECT data FROM records WHERE rid = ?")
        delete = try store.prepared("DELETE FROM records WHERE rid = ?")
    }

    /// Writes one record where it stands. `json` must be one JSON object in valid UTF-8 (a pulled
    /// record is checked by `JSONSyntax`, a local one serialized); it is stored as text.
    func write(id: String, json bytes: [UInt8], version: String?) throws(OStackError) {
        if let (rid, level) = try index.current(object, id) {
            let old = try storedValueKeys(rid: rid)
            try LocalStore.mappingErrors {
                try bytes.withUnsafeBytes { json in
                    update.reset()
                    update.bindText(utf8: json, at: 1)
                    if let version { update.bindText(version, at: 2) } else { update.bindNull(at: 2) }
                    update.bindInteger(rid, at: 3)
                    try run(update)
                }
            }
            let new = bytes.withUnsafeBytes { valueKeys(of: $0, found: nil) }
            try index.changeValues(
                object, rid: rid, run: level, removed: old.filter { !new.contains($0) },
                added: new.filter { !old.contains($0) })
        } else {
            let rid = try append(id: id, json: bytes, version: version)
            try index.insertNew(object, id: id, rid: rid, values: bytes.withUnsafeBytes { valueKeys(of: $0, found: nil) })
        }
    }

    /// Appends a record that must be new: false, with nothing written, when one with its id is here.
    func insert(id: String, json bytes: [UInt8], version: String?) throws(OStackError) -> Bool {
        guard try index.current(object, id) == nil else { return false }
        let rid = try append(id: id, json: bytes, version: version)
        try index.insertNew(object, id: id, rid: rid, values: bytes.withUnsafeBytes { valueKeys(of: $0, found: nil) })
        return true
    }

    func append(id: String, json bytes: [UInt8], version: String?) throws(OStackError) -> Int64 {
        try LocalStore.mappingErrors { try bytes.withUnsafeBytes { json in try append(id: id, json: json, version: version) } }
    }

    /// Appends a row; its rid. (Its key is the caller's to add.)
    func append(id: String, json: UnsafeRawBufferPointer, version: String?) throws(OStackError) -> Int64 {
        try LocalStore.mappingErrors {
            insert.reset()
            insert.bindText(object, at: 1)
            insert.bindText(id, at: 2)
            insert.bindText(utf8: json, at: 3)
            if let version { insert.bindText(version, at: 4) } else { insert.bindNull(at: 4) }
            try run(insert)
            return database.lastInsertRowID
        }
    }

    /// Deletes a row.
    func deleteRow(_ rid: Int64) throws(OStackError) {
        try LocalStore.mappingErrors {
            delete.reset()
            delete.bindInteger(rid, at: 1)
            try run(delete)
        }
    }

    /// The value keys of the row at `rid`, as its stored text gives them (none without indexed fields).
    func storedValueKeys(rid: Int64) throws(OStackError) -> [[UInt8]] {
        guard !fields.isEmpty else { return [] }
        return try LocalStore.mappingErrors {
            readData.reset()
            readData.bindInteger(rid, at: 1)
            try readData.checkBindings()
            defer { readData.reset() }
            guard try readData.step() else { return [] }
            return readData.withColumnBytes(at: 0) { valueKeys(of: $0, found: nil) }
        }
    }

    /// The keys (`MirrorIndex.valueKey`) of a record's indexed text values. `found`: the values as
    /// found in these bytes already (else they are found here).
    func valueKeys(of json: UnsafeRawBufferPointer, found: [FieldScanner.RawValue]?) -> [[UInt8]] {
        guard !fields.isEmpty else { return [] }
        var keys: [[UInt8]] = []
        forEachValue(of: json, found: found) { field, value in
            keys.append(fieldNames[field] + [0] + Array(value))
        }
        return keys
    }

    /// Calls `body(field index, value bytes)` for each indexed field with a text value, the bytes
    /// unescaped (bound from the record's bytes where no escape needs decoding).
    func forEachValue(
        of json: UnsafeRawBufferPointer, found: [FieldScanner.RawValue]?,
        _ body: (Int, UnsafeRawBufferPointer) -> Void
    ) {
        for (field, value) in rawValues(json, found).enumerated() {
            guard case .string(let range, let escaped) = value else { continue }
            if escaped {
                var decoded = FieldScanner.decodeString(json, range, escaped: true)
                decoded.withUTF8 { body(field, UnsafeRawBufferPointer($0)) }
            } else {
                body(field, UnsafeRawBufferPointer(rebasing: json[range]))
            }
        }
    }

    private func rawValues(_ json: UnsafeRawBufferPointer, _ found: [FieldScanner.RawValue]?) -> [FieldScanner.RawValue]
    {
        // (Found in the same bytes, so every range lies inside them; checked all the same.)
        if let found, found.count == fields.count, found.allSatisfy({ Self.lies($0, within: json.count) }) {
            return found
        }
        var values: [FieldScanner.RawValue] = []
        values.reserveCapacity(fields.count)
        scanner.scanRaw(json, into: &values)
        return values
    }

    private static func lies(_ value: FieldScanner.RawValue, within count: Int) -> Bool {
        switch value {
        case .string(let range, _), .number(let range): range.lowerBound >= 0 && range.upperBound <= count
        default: true
        }
    }

    private func run(_ statement: Statement) throws {
        try statement.checkBindings()
        defer { statement.reset() }
        while try statement.step() {}
    }
}

/// Many records of one object written in one transaction (a pull's pages, an import): each row is
/// appended at once; keys and values are collected in memory and written by `finish` as a new level
/// of the maps, in order — no page of the existing maps is read or rewritten, however large the
/// mirror (docs/decisions/0013-mirror-runs.md). `finish` must run before the transaction commits.
///
/// `pulled` records supersede whatever the mirror held for their ids (the newer level wins; the rows
/// it supersedes go when their level is merged). A record appended twice keeps its last row. A batch
/// of fewer than `smallBatch` records is written where each record stands instead (`MirrorWriter`'s
/// in-place path), so that a sync of a few changes adds no level.
final class MirrorBulkWriter {
    let writer: MirrorWriter
    private var keys = MirrorBatch()
    private var values = MirrorBatch()
    private var finished = false

    static let smallBatch = 64
    /// Whether these records may be in the mirror already (`MirrorIndex.Level.supersedes`): false for
    /// records created here (new ids) and for a first load (`load`), which keeps it exact.
    let supersedes: Bool
    /// The first load of an object the mirror does not hold, which this batch is part of.
    let load: MirrorLoad?

    init(writer: MirrorWriter, supersedes: Bool = true, load: MirrorLoad? = nil) {
        self.writer = writer
        self.supersedes = load == nil && supersedes
        self.load = load
    }

    var count: Int { keys.count }

    /// Appends a record's row and collects its key and values. `found`: its indexed fields' values as
    /// found in its bytes (`MirrorWriter.fields` order), or nil.
    func append(id: String, json bytes: [UInt8], version: String?, found: [FieldScanner.RawValue]? = nil)
        throws(OStackError)
    {
        let rid = try writer.append(id: id, json: bytes, version: version)
        var id = id
        id.withUTF8 { keys.append(UnsafeRawBufferPointer($0), rid: rid) }
        bytes.withUnsafeBytes { json in
            writer.forEachValue(of: json, found: found) { field, value in
                values.appendValue(field: writer.fieldNames[field], value: value, rid: rid)
            }
        }
    }

    /// Writes the collected keys and values (once, before the transaction commits).
    func finish() throws(OStackError) {
        guard !finished else { return }
        finished = true
        guard !keys.isEmpty else { return }
        keys.sort()
        // A key appended twice keeps its last row (the highest rid); the earlier rows go now.
        var dropped = Set<Int64>()
        var previous: MirrorBatch.Item?
        for item in keys.items {
            if let before = previous,
                keys.withKey(before, { a in keys.withKey(item) { b in mirrorCompare(a, b) == 0 } })
            {
                dropped.insert(before.rid)
            }
            previous = item
        }
        if !dropped.isEmpty {
            keys.filter { !dropped.contains($0.rid) }
            values.filter { !dropped.contains($0.rid) }
            for rid in dropped { try writer.deleteRow(rid) }
        }
        if let load { try takeEarlierCopies(load) }
        if keys.count < Self.smallBatch && load == nil {
            try placeEach()
            return
        }
        values.sort()
        try writer.index.appendLevel(writer.object, keys: keys, values: values, supersedes: supersedes)
        try writer.index.compact(writer.object)
        // The levels the load leaves: the next transaction goes on as a load only if it finds them.
        if let load { load.levels = try writer.index.levels(writer.object) }
    }

    /// A first load keeps its levels disjoint (each key in one level): a record written by an earlier
    /// batch of the load (it changed on the server while the pull ran, and came again) loses its
    /// earlier copy now. Only the ids the load's filter may have seen are looked up.
    private func takeEarlierCopies(_ load: MirrorLoad) throws(OStackError) {
        let index = writer.index
        for item in keys.items {
            let seen = keys.withKey(item) { key in load.insert(key) }
            guard seen else { continue }
            let id = keys.withKey(item) { String(decoding: $0, as: UTF8.self) }
            for (old, run) in try index.allRIDs(writer.object, id) {
                let oldValues = try writer.storedValueKeys(rid: old)
                try index.removeKey(writer.object, id: id, run: run, values: oldValues, rid: old)
                try writer.deleteRow(old)
            }
        }
    }

    /// A small batch: each appended record takes the place of the one it supersedes in that one's
    /// level (whose row goes now), or joins the oldest level.
    private func placeEach() throws(OStackError) {
        let index = writer.index
        var valuesByRID: [Int64: [[UInt8]]] = [:]
        values.forEach { key, rid in valuesByRID[rid, default: []].append(Array(key)) }
        for item in keys.items {
            let id = keys.withKey(item) { String(decoding: $0, as: UTF8.self) }
            let new = valuesByRID[item.rid] ?? []
            let levels = try index.levels(writer.object)
            if let (old, run) = try index.current(writer.object, id, in: levels) {
                let oldValues = try writer.storedValueKeys(rid: old)
                try index.removeKey(writer.object, id: id, run: run, values: oldValues, rid: old)
                try writer.deleteRow(old)
                try index.insertAt(writer.object, id: id, rid: item.rid, run: run, values: new)
            } else {
                _ = try index.insertNew(writer.object, id: id, rid: item.rid, values: new)
            }
        }
    }
}

/// The first load of an object the mirror does not hold (a first pull), across its transactions: its
/// levels supersede nothing, so queries need not look for superseded rows
/// (`MirrorIndex.Level.supersedes`). To keep that exact, a record that comes twice must replace its
/// earlier copy at once; a Bloom filter over the ids loaded so far (4 MiB whatever the size of the
/// load: about one false "maybe" in 3 000 at a million ids) says which ids may have come before, and
/// only those are looked up. Blocked: a key's four bits are in one 64-bit word, one memory access a
/// key.
public final class MirrorLoad {
    let object: String
    /// The object's levels as the load's last transaction left them (none before the first). A
    /// record written in place by someone else changes its level's counts.
    var levels: [MirrorIndex.Level] = []
    /// Set once the levels were found changed by someone else: the rest is written as an ordinary
    /// pull (levels that may supersede).
    var abandoned = false
    private let words: UnsafeMutablePointer<UInt64>
    private static let wordCount = 1 << 19  // 2^19 words of 64 bits: 4 MiB

    init(object: String) {
        self.object = object
        words = .allocate(capacity: Self.wordCount)
        words.initialize(repeating: 0, count: Self.wordCount)
    }

    deinit {
        words.deallocate()
    }

    /// Adds `key`; whether it may have been added before (false: certainly not).
    func insert(_ key: UnsafeRawBufferPointer) -> Bool {
        var hasher = Hasher()
        hasher.combine(bytes: key)
        let hash = UInt64(bitPattern: Int64(hasher.finalize()))
        // The word from the high bits, four bit positions from the low 24 bits.
        let word = Int(hash >> 45) & (Self.wordCount - 1)
        var flags: UInt64 = 0
        for probe in 0..<4 { flags |= 1 << ((hash >> (6 * UInt64(probe))) & 63) }
        let before = words[word]
        words[word] = before | flags
        return before & flags == flags
    }
}
