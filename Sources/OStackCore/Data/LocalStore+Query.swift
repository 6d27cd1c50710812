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
    /// equality (or `in`) on an indexed field is also looked up in the values map first, and only the
    /// records it names are read (only for comparands where SQL equality and the server's agree).
    ///
    /// Otherwise one pass over the table in storage order (`NOT INDEXED`) collects the matching rows'
    /// `rid`s and sort keys, skipping rows a newer level supersedes; only the requested page's records
    /// are then read. An object that is a small share of the mirror (`isSmallShare`) is read through
    /// its keys instead: a scan would read every other object's pages too.
    public func query(_ query: LocalQuery) throws(OStackError) -> (records: [[UInt8]], total: Int) {
        // The levels, the lookups and the scan on one snapshot (another process may merge or pull).
        try reading { () throws(OStackError) -> (records: [[UInt8]], total: Int) in try runQuery(query) }
    }

    private func runQuery(_ query: LocalQuery) throws(OStackError) -> (records: [[UInt8]], total: Int) {
        guard ObjectSchema.isIdentifier(query.object) else { return ([], 0) }
        let indexed = query.filter == nil ? [] : try indexedFields(query.object)
        let indexable = query.filter.map(Self.indexableEqualities) ?? []
        let equalities = indexable.filter { field, _ in
            indexed.contains(field) && !["date", "datetime", "time"].contains(query.fieldTypes[field] ?? "")
        }
        // `id = '…'` and `id in (…)`: the keys map names their records (each conjunct narrows).
        let idConjuncts = indexable.filter { field, _ in field == "id" }.map { Set($0.1) }
        let levels = try index.levels(query.object)
        let first = max(0, query.offset)
        // Offset and limit come from the command line: their sum is kept from overflowing.
        let end = query.limit.map { first.addingReportingOverflow(max(0, $0)) }.map {
            $0.overflow ? Int.max : $0.partialValue
        }
        // No filter, no sort, a page (`records list`'s default): the page and the count come from the
        // keys map, which holds ids in order, without reading every record (at 1 000 000 records,
        // about 30 ms against a second).
        if query.filter == nil, query.sort.isEmpty, let end, end <= Self.keyedPageLimit {
            return try firstByKey(query.object, levels: levels, skip: first, end: end)
        }
        // The records to read, when they are known without a scan: the ones a lookup names, or every
        // record of a small share of the mirror. (The object is inlined: a checked identifier.)
        var candidates: [Int64]?
        var superseded = Set<Int64>()
        if let ids = idConjuncts.first {
            let named = idConjuncts.dropFirst().reduce(ids) { $0.intersection($1) }
            var rids = Set(try index.current(query.object, named, in: levels).values.map(\.rid))
            if !equalities.isEmpty { rids.formIntersection(try lookedUp(query.object, equalities, levels: levels)) }
            candidates = rids.sorted()
        } else if !equalities.isEmpty {
            candidates = try lookedUp(query.object, equalities, levels: levels)
        } else {
            switch try currentRows(query.object, levels: levels) {
            case .keyed(let rids): candidates = rids.sorted()
            case .scan(let skipped): superseded = skipped
            }
        }
        var sql: String
        if let candidates {
            try fillQueryRIDs(candidates)
            sql =
                "FROM temp.ostack_query_rids q CROSS JOIN records ON records.rid = q.rid WHERE records.object = '\(query.object)'"
        } else {
            sql = "FROM records NOT INDEXED WHERE records.object = '\(query.object)'"
        }
        if let filter = query.filter {
            let compiled = LocalFilter(filter, fieldTypes: query.fieldTypes)
            do {
                try database.registerRawFunction("ostack_match", argumentCount: 1, deterministic: false) { arguments in
                    .integer(arguments.withBytes(at: 0) { compiled.matches($0) } ? 1 : 0)
                }
            } catch {
                throw Self.storage(error)
            }
            sql += " AND ostack_match(records.data)"
        }
        // In id order with a page size (`records list`'s default): one pass keeping the page's ids in
        // a bounded heap instead of sorting every match, so the cost grows with the mirror, not
        // with m·log m of its matches.
        if query.sort.isEmpty, let end {
            return try firstByID(sql: sql, skip: first, end: end, superseded: superseded)
        }
        var order = query.sort.map { key in
            key.field == "id"
                ? "records.id\(key.descending ? " DESC" : "")"
                : "ostack_field(records.data, '\(key.field)')\(key.descending ? " DESC" : "")"
        }
        // Ties by id, in the direction of the last key, as the server's SQL driver breaks them
        // (`sort=-amount`: equal amounts by id descending), so a local list and a remote one agree.
        order.append("records.id\(query.sort.last?.descending == true ? " DESC" : "")")
        // One pass: every match is counted (for `total`); the sorter holds rids and keys, not records.
        let page = "SELECT records.rid " + sql + " ORDER BY " + order.joined(separator: ", ")
        let last = end ?? Int.max
        do {
            let statement = try database.prepare(page)
            var rids: [Int64] = []
            var total = 0
            while try statement.step() {
                let rid = statement.integer(at: 0)
                if superseded.contains(rid) { continue }
                if total >= first && total < last { rids.append(rid) }
                total += 1
            }
            return (try records(at: rids), total)
        } catch {
            throw Self.storage(error)
        }
    }

    /// The current records that the equalities' values name (each equality a union of its values,
    /// all of them intersected), in rid order.
    private func lookedUp(_ object: String, _ equalities: [(String, [String])], levels: [MirrorIndex.Level])
        throws(OStackError) -> [Int64]
    {
        var found: Set<Int64>?
        for (field, values) in equalities {
            var named = Set<Int64>()
            for value in values {
                named.formUnion(try index.rids(object, field: field, value: value, levels: levels))
            }
            found = found.map { $0.intersection(named) } ?? named
        }
        var rids = (found ?? []).sorted()
        // A value may name a superseded row (only where a level supersedes older ones): only a
        // record's current row counts.
        if MirrorIndex.maySupersede(levels) {
            let idOf = try statement("SELECT id FROM records WHERE rid = ?", [.null])
            defer { idOf.reset() }
            var current: [Int64] = []
            for rid in rids {
                idOf.reset()
                do {
                    try idOf.bind([.integer(rid)])
                    guard try idOf.step() else { continue }
                } catch {
                    throw Self.storage(error)
                }
                let id = idOf.withColumnBytes(at: 0) { String(decoding: $0, as: UTF8.self) }
                if try index.current(object, id, in: levels)?.rid == rid { current.append(rid) }
            }
            rids = current
        }
        return rids
    }

    /// Puts `rids` (ascending) into the in-memory temporary table the query joins.
    private func fillQueryRIDs(_ rids: [Int64]) throws(OStackError) {
        try run("CREATE TEMP TABLE IF NOT EXISTS ostack_query_rids (rid INTEGER PRIMARY KEY)")
        try run("DELETE FROM temp.ostack_query_rids")
        let insert = try prepared("INSERT OR IGNORE INTO temp.ostack_query_rids (rid) VALUES (?)")
        for rid in rids {
            insert.reset()
            insert.bindInteger(rid, at: 1)
            do {
                try insert.checkBindings()
                while try insert.step() {}
            } catch {
                insert.reset()
                throw Self.storage(error)
            }
        }
        insert.reset()
    }

    /// How the current rows of an object are read without a lookup.
    enum CurrentRows {
        /// A small share of the mirror: through its keys, the rids in id order.
        case keyed([Int64])
        /// Otherwise a scan of the table in storage order, skipping the rows a newer level supersedes.
        case scan(superseded: Set<Int64>)
    }

    /// `object`'s current rows as a query or an export reads them (`isSmallShare` decides how).
    func currentRows(_ object: String, levels: [MirrorIndex.Level]) throws(OStackError) -> CurrentRows {
        guard try isSmallShare(object, levels: levels) else {
            return .scan(superseded: try index.superseded(object, levels: levels))
        }
        var rids: [Int64] = []
        try index.forEachCurrentKey(object) { _, rid throws(OStackError) in
            rids.append(rid)
            return true
        }
        return .keyed(rids)
    }

    /// Every current record's id and version (`updated_at`, nil when it has none), read on one
    /// snapshot as a query reads them (`currentRows`): in storage order, skipping superseded rows,
    /// or through the keys of a small share of the mirror. `each` must not use the database.
    func forEachCurrentVersion(
        _ object: String, _ each: (_ id: UnsafeRawBufferPointer, _ version: UnsafeRawBufferPointer?) -> Void
    ) throws(OStackError) {
        guard ObjectSchema.isIdentifier(object) else { return }
        try reading { () throws(OStackError) in
            func emit(_ statement: Statement) {
                statement.withColumnBytes(at: 0) { id in
                    if statement.isNull(at: 1) {
                        each(id, nil)
                    } else {
                        statement.withColumnBytes(at: 1) { version in each(id, version) }
                    }
                }
            }
            do {
                switch try currentRows(object, levels: try index.levels(object)) {
                case .keyed(let rids):
                    let read = try statement("SELECT id, version FROM records WHERE rid = ?", [.null])
                    defer { read.reset() }
                    for rid in rids {
                        read.reset()
                        try read.bind([.integer(rid)])
                        if try read.step() { emit(read) }
                    }
                case .scan(let superseded):
                    let read = try statement(
                        "SELECT id, version, rid FROM records NOT INDEXED WHERE object = ?", [.text(object)])
                    defer { read.reset() }
                    while try read.step() {
                        if !superseded.contains(read.integer(at: 2)) { emit(read) }
                    }
                }
            } catch let error as OStackError {
                throw error
            } catch {
                throw Self.storage(error)
            }
        }
    }

    /// Whether `object` holds fewer than an eighth of the mirror's rows (its keys counted in its
    /// levels; `max(rid)` stands for the table's size). An object alone in the mirror (the usual
    /// case) is not.
    func isSmallShare(_ object: String) throws(OStackError) -> Bool {
        try isSmallShare(object, levels: try index.levels(object))
    }

    private func isSmallShare(_ object: String, levels: [MirrorIndex.Level]) throws(OStackError) -> Bool {
        guard try index.hasOtherObjects(than: object) else { return false }
        let keys = levels.reduce(0) { $0 + $1.keys }
        return keys < (try integer("SELECT max(rid) FROM records")) / 8 + 1
    }

    /// The stored text of the records at `rids`, in that order.
    func records(at rids: [Int64]) throws -> [[UInt8]] {
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

    /// The largest page (offset and limit) read through the keys map: beyond it, one pass over the
    /// table reads the records in storage order, cheaper than looking each one up.
    static let keyedPageLimit = 10_000

    /// Every current record's `skip ..< end` in `id` order, and how many there are, from the keys
    /// map alone: its current keys in order (levels merged) up to `end`, and its counts less the rows
    /// newer levels supersede.
    private func firstByKey(_ object: String, levels: [MirrorIndex.Level], skip: Int, end: Int)
        throws(OStackError) -> (records: [[UInt8]], total: Int)
    {
        var total = 0
        for level in levels {
            let (sum, overflow) = total.addingReportingOverflow(level.keys)
            guard !overflow else { throw MirrorIndex.damaged() }  // counts no mirror could hold
            total = sum
        }
        total -= try index.superseded(object, levels: levels).count
        var rids: [Int64] = []
        if end > 0 {
            try index.forEachCurrentKey(object) { _, rid throws(OStackError) in
                rids.append(rid)
                return rids.count < end
            }
        }
        do {
            return (try records(at: Array(rids.dropFirst(skip))), Swift.max(0, total))
        } catch let error as OStackError {
            throw error
        } catch {
            throw Self.storage(error)
        }
    }

    /// The matches `skip ..< end` in `id` order (SQLite's BINARY collation: byte order), and
    /// how many match.
    private func firstByID(sql: String, skip: Int, end: Int, superseded: Set<Int64>) throws(OStackError)
        -> (records: [[UInt8]], total: Int)
    {
        do {
            let statement = try database.prepare("SELECT records.rid, records.id " + sql)
            var heap = SmallestIDs(capacity: end)
            var total = 0
            while try statement.step() {
                let rid = statement.integer(at: 0)
                if superseded.contains(rid) { continue }
                total += 1
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
