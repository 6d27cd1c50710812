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

        /// Back into (updated_at, id) order after a write stamped out of order.
        mutating func sortByVersion() {
            compact()
            rows.sort { left, right in
                let (a, b) = (Instant.milliseconds(left!.version) ?? 0, Instant.milliseconds(right!.version) ?? 0)
                return a != b ? a < b : FilterEvaluator.codePointOrder(left!.id, right!.id) < 0
            }
            index = [:]
            for (position, row) in rows.enumerated() { index[row!.id] = position }
        }

        /// The first position whose record's `updated_at` is at or after `millis` (rows are in
        /// version order; holes are skipped).
        func firstRow(from millis: Int64) -> Int {
            var low = 0
            var high = rows.count
            while low < high {
                let middle = (low + high) / 2
                var probe = middle
                while probe < high, rows[probe] == nil { probe += 1 }
                guard probe < high, let version = Instant.milliseconds(rows[probe]!.version) else {
                    high = middle
                    continue
                }
                if version < millis { low = probe + 1 } else { high = middle }
            }
            return low
        }
        var count: Int { index.count }
    }

    struct State {
        var tables: [String: Table] = [:]
        var clock = VersionClock()
        /// With microsecond stamps, the one stamp of the request under way (a bulk write is one
        /// transaction on Postgres, and `knex.fn.now()` is the transaction's start: every row of it
        /// carries the same `updated_at`).
        var transactionStamp: (text: String, micros: Int32)?
    }

    /// `--microsecond-stamps`: `updated_at` as ObjectStack keeps it on Postgres (docs/devserver.md).
    public let microsecondStamps: Bool

    /// The `updated_at` of a write now.
    func stamp(_ state: inout State) -> (text: String, micros: Int32) {
        guard microsecondStamps else { return (state.clock.next(), 0) }
        return state.transactionStamp ?? state.clock.nextMicros()
    }

    /// `--assign-ids`: creates ignore the client's `id` and get one the server makes (a server
    /// that does not keep client ids; the real one keeps them).
    public let assignsIDs: Bool

    public init(
        objects: [ObjectDefinition] = ObjectDefinition.seeded, batchCap: Int = 200, assignsIDs: Bool = false,
        microsecondStamps: Bool = false
    ) {
        self.objects = objects
        self.batchCap = batchCap
        self.assignsIDs = assignsIDs
        self.microsecondStamps = microsecondStamps
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

    /// How seeded records get their ids (docs/devserver.md, control call `seed`).
    public enum SeedIDs: String, Sendable {
        /// 16 characters of nanoid's URL alphabet, as ObjectStack's SQL driver mints them
        /// (`nanoid(DEFAULT_ID_LENGTH)`, 16): ids in no particular order. The default.
        case random
        /// `<prefix>_s1`, `<prefix>_s2`, …, with only the name, `status` and `amount` fields (the
        /// fixture before random ids): for tests that name seeded records.
        case sequential
    }

    /// Inserts `count` generated records (titles/names "Seed N"), fast (a million in a few
    /// seconds). Each gets the next version, so `updated_at` follows insertion order, not id order
    /// (with random ids). Records are about 420 bytes of JSON, like a real task with a note.
    @discardableResult
    /// `oneTransaction`: every record gets the same stamp (with `--microsecond-stamps`, as one
    /// transaction writing them all would give them on Postgres).
    public func seed(object: String, count: Int, userId: String, ids: SeedIDs = .random, oneTransaction: Bool = false)
        -> Int
    {
        guard let definition = definition(object) else { return 0 }
        var generator = SeedGenerator()
        return state.withLock { state in
            var table = state.tables[object] ?? Table()
            table.rows.reserveCapacity(table.rows.count + count)
            table.index.reserveCapacity(table.index.count + count)
            if oneTransaction { state.transactionStamp = stamp(&state) }
            defer { state.transactionStamp = nil }
            for _ in 0..<count {
                table.sequence += 1
                let sequence = table.sequence
                let (version, micros) = stamp(&state)
                var id: String
                switch ids {
                case .random:
                    repeat { id = generator.nanoid() } while table.index[id] != nil
                case .sequential:
                    id = "\(definition.idPrefix)_s\(sequence)"
                }
                var members: [(String, JSONValue)] = [("id", .string(id))]
                members.append((definition.nameField, .string("Seed \(sequence)")))
                for field in definition.fields where field.name != definition.nameField {
                    // Sequential seeds keep the previous narrow records (status and amount only),
                    // which the tests naming them were written against.
                    if ids == .sequential && field.name != "status" && field.name != "amount" { continue }
                    if let value = Self.seedValue(field, sequence: sequence, generator: &generator) {
                        members.append((field.name, value))
                    }
                }
                members += [
                    ("created_at", .string(version)), ("updated_at", .string(version)),
                    ("created_by", .string(userId)), ("updated_by", .string(userId)), ("owner_id", .string(userId)),
                ]
                table.append(Record(members: members, micros: micros))
            }
            state.tables[object] = table
            return count
        }
    }

    /// A plausible value for a seeded field (status and amount keep their old pattern, which tests
    /// and benchmarks count on: every third record is done, amounts cycle through 0…999).
    static func seedValue(_ field: FieldDefinition, sequence: Int, generator: inout SeedGenerator) -> JSONValue? {
        switch (field.name, field.type) {
        case ("status", _): return .string(sequence % 3 == 0 ? "done" : "open")
        case ("amount", _): return .number(Double(sequence % 1000))
        case (_, "select"):
            return field.options.isEmpty ? nil : .string(field.options[sequence % field.options.count].1)
        case (_, "date"): return .string("2026-\(sequence % 9 + 1 < 10 ? "0" : "")\(sequence % 9 + 1)-1\(sequence % 9)")
        case (_, "boolean"): return .bool(sequence % 3 == 0)
        case (_, "lookup"), (_, "master_detail"): return .string("ref_" + String(generator.nanoid().prefix(12)))
        case (_, "textarea"):
            return .string(
                "Follow up with the customer about item \(sequence); check the figures against last "
                    + "quarter before the review.")
        case (_, "number"): return .number(Double(sequence % 97))
        case (_, "email"): return .string("seed\(sequence)@example.com")
        case (_, "text"): return field.unique ? nil : .string("Owner \(sequence % 50)")
        default: return nil
        }
    }

    /// Changes a record as another user would (bumps `updated_at`).
    /// A change made by another user. `stampedAt` (milliseconds) gives it the `updated_at` a real
    /// server can give, which this one otherwise never does: one equal to another write's (two
    /// writes in one millisecond: the real server stamps `new Date()`), or one earlier than writes
    /// already visible (a transaction stamped at its start, `now()` in Postgres, that commits after
    /// later ones). docs/devserver.md, "Version stamps".
    public func modifyAsOtherUser(object: String, id: String, fields: JSONValue, stampedAt: Int64? = nil)
        -> CoreResponse
    {
        guard definition(object) != nil else { return objectNotFound(object) }
        return state.withLock { state in
            guard var record = state.tables[object]?.record(id) else { return recordNotFound(object, id) }
            for (key, value) in fields.objectValue ?? [] where !ObjectDefinition.systemFields.contains(key) {
                record[key] = value
            }
            if let stampedAt {
                record["updated_at"] = .string(VersionClockFormat.format(millis: stampedAt))
                record.micros = microsecondStamps ? Int32.random(in: 1...999) : 0
            } else {
                let (version, micros) = stamp(&state)
                record["updated_at"] = .string(version)
                record.micros = micros
            }
            record["updated_by"] = .string("usr_other")
            state.tables[object]!.append(record)
            // Storage stays in (updated_at, id) order, which the keyset reads rely on.
            if let stampedAt {
                state.clock.observe(millis: stampedAt)
                state.tables[object]!.sortByVersion()
            }
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
        // ObjectStack counts only for a page size above zero (its `findData`): `top=0` answers no
        // rows, `total: 0` and `hasMore: false`, however many records match.
        if query.limit == 0 {
            var members: [(String, JSONValue)] = [("object", .string(definition.name)), ("records", .array([]))]
            if query.count { members.append(("total", .number(0))) }
            members.append(("hasMore", .bool(false)))
            return CoreResponse(status: 200, body: .object(members))
        }
        let (page, total): ([JSONValue], Int?) = state.withLock { state in
            let table = state.tables[definition.name] ?? Table()
            let limit = query.limit ?? Int.max
            var page: [JSONValue] = []
            var matched = 0
            let needTotal = query.count
            // (Storage order knows no microseconds: with them every list sorts, as an index would.)
            if !microsecondStamps && (query.sort.isEmpty || query.isUpdatedAtIdAscending) {
                // Storage order is (updated_at, id) ascending: stream, no sort. A filter that
                // bounds updated_at from below (a keyset page) starts at that bound, as an index would.
                let start = query.condition.flatMap(Self.updatedAtLowerBound).map { table.firstRow(from: $0) } ?? 0
                for row in table.rows[start...] {
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
                    var order =
                        FilterEvaluator.compare(left[key.field] ?? .null, right[key.field] ?? .null)
                        ?? Self.nullOrder(left[key.field], right[key.field])
                    if order == 0 && key.field == "updated_at" { order = Int(left.micros) - Int(right.micros) }
                    if order != 0 { return key.descending ? order > 0 : order < 0 }
                }
                // A unique last key, so that pages of a sort with ties partition the rows
                // (ObjectStack's pagination conformance table; its drivers append the key column
                // in the direction of the last key asked for: `sort=-amount` breaks ties by id
                // descending, `orderKeysFor` in the SQL driver).
                let order = FilterEvaluator.codePointOrder(left.id, right.id)
                return query.sort.last?.descending == true ? order > 0 : order < 0
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

    /// A bound every matching record's `updated_at` is at or above (milliseconds), if the condition
    /// implies one.
    static func updatedAtLowerBound(_ condition: Condition) -> Int64? {
        switch condition {
        case .instant("updated_at", let op, let bounds, _) where [.gt, .gte, .eq].contains(op) && bounds.count == 1:
            return bounds[0]
        case .all(let children): return children.compactMap(updatedAtLowerBound).max()
        case .any(let children):
            let bounds = children.map(updatedAtLowerBound)
            return bounds.contains { $0 == nil } ? nil : bounds.compactMap { $0 }.min()
        default: return nil
        }
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

/// A fast, non-cryptographic generator for seeded ids (SplitMix64 from one random seed).
struct SeedGenerator {
    private var state = UInt64.random(in: 0...UInt64.max)
    /// nanoid's default (URL-safe) alphabet.
    static let alphabet = Array("useandom-26T198340PX75pxJACKVERYMINDBUSHWOLF_GQZbfghjklqvwyzrict".utf8)

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// 16 characters of the alphabet (96 random bits), like `nanoid(16)`.
    mutating func nanoid() -> String {
        var bits = next()
        var more = next()
        var bytes = [UInt8](repeating: 0, count: 16)
        for index in 0..<16 {
            if index == 10 { bits = more; more = 0 }
            bytes[index] = Self.alphabet[Int(bits & 63)]
            bits >>= 6
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
