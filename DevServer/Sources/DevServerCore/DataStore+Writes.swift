/// Creates, updates, deletes and batches (docs/protocol.md#records).
extension DataStore {
    /// Normalises a version token: trimmed, surrounding quotes stripped (docs/protocol.md#records).
    static func normalizeVersion(_ token: String) -> String {
        var text = token.trimmed()
        if text.hasPrefix("W/") { text.removeFirst(2) }
        if text.count >= 2 && text.hasPrefix("\"") && text.hasSuffix("\"") {
            text = String(text.dropFirst().dropLast())
        }
        return text
    }

    struct WriteFailure: Error {
        var response: CoreResponse
    }

    // MARK: Single writes

    public func create(object: String, body: [UInt8], userId: String) -> CoreResponse {
        guard let definition = definition(object) else { return objectNotFound(object) }
        guard let json = try? JSONValue.parse(body), case .object(let members) = json else {
            return .error(status: 400, code: "VALIDATION_ERROR", message: "body must be a JSON object")
        }
        return state.withLock { state in
            do throws(WriteFailure) {
                let (record, dropped) = try insert(members, definition: definition, userId: userId, state: &state)
                return created(record, dropped: dropped, object: object)
            } catch {
                return error.response
            }
        }
    }

    func created(_ record: Record, dropped: [String], object: String) -> CoreResponse {
        var body: [(String, JSONValue)] = [
            ("object", .string(object)), ("id", .string(record.id)), ("record", record.json),
        ]
        var headers: [(String, String)] = []
        if !dropped.isEmpty {
            headers.append(
                ("X-ObjectStack-Dropped-Fields", dropped.map { "\($0);reason=readonly" }.joined(separator: ", ")))
            body.append(
                (
                    "droppedFields",
                    .array([
                        .object([
                            ("object", .string(object)), ("fields", .array(dropped.map { .string($0) })),
                            ("reason", .string("readonly")),
                        ])
                    ])
                ))
        }
        return CoreResponse(status: 201, headers: headers, body: .object(body))
    }

    /// Validates and inserts one record. A client-chosen `id` is kept when unused (so a client can
    /// check by id whether an earlier create arrived); a used one is a 409.
    func insert(_ members: [(String, JSONValue)], definition: ObjectDefinition, userId: String, state: inout State)
        throws(WriteFailure) -> (Record, [String])
    {
        var data: [(String, JSONValue)] = []
        var dropped: [String] = []
        var requestedID: String?
        for (key, value) in members {
            if key == "id" {
                guard case .string(let id) = value, !id.isEmpty, id.count <= 100 else {
                    throw WriteFailure(
                        response: .error(status: 400, code: "VALIDATION_ERROR", message: "id must be a string"))
                }
                requestedID = assignsIDs ? nil : id
            } else if ObjectDefinition.systemFields.contains(key) || definition.field(key)?.readonly == true {
                dropped.append(key)
            } else {
                data.append((key, value))
            }
        }
        let errors = FieldValidator.validate(data, object: definition, isCreate: true)
        if !errors.isEmpty { throw WriteFailure(response: validationFailed(errors, object: definition.name)) }
        // Taken out of the dictionary while it changes, so appending never copies the whole table.
        var table = state.tables.removeValue(forKey: definition.name) ?? Table()
        defer { state.tables[definition.name] = table }
        let id: String
        if let requestedID {
            if table.record(requestedID) != nil {
                throw WriteFailure(
                    response: .error(
                        status: 409, code: "UNIQUE_VIOLATION", message: "A record with this id already exists",
                        extra: [("field", .string("id")), ("object", .string(definition.name))]))
            }
            id = requestedID
        } else {
            table.sequence += 1
            id = "\(definition.idPrefix)_\(table.sequence)"
        }
        for field in definition.fields where field.defaultValue != nil && !data.contains(where: { $0.0 == field.name })
        {
            data.append((field.name, field.defaultValue!))
        }
        if let violation = uniqueViolation(data, excluding: nil, definition: definition, table: table) {
            throw WriteFailure(response: violation)
        }
        let (version, micros) = stamp(&state)
        let record = Record(
            members: [("id", .string(id))] + data + [
                ("created_at", .string(version)), ("updated_at", .string(version)),
                ("created_by", .string(userId)), ("updated_by", .string(userId)), ("owner_id", .string(userId)),
            ], micros: micros)
        table.append(record)
        return (record, dropped)
    }

