/// Where a read is answered.
public enum RecordSource: String, Sendable { case local, remote }

/// `records list` / `records get`: the tracked mirror (local) or the server (remote), with one
/// filter semantics for both (docs/filters.md).
public struct RecordReads {
    let session: AccountSession
    var store: LocalStore { session.store }

    public struct ListRequest: Sendable {
        public var object: String
        public var filter: FilterCondition?
        /// What to send the server as `filter` (the wire form the user gave, or the compiled AST).
        public var wireFilter: JSONValue?
        public var sort: [SortKey] = []
        public var limit: Int?
        public var offset = 0
        public var fields: [String]?
        public var source: RecordSource?

        public init(object: String) { self.object = object }
    }

    public struct ListResult: Sendable {
        public var source: RecordSource
        public var records: [JSONValue]
        public var total: Int?
        /// For local reads: when the mirror was last pulled (nil: never), and whether it is tracked.
        public var lastPullAt: Double?
        public var tracked: Bool
    }

    public func list(_ request: ListRequest) throws(OStackError) -> ListResult {
        let (source, tracked, fieldTypes) = try prepare(request)
        if source == .local {
            let result = try store.query(
                .init(
                    object: request.object, filter: request.filter, sort: request.sort, limit: request.limit,
                    offset: request.offset, fieldTypes: fieldTypes))
            let records = result.records.compactMap { JSONValue.parse($0) }.map { Self.select($0, request.fields) }
            return ListResult(
                source: .local, records: records, total: result.total,
                lastPullAt: try store.trackState(request.object)?.lastPullAt, tracked: tracked)
        }
        var records: [JSONValue] = []
        let total = try listRemote(request) { (record) throws(OStackError) in records.append(record) }
        return ListResult(source: .remote, records: records, total: total, lastPullAt: nil, tracked: tracked)
    }

    /// Where `list` answers `request`: its `source`, else the mirror when the object is tracked.
    public func source(for request: ListRequest) throws(OStackError) -> RecordSource {
        try prepare(request).source
    }

    /// Checks the request against metadata (when cached) and decides the source.
    func prepare(_ request: ListRequest) throws(OStackError) -> (
        source: RecordSource, tracked: Bool, fieldTypes: [String: String]
    ) {
        guard ObjectSchema.isIdentifier(request.object) else {
            throw OStackError(.unknownObject, detail: "bad object name")
        }
        var fieldTypes: [String: String] = [:]
        if let schema = try session.schemaIfAvailable(request.object) {
            let checker = QueryChecker(schema: schema)
            fieldTypes = checker.fieldTypes
            if let filter = request.filter { try checker.check(filter) }
            for key in request.sort { try checker.requireKnown(key.field, option: "--sort") }
            for field in request.fields ?? [] { try checker.requireKnown(field, option: "--fields") }
        }
        let tracked = try store.isTracked(request.object)
        return (request.source ?? (tracked ? .local : .remote), tracked, fieldTypes)
    }

    /// The server's records in pages of at most `pageSize` (`top`/`skip` after the request's
    /// offset), handed to `each` one record at a time, so memory stays flat however many there are
    /// and however big a page is (docs/sync.md, "Remote lists"): a page is split into records
    /// without decoding it as a whole, and each record is decoded only when it is handed over.
    /// Stops at the request's `limit`, at a short page, or at the `total` the server gave; a page
    /// bigger than asked, one the server sent before, more than `bound` records without a `total`,
    /// or more than a hundredth as many pages is `unexpected-response`.
    /// Returns the server's `total`, when it gave one.
    /// Records a remote list walks at most without a `total`; pages, a hundredth as many, whatever
    /// `total` the server gives.
    public static let remoteListBound = 10_000_000

