import Dispatch

/// Pulls a tracked object (docs/sync.md, "Pull"): every change since its cursor, as a keyset over
/// `(updated_at, id)` in pages; records with queued changes are left alone; deletions are found by
/// the `Reconciler` when due. Pipelined: while one page is written, the next is already being
/// fetched; several pages share one transaction. The first pull is a bulk load: the field lookup
/// index is built once, at the end.
struct Puller {
    let store: LocalStore
    let api: DataAPI
    var pageSize = 2000
    /// Reconcile deletions when the last reconciliation is older than this.
    var reconcileInterval: Double = 900
    var progress: (@Sendable (SyncProgress) -> Void)?

    /// One list page: the records to store, and the ones that cannot be stored.
    struct Page {
        var records: [(id: String, version: String?, json: [UInt8])] = []
        /// Records that are not valid JSON, nest too deep or carry a number out of range: their ids
        /// (nil when unusable), reported instead of stored (docs/sync.md, "Pull").
        var rejected: [String?] = []
        /// The keyset position of the page's last record, stored or not: the cursor moves past it.
        var last: (version: String?, id: String)?
        /// Records on the page, stored or not.
        var count = 0
        /// The server's count of the records the request matches (asked on the first page only).
        var total: Int?
    }

    /// Records written per transaction (several pages): each commit writes every index page the
    /// transaction touched, and random ids touch index pages all over `records_key`, so fewer,
    /// larger commits write far fewer pages (docs/decisions/0007-mirror-schema.md).
    var recordsPerCommit = 20_000
    /// The page cache while pulling (KiB): large enough to keep `records_key` of a million records.
    var pullCacheKiB = 40_960

    func pull(_ object: String, reconcile forceReconcile: Bool) throws(OStackError) -> PullReport {
        var report = PullReport()
        guard var state = try store.trackState(object) else { return report }
        // A first pull brings every record, so it needs no deletion reconciliation right after.
        let initial = state.cursorVersion == nil
        _ = api.directory.discovery  // routes resolved here, not on the fetching thread
        var pending = fetchPage(
            object, after: state.cursorVersion.flatMap { v in state.cursorID.map { (v, $0) } }, count: progress != nil)
        var page = try pending.wait()
        // What is left to pull, counted by the server once (for the progress display only).
        let total = page.total
        var seen = 0
        // A first pull of more than one page is a bulk load: the field lookup index is built once,
        // at the end.
        if initial && page.count >= pageSize { try store.suspendIndexes(object) }
        let cache = try store.cacheSizeSetting()
        try store.setCacheSize(-pullCacheKiB)
        defer { try? store.setCacheSize(cache) }
        // A page bigger than asked (a server ignoring `top`) would make memory grow with the server's
        // data: refused, like a page that does not move the cursor.
        if page.count > pageSize { throw malformed("list page bigger than asked") }
        var more = page.count > 0
        // Loop guard: every page must move the cursor to a place it has not been (a server that
        // repeats a page, or cycles, would otherwise be asked forever).
        var visited = Set<String>()
        if let version = state.cursorVersion, let id = state.cursorID {
            visited.insert(version + "\u{0}" + id)
            if let first = page.last, first.version == version, first.id == id {
                throw malformed("list page repeated: the cursor did not advance")
            }
        }
        while more {
            // One transaction for several pages; the next page is fetched while this one is written.
            try store.transaction { () throws(OStackError) in
                var written = 0
                while more && written < recordsPerCommit {
                    guard let last = page.last else { throw malformed("list page without ids") }
                    more = page.count >= pageSize && last.version != nil
                    if more { pending = fetchPage(object, after: (last.version!, last.id)) }
                    let applied = try store.applyPulled(object, page.records)
                    report.pulled += applied
                    report.rejected.append(contentsOf: page.rejected)
                    // An older copy of a rejected record is stale now: kept, but flagged.
                    for id in page.rejected.compactMap({ $0 }) { try store.markInvalid(object, id) }
                    written += page.count
                    if let version = last.version {
                        try store.advanceCursor(object, version: version, id: last.id)
                        state.cursorVersion = version
                        state.cursorID = last.id
                        visited.insert(version + "\u{0}" + last.id)
                    }
                    seen += page.count
                    progress?(.pulling(object: object, done: seen, total: total.map { Swift.max($0, seen) }))
                    if more {
                        page = try pending.wait()
                        if page.count > pageSize { throw malformed("list page bigger than asked") }
                        more = page.count > 0
                        if more, let next = page.last, visited.contains((next.version ?? "") + "\u{0}" + next.id) {
                            throw malformed("list page repeated: the cursor did not advance")
                        }
                    }
                }
            }
        }
        try store.restoreIndexes(object)
        let due = forceReconcile || state.lastReconcileAt.map { store.now - $0 >= reconcileInterval } ?? true
        if due && !(initial && !forceReconcile) {
            report.deleted = try Reconciler(store: store, api: api).reconcile(object)
        }
        try store.markPulled(object, reconciled: due)
        return report
    }