    /// The engine's `ValidationError`: the message joins every field message with "; "
    /// (`packages/objectql/src/validation/record-validator.ts`).
    func validationFailed(_ errors: [JSONValue], object: String) -> CoreResponse {
        let messages = errors.compactMap { $0["message"]?.stringValue }.filter { !$0.isEmpty }
        let message = messages.isEmpty ? "Validation failed" : messages.joined(separator: "; ")
        return .error(
            status: 400, code: "VALIDATION_FAILED", message: message,
            extra: [("object", .string(object)), ("fields", .array(errors))])
    }

    public func update(object: String, id: String, body: [UInt8], ifMatch: String?, userId: String) -> CoreResponse {
        guard let definition = definition(object) else { return objectNotFound(object) }
        guard let json = try? JSONValue.parse(body), case .object(let members) = json else {
            return .error(status: 400, code: "VALIDATION_ERROR", message: "body must be a JSON object")
        }
        return state.withLock { state in
            do throws(WriteFailure) {
                var expected = ifMatch
                var data: [(String, JSONValue)] = []
                for (key, value) in members {
                    if key == "expectedVersion" {
                        expected = value.stringValue  // the body wins over If-Match
                    } else {
                        data.append((key, value))
                    }
                }
                let (record, dropped) = try modify(
                    id: id, data: data, expected: expected, definition: definition,
                    userId: userId, state: &state)
                var response = created(record, dropped: dropped, object: object)
                response.status = 200
                return response
            } catch {
                return error.response
            }
        }
    }

    func modify(
        id: String, data members: [(String, JSONValue)], expected: String?, definition: ObjectDefinition,
        userId: String, state: inout State
    ) throws(WriteFailure) -> (Record, [String]) {
        guard var record = state.tables[definition.name]?.record(id) else {
            throw WriteFailure(response: recordNotFound(definition.name, id))  // 404 beats 409
        }
        if let expected, Self.normalizeVersion(expected) != record.version {
            throw WriteFailure(
                response: conflict(record, expected: Self.normalizeVersion(expected), object: definition.name))
        }
        var data: [(String, JSONValue)] = []
        var dropped: [String] = []
        for (key, value) in members where key != "id" {
            if ObjectDefinition.systemFields.contains(key) || definition.field(key)?.readonly == true {
                dropped.append(key)
            } else {
                data.append((key, value))
            }
        }
        let errors = FieldValidator.validate(data, object: definition, isCreate: false)
        if !errors.isEmpty { throw WriteFailure(response: validationFailed(errors, object: definition.name)) }
        for (key, value) in data { record[key] = value }
        if let table = state.tables[definition.name],
            let violation = uniqueViolation(record.members, excluding: id, definition: definition, table: table)
        {
            throw WriteFailure(response: violation)
        }
        let (version, micros) = stamp(&state)
        record["updated_at"] = .string(version)
        record.micros = micros
        record["updated_by"] = .string(userId)
        state.tables[definition.name]!.append(record)
        return (record, dropped)
    }

    /// A unique-constraint violation (409 `UNIQUE_VIOLATION`, `packages/rest/src/error-response.ts`):
    /// a single-column constraint names its `field`; a composite index names none. NULLs never
    /// collide (SQL semantics). `excluding`: the record being updated.
    func uniqueViolation(
        _ members: [(String, JSONValue)], excluding id: String?, definition: ObjectDefinition, table: Table
    ) -> CoreResponse? {
        let values = Dictionary(members, uniquingKeysWith: { _, last in last })
        var constraints: [(fields: [String], named: Bool)] = definition.fields.filter(\.unique).map {
            ([$0.name], true)
        }
        constraints += definition.indexes.filter { $0.unique }.map { ($0.fields, $0.fields.count == 1) }
        for constraint in constraints {
            let wanted = constraint.fields.map { values[$0] ?? .null }
            if wanted.contains(where: \.isNull) { continue }
            let taken = table.rows.contains { row in
                guard let row, row.id != id else { return false }
                return zip(constraint.fields, wanted).allSatisfy { row[$0.0] == $0.1 }
            }
            guard taken else { continue }
            if constraint.named, let field = constraint.fields.first {
                return .error(
                    status: 409, code: "UNIQUE_VIOLATION", message: "A record with this \(field) already exists",
                    extra: [("field", .string(field)), ("object", .string(definition.name))])
            }
            return .error(
                status: 409, code: "UNIQUE_VIOLATION", message: "A record with this value already exists",
                extra: [("object", .string(definition.name))])
        }
        return nil
    }

