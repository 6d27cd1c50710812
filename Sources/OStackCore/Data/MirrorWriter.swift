import SQLCipherKit

/// Writes records of one object into the mirror: the record into `records`, its indexed fields into
/// `record_fields` (docs/decisions/0007-mirror-schema.md). An existing row is updated in place (its
/// `rid`, and so its place in the table, stays), a new one appended; like the REPLACE it stands for, a
/// write resets `schema_version` and `invalid`.
///
/// Built for the pull, which writes thousands of records per page: the statements are prepared
/// once and bound value by value, the record's bytes are bound as they arrived, and no statement
/// opens a statement journal — under one, SQLite copies every page the statement changes and
/// SQLCipher encrypts each copy, which cost the pull two thirds of its time
/// (docs/decisions/0010-pull-write-path.md): hence `UPDATE OR FAIL` (for one row the same as the
/// default ABORT) and plain INSERTs.
struct MirrorWriter {
    let object: String
    private let database: Database
    let fields: [String]
    private let scanner: FieldScanner
    private let find: Statement
    private let insert: Statement
    private let update: Statement
    private let insertField: Statement
    private let currentFields: Statement
    private let dropField: Statement

    init(store: LocalStore, object: String) throws(OStackError) {
        self.object = object
        database = store.database
        fields = try store.indexedFields(object).sorted()
        scanner = FieldScanner(fields: fields)
        find = try store.prepared("SELECT rid FROM records WHERE object = ? AND id = ?")
        insert = try store.prepared("INSERT INTO records (object, id, data, version) VALUES (?, ?, ?, ?)")
        update = try store.prepared(
            "UPDATE OR FAIL records SET data = ?, version = ?, schema_version = 0, invalid = 0 WHERE rid = ?")
        insertField = try store.prepared("INSERT INTO record_fields (rid, field, object, value) VALUES (?, ?, ?, ?)")
        currentFields = try store.prepared("SELECT field, value FROM record_fields WHERE rid = ?")
        dropField = try store.prepared("DELETE FROM record_fields WHERE rid = ? AND field = ?")
    }

    /// Writes one record. `json` must be one JSON object in valid UTF-8 (a pulled record is checked by
    /// `JSONSyntax`, a local one serialized); it is stored as text.
    /// `likelyNew`: try the INSERT first (a first pull), and look the record up only if it exists.
    /// `fields`: the record's values of `fields`, when already found in its bytes.
    func write(
        id: String, json bytes: [UInt8], version: String?, likelyNew: Bool = false,
        fields values: [FieldScanner.RawValue]? = nil
    ) throws(OStackError) {
        try LocalStore.mappingErrors {
            try bytes.withUnsafeBytes { json in
                try write(id: id, json: json, version: version, likelyNew: likelyNew, values: values)
            }
        }
    }

    /// Appends a record that must be new: false, with nothing written, when one with its id is here.
    func insert(id: String, json bytes: [UInt8], version: String?) throws(OStackError) -> Bool {
        try LocalStore.mappingErrors {
            try bytes.withUnsafeBytes { json in try insertNew(id: id, json: json, version: version) }
        }
    }

    private func write(
        id: String, json: UnsafeRawBufferPointer, version: String?, likelyNew: Bool, values: [FieldScanner.RawValue]?
    ) throws {
        if likelyNew, try insertNew(id: id, json: json, version: version, values: values) { return }
        if let rid = try existing(id) {
            update.bindText(utf8: json, at: 1)
            if let version { update.bindText(version, at: 2) } else { update.bindNull(at: 2) }
            update.bindInteger(rid, at: 3)
            try run(update)
            if !fields.isEmpty { try rewriteFields(rid: rid, json: json, values: values) }
        } else if try !insertNew(id: id, json: json, version: version, values: values) {
            throw SQLiteError(
                kind: .constraint, code: 19, extendedCode: 2067, operation: "insert", message: "record exists")
        }
    }