    /// Starts fetching one keyset page on a background thread.
    /// `count`: ask for the server's `total` (a COUNT query on its side; only the first page of a
    /// pull someone watches asks).
    func fetchPage(_ object: String, after cursor: (version: String, id: String)?, count: Bool = false) -> PageFetch {
        let fetch = PageFetch()
        let api = self.api
        var query: [(String, String)] = [("sort", "updated_at,id"), ("top", String(pageSize))]
        if !count { query.append(("count", "false")) }
        if let cursor {
            let filter: JSONValue = [
                "or", ["updated_at", ">", .string(cursor.version)],
                ["and", ["updated_at", "=", .string(cursor.version)], ["id", ">", .string(cursor.id)]],
            ]
            query.append(("filter", String(decoding: filter.serialized(), as: UTF8.self)))
        }
        let request = query
        DispatchQueue.global().async {
            fetch.finish(
                Result { () throws(OStackError) -> Page in
                    let outcome = try api.exchange(.list(object: object), query: request)
                    guard outcome.ok else {
                        throw outcome.error.asOStackError(
                            account: api.account.alias, host: api.account.server.authority)
                    }
                    guard let page = Self.parsePage(outcome.response.body) else {
                        throw OStackError(
                            .unexpectedResponse, context: .init(host: api.account.server.authority),
                            detail: "list page malformed")
                    }
                    return page
                })
        }
        return fetch
    }

    /// A list page's records as (id, version, raw JSON), found without decoding the page; each
    /// record's syntax is checked strictly (`JSONSyntax`) before it may be stored.
    static func parsePage(_ body: [UInt8]) -> Page? {
        let scanner = FieldScanner(fields: ["id", "updated_at"])
        return body.withUnsafeBytes { raw -> Page? in
            guard let found = FieldScanner.recordRanges(in: raw) else { return nil }
            var page = Page()
            page.total = found.total
            page.records.reserveCapacity(found.ranges.count)
            page.count = found.ranges.count
            for range in found.ranges {
                let slice = UnsafeRawBufferPointer(rebasing: raw[range])
                let values = scanner.scan(slice)
                guard case .string(let id) = values[0], PushClassifier.recordID(.object(["id": .string(id)])) != nil
                else {
                    page.rejected.append(nil)
                    continue
                }
                let version: String? = if case .string(let v) = values[1] { v } else { nil }
                page.last = (version, id)
                if JSONSyntax.isValidObject(slice) {
                    page.records.append((id, version, Array(slice)))
                } else {
                    page.rejected.append(id)
                }
            }
            return page
        }
    }

    func malformed(_ detail: String) -> OStackError {
        OStackError(.unexpectedResponse, context: .init(host: api.account.server.authority), detail: detail)
    }
}

public struct PullReport: Sendable {
    public var pulled = 0
    public var deleted = 0
    /// Records the server sent that could not be stored (their ids; nil when unusable).
    public var rejected: [String?] = []
}

/// One page being fetched in the background; `wait` blocks until it arrives.
final class PageFetch: @unchecked Sendable {
    // @unchecked: `result` is written once before `done` is signalled and read only after waiting.
    private var result: Result<Puller.Page, OStackError>?
    private let done = DispatchSemaphore(value: 0)

    func finish(_ result: Result<Puller.Page, OStackError>) {
        self.result = result
        done.signal()
    }

    func wait() throws(OStackError) -> Puller.Page {
        done.wait()
        return try result!.get()
    }
}