    func conflict(_ record: Record, expected: String, object: String) -> CoreResponse {
        .error(
            status: 409, code: "CONCURRENT_UPDATE",
            message:
                "Record \(object)/\(record.id) was modified by another user (current version \(record.version), expected \(expected))",
            extra: [
                ("currentVersion", .string(record.version)), ("currentRecord", record.json),
                ("object", .string(object)),
            ])
    }

    public func delete(object: String, id: String, ifMatch: String?, query: [(String, String)], userId: String)
        -> CoreResponse
    {
        guard let definition = definition(object) else { return objectNotFound(object) }
        let expected = query.first { $0.0 == "expectedVersion" }?.1 ?? ifMatch
        return state.withLock { state in
            do throws(WriteFailure) {
                try remove(id: id, expected: expected, definition: definition, userId: userId, state: &state)
                return CoreResponse(
                    status: 200,
                    body: .object([("object", .string(object)), ("id", .string(id)), ("success", .bool(true))]))
            } catch {
                return error.response
            }
        }
    }

    func remove(id: String, expected: String?, definition: ObjectDefinition, userId: String, state: inout State)
        throws(WriteFailure)
    {
        guard let record = state.tables[definition.name]?.record(id) else {
            throw WriteFailure(response: recordNotFound(definition.name, id))
        }
        if let expected, Self.normalizeVersion(expected) != record.version {
            throw WriteFailure(
                response: conflict(record, expected: Self.normalizeVersion(expected), object: definition.name))
        }
        try applyDeleteBehaviors(of: id, in: definition, userId: userId, state: &state)
        state.tables[definition.name]!.remove(id)
    }

    /// What deleting record `id` does to the records that reference it, as the real engine's delete
    /// does (`objectql` `cascadeDeleteRelations`; docs/devserver.md): per lookup field naming the
    /// object, its `deleteBehavior` — `set_null` by default (the field cleared through an update, so
    /// the referencing records' `updated_at` moves and a pull brings them), `restrict` (the delete is
    /// refused, 409 `DELETE_RESTRICTED`; a required lookup's `set_null` is a `restrict`), `cascade`
    /// (they are deleted too, with their own behaviours). Every restriction is checked before anything
    /// is written, so a refused delete changes nothing.
    func applyDeleteBehaviors(of id: String, in definition: ObjectDefinition, userId: String, state: inout State)
        throws(WriteFailure)
    {
        var writes: [(child: ObjectDefinition, field: FieldDefinition, cascade: Bool, ids: [String])] = []
        for child in objects {
            for field in child.fields
            where (field.type == "lookup" || field.type == "master_detail") && field.reference == definition.name {
                let behavior = field.resolvedDeleteBehavior
                let dependents = (state.tables[child.name]?.rows ?? []).compactMap { row in
                    row.flatMap { $0[field.name] == .string(id) ? $0.id : nil }
                }
                guard !dependents.isEmpty else { continue }
                if behavior == "restrict" {
                    throw WriteFailure(
                        response: .error(
                            status: 409, code: "DELETE_RESTRICTED",
                            message:
                                "Cannot delete \(definition.label): \(dependents.count) \(child.label) record(s) reference it.",
                            extra: [
                                ("object", .string(definition.name)), ("dependentObject", .string(child.name)),
                                ("dependentCount", .number(Double(dependents.count))),
                            ]))
                }
                writes.append((child, field, behavior == "cascade", dependents))
            }
        }
        for write in writes {
            for dependent in write.ids where state.tables[write.child.name]?.record(dependent) != nil {
                if write.cascade {
                    try remove(id: dependent, expected: nil, definition: write.child, userId: userId, state: &state)
                } else {
                    _ = try modify(
                        id: dependent, data: [(write.field.name, .null)], expected: nil, definition: write.child,
                        userId: userId, state: &state)
                }
            }
        }
    }

    // MARK: Bulk

    func tooLarge(_ count: Int, object: String) -> CoreResponse {
        .error(
            status: 400, code: "BATCH_TOO_LARGE", message: "Batch too large: \(count) records (max \(batchCap))",
            extra: [("count", .number(Double(count))), ("max", .number(Double(batchCap))), ("object", .string(object))])
    }

    /// A request-shape refusal (the route's zod check): 400 `VALIDATION_FAILED` with `fields`.
    func invalidRequest(_ message: String, field: String, issue: String, object: String) -> CoreResponse {
        .error(
            status: 400, code: "VALIDATION_FAILED", message: message,
            extra: [
                (
                    "fields",
                    .array([
                        .object([
                            ("field", .string(field)), ("code", .string("invalid_type")), ("message", .string(issue)),
                        ])
                    ])
                ),
                ("object", .string(object)),
            ])
    }