    /// Appends the record; false when a record with its key is there already (nothing written).
    private func insertNew(
        id: String, json: UnsafeRawBufferPointer, version: String?, values: [FieldScanner.RawValue]? = nil
    ) throws -> Bool {
        insert.bindText(object, at: 1)
        insert.bindText(id, at: 2)
        insert.bindText(utf8: json, at: 3)
        if let version { insert.bindText(version, at: 4) } else { insert.bindNull(at: 4) }
        do {
            try run(insert)
        } catch let error as SQLiteError where error.extendedCode == 2067 {  // SQLITE_CONSTRAINT_UNIQUE
            // A single-row INSERT checks the unique key before it writes anything, and opens no
            // statement journal: the failed statement leaves the transaction as it was. (Any other
            // constraint failure is an error, not "already here".)
            return false
        }
        try writeFields(rid: database.lastInsertRowID, json: json, values: values)
        return true
    }

    private func existing(_ id: String) throws -> Int64? {
        find.bindText(object, at: 1)
        find.bindText(id, at: 2)
        try find.checkBindings()
        defer { find.reset() }
        guard try find.step(), case .integer(let rid) = find.value(at: 0) else { return nil }
        return rid
    }

    /// The text values of the indexed fields, bound from the record's bytes where no escape needs
    /// decoding. `found`: the values as found in these bytes already (else they are found here).
    private func writeFields(rid: Int64, json: UnsafeRawBufferPointer, values found: [FieldScanner.RawValue]?) throws {
        guard !fields.isEmpty else { return }
        for (field, value) in zip(fields, rawValues(json, found)) {
            guard case .string(let range, let escaped) = value else { continue }
            try insertField(rid: rid, field: field, json: json, range: range, escaped: escaped)
        }
    }

    /// After an update: only the indexed values that changed are written, compared with the rows
    /// themselves (so a row that disagrees with the record's text, whatever wrote it, is mended). An
    /// incremental pull usually changes other fields; rewriting every value moved each of them out of
    /// and back into `record_fields_value`, two more pages to decrypt, re-encrypt and write per record.
    /// (Comparing with the values in the stored text instead saves reading the rows, about 6 ms per
    /// 1 000 records in a 1 000 000-record mirror, but trusts that text and rows agree: text stored
    /// before repeated keys were refused scans differently in the writer and in `ostack_field`.)
    private func rewriteFields(rid: Int64, json: UnsafeRawBufferPointer, values found: [FieldScanner.RawValue]?)
        throws
    {
        var current: [(field: String, value: [UInt8])] = []
        currentFields.bindInteger(rid, at: 1)
        try currentFields.checkBindings()
        do {
            defer { currentFields.reset() }
            while try currentFields.step() {
                let field = currentFields.withColumnBytes(at: 0) { String(decoding: $0, as: UTF8.self) }
                current.append((field, currentFields.withColumnBytes(at: 1) { Array($0) }))
            }
        }
        let values = rawValues(json, found)
        // Rows of fields no longer indexed go (the writer's fields are the object's indexed set).
        for row in current where !fields.contains(row.field) { try dropField(rid: rid, field: row.field) }
        for (field, value) in zip(fields, values) {
            let old = current.first { $0.field == field }?.value
            guard case .string(let range, let escaped) = value else {
                if old != nil { try dropField(rid: rid, field: field) }
                continue
            }
            if let old {
                let same =
                    escaped
                    ? Array(FieldScanner.decodeString(json, range, escaped: true).utf8) == old
                    : UnsafeRawBufferPointer(rebasing: json[range]).elementsEqual(old)
                if same { continue }
                try dropField(rid: rid, field: field)
            }
            try insertField(rid: rid, field: field, json: json, range: range, escaped: escaped)
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

    private func insertField(rid: Int64, field: String, json: UnsafeRawBufferPointer, range: Range<Int>, escaped: Bool)
        throws
    {
        insertField.bindInteger(rid, at: 1)
        insertField.bindText(field, at: 2)
        insertField.bindText(object, at: 3)
        if escaped {
            insertField.bindText(FieldScanner.decodeString(json, range, escaped: true), at: 4)
        } else {
            insertField.bindText(utf8: UnsafeRawBufferPointer(rebasing: json[range]), at: 4)
        }
        try run(insertField)
    }

    private func dropField(rid: Int64, field: String) throws {
        dropField.bindInteger(rid, at: 1)
        dropField.bindText(field, at: 2)
        try run(dropField)
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