    public func listRemote(
        _ request: ListRequest, pageSize: Int = 1000, bound: Int = Self.remoteListBound,
        each: (JSONValue) throws(OStackError) -> Void
    ) throws(OStackError) -> Int? {
        var base: [(String, String)] = []
        if let wire = request.wireFilter {
            base.append(("filter", String(decoding: wire.serialized(), as: UTF8.self)))
        }
        // The mirror's order: the sort asked for, then the id (alone without a sort), so a tracked
        // object lists the same rows in the same order either way, and pages over top/skip are
        // stable (a server's order without ORDER BY is not).
        let sort =
            request.sort.contains { $0.field == "id" }
            ? request.sort : request.sort + [SortKey(field: "id", descending: false)]
        base.append(("sort", sort.map(\.wire).joined(separator: ",")))
        if let fields = request.fields {
            base.append(("select", (["id"] + fields.filter { $0 != "id" }).joined(separator: ",")))
        }
        let host = session.account.server.authority
        func malformed(_ detail: String) -> OStackError {
            OStackError(.unexpectedResponse, context: .init(host: host), detail: detail)
        }
        var fetched = 0
        var total: Int?
        var seen = SeenPages()
        var pages = 0
        while true {
            let want = request.limit.map { Swift.min(pageSize, $0 - fetched) } ?? pageSize
            // `--limit 0` still asks once, for the count alone: with `top=1`, whose row is not
            // shown. ObjectStack counts only for a page size above zero: `top=0` answers `total: 0`.
            let countOnly = request.limit == 0 && fetched == 0 && total == nil
            if want <= 0 && !countOnly { break }
            let skip = request.offset + fetched
            var query = base + [("top", String(countOnly ? 1 : want))]
            if skip > 0 { query.append(("skip", String(skip))) }
            let outcome = try session.api.exchange(.list(object: request.object), query: query)
            guard outcome.ok else {
                throw labelled(
                    outcome.error.asOStackError(account: session.account.alias, host: host), object: request.object)
            }
            let body = outcome.response.body
            guard let found = body.withUnsafeBytes({ FieldScanner.recordRanges(in: $0) }) else {
                throw malformed("list: no records")
            }
            if found.ranges.count > (countOnly ? 1 : want) { throw malformed("list: page bigger than asked") }
            if countOnly { return found.total }
            let scanner = FieldScanner(fields: ["id"])
            let ids: [String] = body.withUnsafeBytes { raw in
                found.ranges.map { range in
                    if case .string(let id) = scanner.scan(UnsafeRawBufferPointer(rebasing: raw[range]))[0] {
                        return id
                    }
                    return ""
                }
            }
            // A page sent before (the last one, or any earlier: a server alternating two pages).
            if !ids.isEmpty, !seen.insert(ids) { throw malformed("list: page repeated") }
            // A walk that never ends is cut off: without a `total` at `bound` records, and whatever
            // `total` the server gave at a hundredth as many pages (one it never reaches, a record
            // a page, would otherwise be followed for ever).
            pages += 1
            if (total == nil && found.total == nil && fetched > bound) || pages > bound / 100 {
                throw malformed("list: pages do not end")
            }
            total = total ?? found.total
            for range in found.ranges {
                guard
                    let record = body.withUnsafeBytes({ JSONValue.parse(UnsafeRawBufferPointer(rebasing: $0[range])) })
                else {
                    throw malformed("list: record malformed")
                }
                try each(Self.select(record, request.fields))
            }
            fetched += found.ranges.count
            if want == 0 || found.ranges.isEmpty { break }
            // A short page ends the list unless the server says there is more (some cap pages
            // below what was asked); `hasMore: false` and `total` end it too. (Without `hasMore`,
            // which ObjectStack always sends, a `total` not reached yet keeps it going.)
            if let total, request.offset + fetched >= total { break }
            if found.hasMore == false { break }
            if found.ranges.count < want && found.hasMore != true && total == nil { break }
        }
        return total
    }

    /// One record, and whether it has changes not yet on the server.
    public func get(_ object: String, id: String, source requested: RecordSource?) throws(OStackError) -> (
        record: JSONValue, source: RecordSource, pending: Bool
    ) {
        guard ObjectSchema.isIdentifier(object) else { throw OStackError(.unknownObject, detail: "bad object name") }
        let id = try store.currentID(object, id)
        let tracked = try store.isTracked(object)
        let local = try store.record(object, id)
        let pending = try store.hasQueuedChange(object, recordID: id)
        // A tracked object's record that the mirror does not hold (made on the server since the last
        // pull, or the object not pulled yet) is asked of the server unless `--local` was given: a
        // local miss alone said "No task record X." of a record the server had. One with a change
        // queued (a deletion here) stays local.
        let source = requested ?? (pending || (tracked && local != nil) ? .local : .remote)
        if source == .local {
            guard let local else {
                var context = OStackError.Context(object: object)
                context.recordIDs = [id]
                throw OStackError(.notFound, context: context, detail: "no local record")
            }
            return (local.data, .local, pending)
        }
        let json: JSONValue
        do {
            json = try call(.getRecord(object: object, id: id), object: object)
        } catch  where error.code == .notFound {
            var named = error
            named.context.recordIDs = [id]
            throw named
        }
        guard let record = json["record"] else {
            throw OStackError(
                .unexpectedResponse, context: .init(host: session.account.server.authority), detail: "get: no record")
        }
        if tracked && !pending { try store.storeFetched(object, id: id, record) }
        return (record, .remote, pending)
    }

