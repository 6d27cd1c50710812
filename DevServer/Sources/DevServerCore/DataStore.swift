import Synchronization

/// The in-memory data of the dev server, internally synchronised (one lock).
///
/// Per object, records are kept in `updated_at` order (every write moves a record to the end, since
/// versions strictly increase), so the common `sort=updated_at,id` keyset pages and unsorted offset
/// pages need no sorting at all.
public final class DataStore: @unchecked Sendable {
    // @unchecked Sendable: all mutable state is inside `state`'s mutex.
    public let objects: [ObjectDefinition]
    public let batchCap: Int
    let state: Mutex<State>

    struct Table {
        var rows: [Record?] = []
        var index: [String: Int] = [:]
        var holes = 0
        var sequence = 0

        mutating func append(_ record: Record) {
            if let old = index[record.id] {
                rows[old] = nil
                holes += 1
            }
            index[record.id] = rows.count
            rows.append(record)
            if holes > 1024 && holes * 2 > rows.count { compact() }
        }

        mutating func remove(_ id: String) {
            guard let old = index.removeValue(forKey: id) else { return }
            rows[old] = nil
            holes += 1
        }

        mutating func compact() {
            rows = rows.compactMap { $0 }.map { Optional($0) }
            index = [:]
            for (position, row) in rows.enumerated() { index[row!.id] = position }
            holes = 0
        }

        func record(_ id: String) -> Record? { index[id].flatMap { rows[$0] } }
        var count: Int { index.count }
    }

    struct State {
        var tables: [String: Table] = [:]
        var clock = VersionClock()
    }

    public init(objects: [ObjectDefinition] = ObjectDefinition.seeded, batchCap: Int = 200) {
        self.objects = objects
        self.batchCap = batchCap
        var initial = State()
        for object in objects { initial.tables[object.name] = Table() }
        state = Mutex(initial)
    }

    func definition(_ name: String) -> ObjectDefinition? { objects.first { $0.name == name } }

    func objectNotFound(_ name: String) -> CoreResponse {
        .error(
            status: 404, code: "OBJECT_NOT_FOUND", message: "Object \(name) not found",
            extra: [("object", .string(name))])
    }

    func recordNotFound(_ object: String, _ id: String) -> CoreResponse {
        .error(
            status: 404, code: "RECORD_NOT_FOUND", message: "Record \(id) not found in \(object)",
            extra: [("object", .string(object))])
    }

    // MARK: Control

    public func reset() {
        state.withLock { state in
            for object in objects { state.tables[object.name] = Table() }
        }
    }

    public func count(object: String) -> Int {
        state.withLock { $0.tables[object]?.count ?? 0 }
    }

    public func record(object: String, id: String) -> JSONValue? {
        state.withLock { $0.tables[object]?.record(id)?.json }
    }

    /// Inserts `count` generated records (titles/names "Seed N"), fast.
    @discardableResult
    public func seed(object: String, count: Int, userId: String) -> Int {
        guard let definition = definition(object) else { return 0 }
        return state.withLock { state in
            var table = state.tables[object] ?? Table()
            table.rows.reserveCapacity(table.rows.count + count)
            for _ in 0..<count {
                table.sequence += 1
                let version = state.clock.next()
                var members: [(String, JSONValue)] = [("id", .string("\(definition.idPrefix)_s\(table.sequence)"))]
                members.append((definition.nameField, .string("Seed \(table.sequence)")))
                if definition.field("status") != nil {
                    members.append(("status", .string(table.sequence % 3 == 0 ? "done" : "open")))
                }
                if definition.field("amount") != nil {
                    members.append(("amount", .number(Double(table.sequence % 1000))))
                }
                members += [
                    ("created_at", .string(version)), ("updated_at", .string(version)),
                    ("created_by", .string(userId)), ("updated_by", .string(userId)), ("owner_id", .string(userId)),
                ]
                table.append(Record(members: members))
            }
            state.tables[object] = table
            return count
        }
    }

    /// Changes a record as another user would (bumps `updated_at`).
    public func modifyAsOtherUser(object: String, id: String, fields: JSONValue) -> CoreResponse {
        guard definition(object) != nil else { return objectNotFound(object) }
        return state.withLock { state in
            guard var record = state.tables[object]?.record(id) else { return recordNotFound(object, id) }
            for (key, value) in fields.objectValue ?? [] where !ObjectDefinition.systemFields.contains(key) {
                record[key] = value
            }
            record["updated_at"] = .string(state.clock.next())
            record["updated_by"] = .string("usr_other")
            state.tables[object]!.append(record)
            return CoreResponse(
                status: 200, body: .object([("object", .string(object)), ("id", .string(id)), ("record", record.json)]))
        }
    }

    // MARK: Reads