    /// `POST /data/:o/createMany` with a bare array: all-or-abort. The first refused row aborts the
    /// whole call with the single-write envelope (400 `VALIDATION_FAILED`, 409 `UNIQUE_VIOLATION`),
    /// which names no row index, and nothing is created (`createManyData` → `engine.insert(rows)`).
    public func createMany(object: String, body: [UInt8], userId: String) -> CoreResponse {
        guard let definition = definition(object) else { return objectNotFound(object) }
        let message = "Invalid createMany request — the body must be a JSON array of record objects"
        guard let json = try? JSONValue.parse(body), case .array(let items) = json else {
            return invalidRequest(message, field: "records", issue: "Expected array", object: object)
        }
        if let bad = items.firstIndex(where: { $0.objectValue == nil }) {
            return invalidRequest(message, field: "records.\(bad)", issue: "Expected object", object: object)
        }
        if items.count > batchCap { return tooLarge(items.count, object: object) }
        return state.withLock { state in
            if microsecondStamps { state.transactionStamp = stamp(&state) }
            defer { state.transactionStamp = nil }
            let snapshot = state
            var records: [JSONValue] = []
            for item in items {
                do throws(WriteFailure) {
                    records.append(
                        try insert(item.objectValue ?? [], definition: definition, userId: userId, state: &state).0.json
                    )
                } catch {
                    state = snapshot
                    return error.response
                }
            }
            return CoreResponse(
                status: 201,
                body: .object([
                    ("object", .string(object)), ("records", .array(records)),
                    ("count", .number(Double(records.count))),
                ]))
        }
    }

    /// `updateMany` `{records:[{id, data}], options?}`. The real route parses the body with zod, which
    /// strips unknown keys, so a per-row `expectedVersion` is silently ignored and the update is
    /// unconditional. `conditional` (`--conditional-batch`, an extension) honours it instead: a
    /// mismatch is a per-row CONCURRENT_UPDATE with the current record.
    public func updateMany(object: String, body: [UInt8], userId: String, conditional: Bool = false) -> CoreResponse {
        guard let json = try? JSONValue.parse(body), let records = json["records"]?.arrayValue,
            records.allSatisfy({ $0["id"]?.stringValue != nil && $0["data"]?.objectValue != nil })
        else {
            return invalidRequest(
                "Invalid updateMany request", field: "records", issue: "Expected [{id, data}]", object: object)
        }
        let rows =
            conditional
            ? records : records.map { row in JSONValue.object([("id", row["id"]!), ("data", row["data"]!)]) }
        return bulk(object: object, operation: "update", rows: rows, options: json["options"], userId: userId)
    }

    /// `deleteMany` `{ids:[…], options?}`; `versions: {id: version}` only with `conditional` (as above).
    public func deleteMany(object: String, body: [UInt8], userId: String, conditional: Bool = false) -> CoreResponse {
        guard let json = try? JSONValue.parse(body), let ids = json["ids"]?.arrayValue,
            ids.allSatisfy({ $0.stringValue != nil })
        else {
            return invalidRequest(
                "Invalid deleteMany request", field: "ids", issue: "Expected array of strings", object: object)
        }
        let rows: [JSONValue] = ids.map { id in
            var members: [(String, JSONValue)] = [("id", id)]
            if conditional, let id = id.stringValue, let version = json["versions"]?[id] {
                members.append(("expectedVersion", version))
            }
            return .object(members)
        }
        return bulk(object: object, operation: "delete", rows: rows, options: json["options"], userId: userId)
    }

    /// `POST /data/:o/batch` `{operation, records:[{id?, data?}], options}`; a row's `expectedVersion`
    /// only counts with `conditional` (the real `batchData` has no per-row version check).
    public func batch(object: String, body: [UInt8], userId: String, conditional: Bool = false) -> CoreResponse {
        guard let json = try? JSONValue.parse(body), let operation = json["operation"]?.stringValue,
            ["create", "update", "upsert", "delete"].contains(operation), let records = json["records"]?.arrayValue
        else {
            return invalidRequest(
                "Invalid batch request", field: "operation", issue: "Expected {operation, records}", object: object)
        }
        if json["options"]?["validateOnly"] != nil {
            return .error(status: 400, code: "VALIDATION_ERROR", message: "validateOnly is retired")
        }
        let rows =
            conditional
            ? records
            : records.map { row in JSONValue.object((row.objectValue ?? []).filter { $0.0 != "expectedVersion" }) }
        return bulk(object: object, operation: operation, rows: rows, options: json["options"], userId: userId)
    }