    /// The server's copy of a record (the base of an edit made without a local copy).
    func fetchRemote(_ object: String, _ id: String) throws(OStackError) -> LocalStore.StoredRecord? {
        do {
            let json = try session.api.call(.getRecord(object: object, id: id))
            guard let record = json["record"] else { return nil }
            return LocalStore.StoredRecord(
                object: object, id: id, data: record, version: record["updated_at"]?.stringValue)
        } catch let error where error.code == .notFound {
            var error = error
            error.context.object = object
            throw error
        }
    }

    /// After a discard or `--keep theirs`, the mirror's copy may be older than the server's (pulls
    /// skipped it while a change was queued, and their cursor has moved past it): fetch it again.
    /// When that fails (offline) the record is remembered and the next pull fetches it first
    /// (`refetchRemembered`); nothing else would, until it changes on the server again.
    func refreshMirror(_ object: String, id: String) {
        if !refresh(object, id: id) { remember(object, id: id) }
    }

    /// The records of `object` whose refresh failed, fetched again (those that still fail stay
    /// remembered). Called by the pull before it pages.
    func refetchRemembered(_ object: String) {
        let key = Self.refetchKey(object)
        guard let text = try? store.value(key), let ids = JSONValue.parse(Array(text.utf8))?.arrayValue else { return }
        let left = ids.compactMap(\.stringValue).filter { !refresh(object, id: $0) }
        try? store.transaction { () throws(OStackError) in
            if left.isEmpty {
                try store.removeValue(key)
            } else {
                try store.setValue(
                    key, String(decoding: JSONValue.array(left.map { .string($0) }).serialized(), as: UTF8.self))
            }
        }
    }

    static func refetchKey(_ object: String) -> String { "sync.refetch." + object }

    /// Fetches the record into the mirror; true when done (or nothing to do: untracked, or a change
    /// of it is queued, whose push settles the copy), false when the server could not be asked.
    private func refresh(_ object: String, id: String) -> Bool {
        guard (try? store.isTracked(object)) == true, (try? store.hasQueuedChange(object, recordID: id)) == false
        else { return true }
        do {
            let json = try session.api.call(.getRecord(object: object, id: id))
            if let record = json["record"] { try store.storeFetched(object, id: id, record) }
            return true
        } catch  where error.code == .notFound {
            try? store.storeFetched(object, id: id, nil)
            return true
        } catch {
            return false
        }
    }

    private func remember(_ object: String, id: String) {
        let key = Self.refetchKey(object)
        try? store.transaction { () throws(OStackError) in
            var ids = (try store.value(key)).flatMap { JSONValue.parse(Array($0.utf8))?.arrayValue } ?? []
            if !ids.contains(.string(id)) { ids.append(.string(id)) }
            try store.setValue(key, String(decoding: JSONValue.array(ids).serialized(), as: UTF8.self))
        }
    }

    /// A read on behalf of `object`: field names from the server are shown only as the labels of
    /// fields our metadata knows.
    func call(_ endpoint: Endpoint, query: [(String, String)] = [], object: String) throws(OStackError) -> JSONValue {
        do {
            return try session.api.call(endpoint, query: query)
        } catch {
            throw labelled(error, object: object)
        }
    }

    /// An error of a call about `object`: names the object, and the fields by their labels.
    func labelled(_ error: OStackError, object: String) -> OStackError {
        var error = error
        error.context.object = object
        if !error.context.fields.isEmpty {
            let schema = try? session.metadata.object(object).schema
            error.context.fields = error.context.fields.compactMap { name in schema?.field(name)?.label }
        }
        return error
    }

    public static func select(_ record: JSONValue, _ fields: [String]?) -> JSONValue {
        guard let fields, case .object(let members) = record else { return record }
        return .object(members.filter { $0.key == "id" || fields.contains($0.key) })
    }
}