    public func list(object: String, query: [(String, String)]) -> CoreResponse {
        guard let definition = definition(object) else { return objectNotFound(object) }
        let parsed: ListQuery
        switch ListQuery.parse(query, object: definition) {
        case .success(let value): parsed = value
        case .failure(let response): return response
        }
        return run(parsed, definition: definition)
    }

    public func query(object: String, body: [UInt8]) -> CoreResponse {
        guard let definition = definition(object) else { return objectNotFound(object) }
        guard let json = try? JSONValue.parse(body), case .object = json else {
            return .error(status: 400, code: "INVALID_QUERY", message: "query body must be a JSON object")
        }
        switch ListQuery.parse(body: json, object: definition) {
        case .success(let parsed): return run(parsed, definition: definition)
        case .failure(let response): return response
        }
    }

    func run(_ query: ListQuery, definition: ObjectDefinition) -> CoreResponse {
        let (page, total): ([JSONValue], Int?) = state.withLock { state in
            let table = state.tables[definition.name] ?? Table()
            let limit = query.limit ?? Int.max
            var page: [JSONValue] = []
            var matched = 0
            let needTotal = query.count
            if query.sort.isEmpty || query.isUpdatedAtIdAscending {
                // Storage order is (updated_at, id) ascending: stream, no sort.
                for row in table.rows {
                    guard let record = row else { continue }
                    if let condition = query.condition, !FilterEvaluator.matches(condition, record) { continue }
                    if let search = query.search,
                        !(record[definition.nameField]?.stringValue.map {
                            FilterEvaluator.asciiLower($0).contains(FilterEvaluator.asciiLower(search))
                        } ?? false)
                    {
                        continue
                    }
                    if matched >= query.offset && page.count < limit { page.append(record.selecting(query.fields)) }
                    matched += 1
                    if !needTotal && page.count >= limit && matched > query.offset + limit { break }
                }
                return (page, needTotal ? matched : nil)
            }
            var candidates: [Record] = []
            for row in table.rows {
                guard let record = row else { continue }
                if let condition = query.condition, !FilterEvaluator.matches(condition, record) { continue }
                candidates.append(record)
            }
            candidates.sort { left, right in
                for key in query.sort {
                    let order =
                        FilterEvaluator.compare(left[key.field] ?? .null, right[key.field] ?? .null)
                        ?? Self.nullOrder(left[key.field], right[key.field])
                    if order != 0 { return key.descending ? order > 0 : order < 0 }
                }
                // A unique last key, so that pages of a sort with ties partition the rows
                // (ObjectStack's pagination conformance table; its drivers append the key column).
                return FilterEvaluator.codePointOrder(left.id, right.id) < 0
            }
            let slice = candidates.dropFirst(query.offset).prefix(limit)
            return (slice.map { $0.selecting(query.fields) }, needTotal ? candidates.count : nil)
        }
        var members: [(String, JSONValue)] = [("object", .string(definition.name)), ("records", .array(page))]
        if let total { members.append(("total", .number(Double(total)))) }
        let hasMore: Bool
        if let total {
            hasMore = query.offset + page.count < total
        } else {
            hasMore = query.limit.map { page.count >= $0 } ?? false
        }
        members.append(("hasMore", .bool(hasMore)))
        return CoreResponse(status: 200, body: .object(members))
    }

    /// NULLs sort first.
    static func nullOrder(_ left: JSONValue?, _ right: JSONValue?) -> Int {
        let leftNull = left == nil || left!.isNull
        let rightNull = right == nil || right!.isNull
        if leftNull == rightNull { return 0 }
        return leftNull ? -1 : 1
    }

    public func get(object: String, id: String, query: [(String, String)]) -> CoreResponse {
        guard let definition = definition(object) else { return objectNotFound(object) }
        var fields: [String]?
        for (key, value) in query {
            switch key {
            case "select", "$select", "fields":
                fields = value.split(separator: ",").map { String($0).trimmed() }
            case "expand", "$expand", "populate": continue
            default:
                return .nestedError(
                    status: 400, code: "VALIDATION_ERROR", message: "Unsupported query parameter \(key)")
            }
        }
        if let fields, let unknown = fields.first(where: { !definition.isKnownField($0) }) {
            return .error(
                status: 400, code: "INVALID_FIELD", message: "Unknown field \(unknown)",
                extra: [("field", .string(unknown))])
        }
        return state.withLock { state in
            guard let record = state.tables[object]?.record(id) else { return recordNotFound(object, id) }
            return CoreResponse(
                status: 200,
                body: .object([
                    ("object", .string(object)), ("id", .string(id)), ("record", record.selecting(fields)),
                ]))
        }
    }
}

extension String {
    public func trimmed() -> String {
        var slice = Substring(self)
        while let first = slice.first, first.isWhitespace { slice.removeFirst() }
        while let last = slice.last, last.isWhitespace { slice.removeLast() }
        return String(slice)
    }
}
