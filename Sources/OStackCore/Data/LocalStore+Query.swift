import SQLCipherKit

/// Local queries on the mirror (docs/filters.md, docs/sync.md "Queries").
extension LocalStore {
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
    /// equality (or `in`) on an indexed field is also given to SQL as a `record_fields` lookup that
    /// narrows the rows first (only for comparands where SQL equality and the server's agree).
    ///
    /// One pass over the table in storage order (`NOT INDEXED`: never the key index's id order,
    /// which would visit the table's pages at random) collects the matching rows' `rid`s and sort
    /// keys; only the requested page's records are then read. An object that is a small share of the
    /// mirror (`isSmallShare`) is read through `records_key` instead: a scan would read every other
    /// object's pages too.
    public func query(_ query: LocalQuery) throws(OStackError) -> (records: [[UInt8]], total: Int) {
        guard ObjectSchema.isIdentifier(query.object) else { return ([], 0) }
        let indexed = query.filter == nil ? [] : try indexedFields(query.object)
        let equalities =
            query.filter.map(Self.indexableEqualities)?.filter { field, _ in
                indexed.contains(field) && !["date", "datetime", "time"].contains(query.fieldTypes[field] ?? "")
            } ?? []
        // Rows narrowed by a `record_fields` lookup are read by rid; otherwise a small share of the
        // mirror is read through `records_key`, a large one by the scan (telling which costs a count
        // of up to an eighth of the mirror's keys, so it is not asked when a lookup narrows).
        // The object is inlined (a checked identifier).
        let small = equalities.isEmpty ? try isSmallShare(query.object) : false
        let table = small ? "records INDEXED BY records_key" : "records NOT INDEXED"
        var sql = "FROM \(table) WHERE object = '\(query.object)'"
        var bindings: [SQLValue] = []
        if let filter = query.filter {
            for (field, values) in equalities {
                sql +=
                    " AND rid IN (SELECT rid FROM record_fields WHERE object = '\(query.object)' AND field = '\(field)'"
                    + " AND value IN (\(values.map { _ in "?" }.joined(separator: ", "))))"
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
        // In id order with a page size (`records list`'s default): one pass keeping the page's ids in
        // a bounded heap instead of sorting every match, so the cost grows with the mirror, not
        // with m·log m of its matches.
        let first = max(0, query.offset)
        // Offset and limit come from the command line: their sum is kept from overflowing.
        let end = query.limit.map { first.addingReportingOverflow(max(0, $0)) }.map {
            $0.overflow ? Int.max : $0.partialValue
        }
        if query.sort.isEmpty, let end {
            return try firstByID(sql: sql, bindings: bindings, skip: first, end: end)
        }
        var order = query.sort.map { key in
            key.field == "id"
                ? "id\(key.descending ? " DESC" : "")"
                : "ostack_field(data, '\(key.field)')\(key.descending ? " DESC" : "")"
        }
        order.append("id")
        // One pass: every match is counted (for `total`); the sorter holds rids and keys, not records.
        let page = "SELECT rid " + sql + " ORDER BY " + order.joined(separator: ", ")
        let last = end ?? Int.max
        do {
            let statement = try database.prepare(page)
            try statement.bind(bindings)
            var rids: [Int64] = []
            var total = 0
            while try statement.step() {
                if total >= first && total < last, case .integer(let rid) = statement.value(at: 0) { rids.append(rid) }
                total += 1
            }
            return (try records(at: rids), total)
        } catch {
            throw Self.storage(error)
        }
    }

    /// Whether `object` holds fewer than an eighth of the mirror's rows (counting at most that many
    /// of its `records_key` entries; `max(rid)` stands for the table's size). An object alone in the
    /// mirror (the usual case) is not, found by two index probes instead of the count.
    func isSmallShare(_ object: String) throws(OStackError) -> Bool {
        let others = try integer(
            "SELECT EXISTS (SELECT 1 FROM records INDEXED BY records_key WHERE object < ?)"
                + " OR EXISTS (SELECT 1 FROM records INDEXED BY records_key WHERE object > ?)",
            [.text(object), .text(object)])
        if others == 0 { return false }
        let bound = try integer("SELECT max(rid) FROM records") / 8 + 1
        let count = try integer(
            "SELECT count(*) FROM (SELECT 1 FROM records INDEXED BY records_key WHERE object = ? LIMIT ?)",
            [.text(object), .integer(Int64(bound))])
        return count < bound
    }

    /// The stored text of the records at `rids`, in that order.
    private func records(at rids: [Int64]) throws -> [[UInt8]] {
        let read = try self.statement("SELECT data FROM records WHERE rid = ?", [.null])
        defer { read.reset() }
        var records: [[UInt8]] = []
        records.reserveCapacity(rids.count)
        for rid in rids {
            read.reset()
            try read.bind([.integer(rid)])
            if try read.step() { records.append(read.withColumnBytes(at: 0) { Array($0) }) }
        }
        return records
    }

    /// The matches `skip ..< end` in `id` order (SQLite's BINARY collation: byte order), and
    /// how many match.
    private func firstByID(sql: String, bindings: [SQLValue], skip: Int, end: Int) throws(OStackError)
        -> (records: [[UInt8]], total: Int)
    {
        do {
            let statement = try database.prepare("SELECT rid, id " + sql)
            try statement.bind(bindings)
            var heap = SmallestIDs(capacity: end)
            var total = 0
            while try statement.step() {
                total += 1
                let rid = statement.integer(at: 0)
                statement.withColumnBytes(at: 1) { heap.offer($0, rid: rid) }
            }
            return (try records(at: heap.ascending().dropFirst(skip).map(\.rid)), total)
        } catch let error as OStackError {
            throw error
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
}

/// The `capacity` smallest ids offered (byte order), in a max-heap: an id no smaller than the largest
/// kept is turned away with one comparison and no copy.
struct SmallestIDs {
    let capacity: Int
    private var heap: [(id: [UInt8], rid: Int64)] = []

    init(capacity: Int) { self.capacity = capacity }

    mutating func offer(_ id: UnsafeRawBufferPointer, rid: Int64) {
        guard capacity > 0 else { return }
        if heap.count < capacity {
            heap.append((Array(id), rid))
            var child = heap.count - 1
            while child > 0 {
                let parent = (child - 1) / 2
                guard Self.less(heap[parent].id, heap[child].id) else { break }
                heap.swapAt(parent, child)
                child = parent
            }
            return
        }
        guard heap[0].id.withUnsafeBytes({ Self.less(id, $0) }) else { return }
        heap[0] = (Array(id), rid)
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var largest = parent
            if left < heap.count, Self.less(heap[largest].id, heap[left].id) { largest = left }
            if right < heap.count, Self.less(heap[largest].id, heap[right].id) { largest = right }
            if largest == parent { break }
            heap.swapAt(parent, largest)
            parent = largest
        }
    }

    /// The ids kept, smallest first.
    func ascending() -> [(id: [UInt8], rid: Int64)] {
        heap.sorted { Self.less($0.id, $1.id) }
    }

    static func less(_ a: [UInt8], _ b: [UInt8]) -> Bool { a.lexicographicallyPrecedes(b) }

    static func less(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        a.lexicographicallyPrecedes(b)
    }
}