    func bulk(object: String, operation: String, rows: [JSONValue], options: JSONValue?, userId: String) -> CoreResponse
    {
        guard let definition = definition(object) else { return objectNotFound(object) }
        if rows.count > batchCap { return tooLarge(rows.count, object: object) }
        let atomic = options?["atomic"] == .bool(true)
        let continueOnError = options?["continueOnError"] == .bool(true)
        let returnRecords = options?["returnRecords"] == .bool(true)
        return state.withLock { state in
            let snapshot = state
            var results: [JSONValue] = []
            var failedAt: Int?
            for (index, row) in rows.enumerated() {
                if failedAt != nil && !continueOnError && !atomic {
                    results.append(
                        rowFailure(
                            index: index, id: row["id"], code: "NOT_ATTEMPTED", message: "not attempted", status: 0))
                    continue
                }
                if failedAt != nil && atomic {
                    results.append(
                        rowFailure(
                            index: index, id: row["id"], code: "NOT_ATTEMPTED", message: "not attempted", status: 0))
                    continue
                }
                do throws(WriteFailure) {
                    let id = row["id"]?.stringValue
                    let expected = row["expectedVersion"]?.stringValue
                    var record: Record?
                    switch operation {
                    case "create":
                        let members = row["data"]?.objectValue ?? (row.objectValue ?? []).filter { $0.0 != "data" }
                        record = try insert(
                            members + (id.map { [("id", JSONValue.string($0))] } ?? []),
                            definition: definition, userId: userId, state: &state
                        ).0
                    case "update", "upsert":
                        guard let id else {
                            throw WriteFailure(
                                response: .error(status: 400, code: "VALIDATION_ERROR", message: "id required"))
                        }
                        let data = row["data"]?.objectValue ?? []
                        if operation == "upsert" && state.tables[object]?.record(id) == nil {
                            record = try insert(
                                data + [("id", .string(id))], definition: definition, userId: userId, state: &state
                            ).0
                        } else {
                            record = try modify(
                                id: id, data: data, expected: expected, definition: definition, userId: userId,
                                state: &state
                            ).0
                        }
                    default:
                        guard let id else {
                            throw WriteFailure(
                                response: .error(status: 400, code: "VALIDATION_ERROR", message: "id required"))
                        }
                        try remove(id: id, expected: expected, definition: definition, userId: userId, state: &state)
                    }
                    var result: [(String, JSONValue)] = [
                        ("id", .string(record?.id ?? id ?? "")), ("success", .bool(true)),
                        ("index", .number(Double(index))),
                    ]
                    if let record, returnRecords || operation != "delete" {
                        result.append(("data", record.json))
                    }
                    results.append(.object(result))
                } catch {
                    failedAt = failedAt ?? index
                    let body = error.response.body
                    var entry: [(String, JSONValue)] = [
                        ("code", body?["code"] ?? .string("ERROR")), ("message", body?["error"] ?? .string("failed")),
                        ("httpStatus", .number(Double(error.response.status))),
                    ]
                    if let version = body?["currentVersion"] { entry.append(("currentVersion", version)) }
                    if let current = body?["currentRecord"] { entry.append(("currentRecord", current)) }
                    if let fields = body?["fields"] { entry.append(("fields", fields)) }
                    results.append(
                        .object([
                            ("id", row["id"] ?? .null), ("success", .bool(false)),
                            ("index", .number(Double(index))), ("errors", .array([.object(entry)])),
                        ]))
                }
            }
            if atomic, let failedAt {
                state = snapshot
                results = results.enumerated().map { index, result in
                    if index == failedAt || result["success"] == .bool(false) { return result }
                    return rowFailure(
                        index: index, id: result["id"], code: "ROLLED_BACK", message: "rolled back", status: 0)
                }
            }
            let succeeded = results.filter { $0["success"] == .bool(true) }.count
            return CoreResponse(
                status: 200,
                body: .object([
                    ("success", .bool(succeeded == rows.count)), ("operation", .string(operation)),
                    ("total", .number(Double(rows.count))), ("succeeded", .number(Double(succeeded))),
                    ("failed", .number(Double(rows.count - succeeded))), ("results", .array(results)),
                ]))
        }
    }

    func rowFailure(index: Int, id: JSONValue?, code: String, message: String, status: Int) -> JSONValue {
        .object([
            ("id", id ?? .null), ("success", .bool(false)), ("index", .number(Double(index))),
            ("errors", .array([.object([("code", .string(code)), ("message", .string(message))])])),
        ])
    }
}