extension RecordReads {
    /// Every mirrored record of `object` matching `filter` (`records export`), handed over one at a
    /// time as its stored JSON text (validated when it was stored), in storage order or, for an
    /// object that is a small share of the mirror, in id order, read in batches of `batch` so memory
    /// stays flat however many there are. The bytes are valid during `each` only; `each` returns
    /// whether it took the record (for the count). `each` runs while the batch's SELECT is open: it
    /// must not use the account database (a write to `records` could show up later in the scan).
    @discardableResult
    public func eachLocalJSON(
        _ object: String, filter: FilterCondition?, batch: Int = 2000,
        each: (UnsafeRawBufferPointer) throws(OStackError) -> Bool
    ) throws(OStackError) -> Int {
        guard ObjectSchema.isIdentifier(object) else { throw OStackError(.unknownObject, detail: "bad object name") }
        let types = try session.schemaIfAvailable(object).map { QueryChecker(schema: $0).fieldTypes } ?? [:]
        let matcher = filter.map { LocalFilter($0, fieldTypes: types) }
        // Every page is read once, in order: a large cache would only be memory to fault in.
        let restoreCache = try store.useCacheSize(kib: 2048)
        defer { restoreCache() }
        // One snapshot for the whole export: the levels, the superseded rows and every batch read
        // from the same commit, whatever another process pulls or merges meanwhile.
        return try store.reading { () throws(OStackError) -> Int in
            try Self.eachLocalJSON(store, object, matcher: matcher, batch: batch, each: each)
        }
    }

    private static func eachLocalJSON(
        _ store: LocalStore, _ object: String, matcher: LocalFilter?, batch: Int,
        each: (UnsafeRawBufferPointer) throws(OStackError) -> Bool
    ) throws(OStackError) -> Int {
        // A large share of the mirror is read as ranges of the table itself (NOT INDEXED), in storage
        // order, skipping the rows a newer level supersedes; a small one through its keys, in id
        // order (a table scan would read every other object's pages too).
        var keyed: [Int64]?
        var superseded = Set<Int64>()
        switch try store.currentRows(object, levels: try store.index.levels(object)) {
        case .keyed(let rids): keyed = rids
        case .scan(let skipped): superseded = skipped
        }
        // The rows are stepped through (and their pages decrypted) on a thread of their own while
        // `each` runs here: the store is not used from here until `finish` has joined that thread.
        let ahead = ReadAhead()
        ahead.start { [store, keyed, superseded] (emit) throws(OStackError) in
            try Self.readRows(
                store, object, keyed: keyed, superseded: superseded, matcher: matcher, batch: batch, emit: emit)
        }
        defer { ahead.finish() }
        var count = 0
        while let chunk = try ahead.next() {
            try chunk.forEach { (bytes) throws(OStackError) in
                if try each(bytes) { count += 1 }
            }
            ahead.recycle(chunk)
        }
        return count
    }

    /// Every row of `object` that `matcher` takes, emitted in batches of `batch` rows until `emit`
    /// says stop (`eachLocalJSON`): the rows at `keyed` (in that order), or every row in storage order
    /// but the `superseded` ones.
    private static func readRows(
        _ store: LocalStore, _ object: String, keyed: [Int64]?, superseded: Set<Int64>, matcher: LocalFilter?,
        batch: Int, emit: (UnsafeRawBufferPointer) -> Bool
    ) throws(OStackError) {
        func take(_ bytes: UnsafeRawBufferPointer) -> Bool {
            if let matcher, !matcher.matches(bytes) { return true }
            return emit(bytes)
        }
        if let keyed {
            let statement = try store.statement("SELECT data FROM records WHERE rid = ?", [.null])
            defer { statement.reset() }
            for rid in keyed {
                statement.reset()
                do {
                    try statement.bind([.integer(rid)])
                    guard try statement.step() else { continue }
                } catch {
                    throw LocalStore.storage(error)
                }
                if !statement.withColumnBytes(at: 0, take) { return }
            }
            return
        }
        var last: Int64 = -1
        while true {
            let statement = try store.statement(
                "SELECT rid, data FROM records NOT INDEXED WHERE rid > ? AND object = ? ORDER BY rid LIMIT ?",
                [.integer(last), .text(object), .integer(Int64(batch))])
            defer { statement.reset() }
            var rows = 0
            do {
                while try statement.step() {
                    rows += 1
                    last = statement.integer(at: 0)
                    if superseded.contains(last) { continue }
                    if !statement.withColumnBytes(at: 1, take) { return }
                }
            } catch {
                throw LocalStore.storage(error)
            }
            if rows < batch { return }
        }
    }
}
