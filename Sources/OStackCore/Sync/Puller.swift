import Dispatch
import Synchronization

/// Pulls a tracked object (docs/sync.md, "Pull"): every change since its cursor, as a keyset over
/// `(updated_at, id)` in pages; records with queued changes are left alone; deletions are found by
/// the `Reconciler` when due. Pipelined: while one page is written, the next is already being
/// fetched; several pages share one transaction, and each transaction's records become one level of
/// the mirror's maps (`MirrorBulkWriter`, docs/decisions/0013-mirror-runs.md).
struct Puller {
    let store: LocalStore
    let api: DataAPI
    var pageSize = 2000
    /// Pages fetched ahead of the one being written (each about 1 MB at 2 000 records of ~450 bytes).
    var pagesAhead = 12
    /// Reconcile deletions when the last reconciliation is older than this.
    var reconcileInterval: Double = 900
    var progress: (@Sendable (SyncProgress) -> Void)?

    /// One list page: the records to store, and the ones that cannot be stored.
    struct Page {
        var records: [(id: String, version: String?, json: [UInt8])] = []
        /// Each record's indexed field values (`LocalStore.indexedFields`, sorted), found where they
        /// stand in its bytes by the checking thread, so the writer only binds them.
        var fields: [[FieldScanner.RawValue]] = []
        /// Records that are not valid JSON, nest too deep or carry a number out of range: their ids
        /// (nil when unusable), reported instead of stored (docs/sync.md, "Pull").
        var rejected: [String?] = []
        /// The version (`updated_at`) of each of `rejected`, nil when unknown.
        var rejectedVersions: [String?] = []
        /// The keyset position of the page's last record, stored or not: the cursor moves past it.
        var last: (version: String?, id: String)?
        /// Records on the page, stored or not.
        var count = 0
        /// The server's count of the records the request matches (asked on the first page only).
        var total: Int?
        /// `RawPage.repeated`.
        var repeated = false

        /// Keeps the records `keep` says yes to (and their indexed values).
        mutating func retain(_ keep: ((id: String, version: String?, json: [UInt8])) -> Bool) {
            let kept = records.indices.filter { keep(records[$0]) }
            guard kept.count < records.count else { return }
            records = kept.map { records[$0] }
            if !fields.isEmpty { fields = kept.map { fields[$0] } }
        }
    }

    /// Records written per transaction (several pages): each becomes one level of the maps. A first
    /// load writes larger levels (fewer of them: they are merged only when too many).
    var recordsPerCommit = PullTuning.recordsPerCommit
    var firstLoadRecordsPerCommit = PullTuning.firstLoadRecordsPerCommit
    /// A transaction also ends once it has been open this long (and holds at least one page): other
    /// processes' writes wait for the pull's write lock no longer than about this, and a pull that
    /// fails part-way keeps what it had committed.
    var commitSeconds = PullTuning.commitSeconds
    /// The page cache while pulling (KiB).
    var pullCacheKiB = PullTuning.cacheKiB

    func pull(_ object: String, reconcile forceReconcile: Bool) throws(OStackError) -> PullReport {
        var report = PullReport()
        guard var state = try store.trackState(object) else { return report }
        // A first pull brings every record, so it needs no deletion reconciliation right after.
        let initial = state.cursorVersion == nil
        _ = api.directory.discovery  // routes resolved here, not on the fetching thread
        let stream = PageStream(depth: pagesAhead, indexed: try store.indexedFields(object).sorted())
        defer { stream.cancel() }
        // The cursor a pull starts from, and the look-back before it: a real server's stamps can
        // repeat within a millisecond and land before the cursor when a transaction commits late, so
        // the pull asks for everything from `lookback` before the cursor and skips what the mirror
        // already holds in that version (docs/sync.md, "Pull"). Without an ISO 8601 cursor, the plain
        // keyset after it.
        let startCursor = state.cursorVersion.flatMap { v in state.cursorID.map { (version: v, id: $0) } }
        var stored = startCursor
        let windowStart = startCursor.flatMap {
            Self.lookbackStart(from: $0.version, milliseconds: lookbackMilliseconds)
        }
        stream.start(after: windowStart == nil ? stored : nil, pageSize: pageSize) {
            [self] (request, first) throws(OStackError) -> RawPage in
            switch request {
            case nil:
                if let windowStart { return try fetchPage(object, from: windowStart, count: progress != nil) }
                return try fetchPage(object, count: progress != nil)
            case .after(let version, let id)?:
                return try fetchPage(object, after: (version, id), count: first && progress != nil)
            case .stamp(let version, let skip)?:
                return try fetchPage(object, from: version, skip: skip)
            }
        }
        var page = try stream.next()
        // What is left to pull, counted by the server once (for the progress display only).
        let total = page.total
        var seen = 0
        // A first pull into an object the mirror does not hold supersedes nothing: its levels are
        // merged by size alone (docs/decisions/0013-mirror-runs.md).
        let load = initial ? try store.firstLoad(object) : nil
        // The pull writes only what the server can send again: its commits skip the WAL's fsync
        // (synchronous=NORMAL; after a power loss its last transactions may be pulled again, the
        // file stays consistent; a crash of ostack loses nothing, the WAL is the kernel's then).
        let restoreSync = try store.useSynchronous("NORMAL")
        defer { restoreSync() }
        let restoreCache = try store.useCacheSize(kib: pullCacheKiB)
        defer { restoreCache() }
        // A page bigger than asked (a server ignoring `top`) would make memory grow with the server's
        // data: refused, like a page that does not move the cursor.
        if page.count > pageSize { throw malformed("list page bigger than asked") }
        var more = page.count > 0
        // Loop guard: every full page must move the cursor to a place it has not been (a server that
        // repeats a page, or cycles, would otherwise be asked forever); the fetcher marks the page
        // that does not (`PageStream.start`). A page that is not full ends the pull anyway: one that
        // brings the cursor's own record again (a server keeping finer stamps than it shows) is no
        // loop.
        if page.repeated { throw malformed("list page repeated: the cursor did not advance") }
        // (With the look-back the first page starts before the cursor and may end on it.)
        if windowStart == nil, let version = state.cursorVersion, let first = page.last?.version,
            Self.isEarlier(first, than: version)
        {
            throw malformed("list page went back in time: the cursor did not advance")
        }
        // Records up to this version that the mirror holds in the same version are not new: the
        // look-back's and the cursor's own, and those this client's pushes delivered (the server's
        // answer put them there; they were counted as pulled: `sync` said "pushed 1, pulled 1").
        // (Not in a first pull: it brings everything, and a look-up of every page would slow it.)
        let echo = try store.echo(object)
        let unchangedUpTo = [startCursor?.version, initial ? nil : echo].compactMap { $0 }.max {
            Self.isEarlier($0, than: $1)
        }
        // The ids of the records written so far in this pull that carry the newest stamp written: a
        // server that keeps finer stamps than it shows brings them again on the next page.
        var newest: (version: String, ids: Set<String>)?
        // Records refused before, by id and version: the look-back fetches them again on every pull
        // while they are among the newest, and each refusal is reported once (it was on every quiet
        // `sync`, exit 11, until something newer came). A new version is reported again; one stored
        // is forgotten (docs/sync.md, "Pull").
        var refused = Self.refusedRecords(try store.value(Self.refusedKey(object)))
        let refusedBefore = refused
        // A full page whose last record has no `updated_at` cannot move the cursor: what it holds is
        // stored, and the pull stops with an error instead of ending as if it were complete.
        var stalled = false
        while more {
            // One transaction for several pages; the next page is fetched while this one is written.
            try store.transaction { () throws(OStackError) in
                let bulk = try store.bulkWriter(for: object, load: load)
                var written = 0
                var rejected = Set<String>()
                let opened = ContinuousClock.now
                while more && written < (load == nil ? recordsPerCommit : firstLoadRecordsPerCommit)
                    && (written == 0 || ContinuousClock.now - opened < .seconds(commitSeconds))
                {
                    guard let last = page.last else { throw malformed("list page without ids") }
                    stalled = page.count >= pageSize && last.version == nil
                    more = page.count >= pageSize && !stalled
                    if let boundary = unchangedUpTo { try dropUnchanged(object, &page, upTo: boundary) }
                    if let newest { page.retain { !($0.version == newest.version && newest.ids.contains($0.id)) } }
                    let applied = try store.applyPulled(
                        object, page.records, fields: page.fields.isEmpty ? nil : (stream.indexed, page.fields),
                        into: bulk)
                    report.pulled += applied
                    Self.noteRefusals(page, refused: &refused, rejected: &rejected, into: &report)
                    written += page.count
                    if let version = last.version {
                        // The stored cursor only moves forward (a page of the look-back ends before it).
                        if stored.map({ !Self.isAtOrBefore((version, last.id), $0) }) ?? true {
                            try store.advanceCursor(object, version: version, id: last.id)
                            stored = (version, last.id)
                        }
                        state.cursorVersion = version
                        state.cursorID = last.id
                        if newest?.version != version { newest = (version, []) }
                        // Bounded: a stamp shared by more records (one huge transaction) is paged by
                        // offset, where no record comes twice; past the bound a repeat is only
                        // written and counted again, and memory stays flat.
                        for record in page.records where record.version == version && newest!.ids.count < 100_000 {
                            newest?.ids.insert(record.id)
                        }
                    }
                    seen += page.count
                    progress?(.pulling(object: object, done: seen, total: total.map { Swift.max($0, seen) }))
                    if more {
                        page = try stream.next()
                        if page.count > pageSize { throw malformed("list page bigger than asked") }
                        more = page.count > 0
                        if page.repeated { throw malformed("list page repeated: the cursor did not advance") }
                        if more, let next = page.last?.version, let current = state.cursorVersion,
                            Self.isEarlier(next, than: current)
                        {
                            throw malformed("list page went back in time: the cursor did not advance")
                        }
                    }
                }
                try bulk.finish()
                // An older copy of a rejected record is stale now: kept, but flagged — the copy that
                // is current once this transaction's records are in place (one an earlier page of it
                // brought, or one committed before).
                for id in rejected { try store.markInvalid(object, id) }
                if refused != refusedBefore { try Self.storeRefused(refused, object, store) }
            }
        }
        if stalled { throw malformed("list page ends with a record without updated_at") }
        // Offsets into a stamp shift when one of its records changes during the pull: a record can be
        // skipped there (never by the keyset), and reconciling finds it now.
        let mustReconcile = forceReconcile || stream.pagedByOffset
        let due = mustReconcile || state.lastReconcileAt.map { store.now - $0 >= reconcileInterval } ?? true
        if due && !(initial && !mustReconcile) {
            let found = try Reconciler(store: store, api: api).reconcile(object, refused: refused)
            report.deleted = found.deleted
            try refetch(object, found.stale, indexed: stream.indexed, refused: &refused, into: &report)
            if refused != refusedBefore { try Self.storeRefused(refused, object, store) }
        }
        if let echo, let cursor = state.cursorVersion, !Self.isEarlier(cursor, than: echo) {
            // Passed: the pulls after need no look. Only the note this pull read: a push beside it
            // may have saved a newer one.
            try store.removeValue(LocalStore.echoKey(object), ifItIs: echo)
        }
        try store.markPulled(object, reconciled: due)
        return report
    }

    /// Fetches records again by id (`id in […]` lists within the address budget), as the
    /// reconciliation names them: a change or a create the server stamped so long before it committed
    /// that the look-back had passed it (docs/sync.md, "Pull"). Stored like pulled records, in
    /// transactions cut as a pull's are; records not asked for are ignored.
    func refetch(
        _ object: String, _ ids: [String], indexed: [String], refused: inout [String: String],
        into report: inout PullReport
    ) throws(OStackError) {
        // An id whose lookup alone is longer than an address may be (255 characters, each with
        // combining marks, can take tens of KiB) cannot be asked for: it is left to the pages of later
        // pulls. Asked for, it failed every sync of the object with `request-too-long`.
        let askable = ids.filter { CreateVerifier.addressCost(.string($0)) <= CreateVerifier.filterBudget }
        let groups = CreateVerifier.lookupGroups(askable, cap: pageSize) { $0 }
        var next = groups.startIndex
        while next < groups.endIndex {
            try store.transaction { () throws(OStackError) in
                let bulk = try store.bulkWriter(for: object, load: nil)
                var written = 0
                var rejected = Set<String>()
                let opened = ContinuousClock.now
                let first = next
                // Cut like a pull's transaction: other processes wait for its write lock no longer.
                while next < groups.endIndex && written < recordsPerCommit
                    && (next == first || ContinuousClock.now - opened < .seconds(commitSeconds))
                {
                    let group = groups[next]
                    next += 1
                    // By bytes (`ExactID`): a record whose id only normalises to one asked for is another record.
                    let asked = Set(group.map(ExactID.init))
                    let filter: JSONValue = ["id", "in", .array(group.map { .string($0) })]
                    let query = [
                        ("filter", String(decoding: filter.serialized(), as: UTF8.self)), ("top", String(group.count)),
                        ("count", "false"),
                    ]
                    let outcome = try api.exchange(.list(object: object), query: query)
                    guard outcome.ok else {
                        throw outcome.error.asOStackError(account: api.account.alias, host: api.account.server.authority)
                    }
                    guard let raw = Self.split(outcome.response.body) else { throw malformed("list page malformed") }
                    if raw.ranges.count > group.count { throw malformed("list page bigger than asked") }
                    var page = Self.parse(raw, indexed: indexed)
                    // Only what was asked, and not what the mirror holds in that version already (a
                    // server whose list named another version than its record has).
                    let held = try store.mirrorVersions(object, Set(page.records.map(\.id)))
                    let keep = page.records.indices.filter { index in
                        let record = page.records[index]
                        return asked.contains(ExactID(record.id))
                            && (record.version == nil || held[record.id] != .some(record.version))
                    }
                    if keep.count < page.records.count {
                        page.records = keep.map { page.records[$0] }
                        if !page.fields.isEmpty { page.fields = keep.map { page.fields[$0] } }
                    }
                    // A record that cannot be stored counts only if it was asked for (it flags the
                    // mirror's copy stale).
                    let refusedAsked = page.rejected.indices.filter {
                        page.rejected[$0].map { asked.contains(ExactID($0)) } ?? false
                    }
                    page.rejectedVersions = refusedAsked.map { page.rejectedVersions[$0] }
                    page.rejected = refusedAsked.map { page.rejected[$0] }
                    report.pulled += try store.applyPulled(
                        object, page.records, fields: page.fields.isEmpty ? nil : (indexed, page.fields), into: bulk)
                    Self.noteRefusals(page, refused: &refused, rejected: &rejected, into: &report)
                    written += page.records.count
                }
                try bulk.finish()
                for id in rejected { try store.markInvalid(object, id) }
            }
        }
    }

    /// Reports a page's records that cannot be stored, each once per version (`refused`), and
    /// forgets the refusal of those it stores; `rejected` collects the ids whose older copy is stale
    /// once the transaction's records are in place.
    static func noteRefusals(
        _ page: Page, refused: inout [String: String], rejected: inout Set<String>, into report: inout PullReport
    ) {
        for (id, version) in zip(page.rejected, page.rejectedVersions) {
            if let id {
                if refused[id] == (version ?? "") { continue }  // reported by an earlier pull
                refused[id] = version ?? ""
            }
            report.rejected.append(id)
        }
        for record in page.records where refused[record.id] != nil { refused[record.id] = nil }
        // A record refused here but stored again by a later page of this transaction is not stale:
        // only the refusals no later page took back are flagged.
        rejected.subtract(page.records.map(\.id))
        rejected.formUnion(page.rejected.compactMap { $0 })
    }

    /// The `account_info` key of an object's refused records: a JSON object of id → version.
    static func refusedKey(_ object: String) -> String { "sync.refused." + object }

    /// At most this many refused records are remembered per object (the oldest beyond are forgotten,
    /// and reported again if fetched again).
    static let refusedLimit = 1_000

    static func refusedRecords(_ text: String?) -> [String: String] {
        guard let text, case .object(let members)? = JSONValue.parse(Array(text.utf8)) else { return [:] }
        var result: [String: String] = [:]
        for (id, version) in members { if let version = version.stringValue { result[id] = version } }
        return result
    }

    static func storeRefused(_ refused: [String: String], _ object: String, _ store: LocalStore) throws(OStackError) {
        guard !refused.isEmpty else { return try store.removeValue(refusedKey(object)) }
        // Beyond the limit, those with the newest versions are kept (the look-back fetches those).
        let kept = refused.sorted { ($0.value, $0.key) > ($1.value, $1.key) }.prefix(refusedLimit)
        let json = JSONValue.object(Dictionary(uniqueKeysWithValues: kept.map { ($0.key, JSONValue.string($0.value)) }))
        try store.setValue(refusedKey(object), String(decoding: json.serialized(), as: UTF8.self))
    }

    /// How far before its cursor a pull starts (see `pull`; the `sync.lookback` setting): longer than
    /// a write transaction on the server usually stays open, and than the clocks of a server's
    /// instances usually differ. Each pull fetches again what changed in that span before its
    /// cursor (and skips it), so a server writing 1 000 records a second costs 5 000 more a pull.
    var lookbackMilliseconds: Int64 = Self.defaultLookbackMilliseconds
    static let defaultLookbackMilliseconds: Int64 = 5_000

    /// The records of a look-back page the mirror already holds in the same version: dropped, so
    /// that what was pulled before is neither written nor counted again. Only records stamped at
    /// or before `boundary` (the cursor the pull started from) can be such.
    func dropUnchanged(_ object: String, _ page: inout Page, upTo boundary: String) throws(OStackError) {
        let old = page.records.filter { record in record.version.map { !Self.isEarlier(boundary, than: $0) } ?? false }
        guard !old.isEmpty else { return }
        // One batched lookup for the page (`mirrorVersions`).
        let held = try store.mirrorVersions(object, Set(old.map(\.id)))
        var keep: [Int] = []
        for (index, record) in page.records.enumerated() {
            if let version = record.version, !Self.isEarlier(boundary, than: version),
                let mirrored = held[record.id], mirrored == version
            {
                continue
            }
            keep.append(index)
        }
        guard keep.count < page.records.count else { return }
        page.records = keep.map { page.records[$0] }
        if !page.fields.isEmpty { page.fields = keep.map { page.fields[$0] } }
    }

    /// Whether the keyset position `a` is at or before `b` (`updated_at`, then id); positions whose
    /// stamps cannot be compared are not.
    static func isAtOrBefore(_ a: (version: String, id: String), _ b: (version: String, id: String)) -> Bool {
        if a.version == b.version { return a.id <= b.id }
        return isEarlier(a.version, than: b.version)
    }

    /// `cursor` moved back by `milliseconds`, in the cursor's own form (UTC ISO 8601 with
    /// milliseconds); nil when the cursor is not such a timestamp.
    static func lookbackStart(from cursor: String, milliseconds: Int64) -> String? {
        let bytes = Array(cursor.utf8)
        guard milliseconds > 0, bytes.count > 10, bytes[10] == UInt8(ascii: "T"), bytes.last == UInt8(ascii: "Z"),
            let at = CalendarInstant.milliseconds(cursor), at >= milliseconds
        else { return nil }
        return Timestamp.iso8601(secondsSince1970: Double(at - milliseconds) / 1000, milliseconds: true)
    }

    /// Whether `version` is an earlier `updated_at` than `current` — decided only when both are UTC
    /// ISO 8601 timestamps (`YYYY-MM-DDTHH:MM:SS[.fraction]Z`), compared as such without a date
    /// parser; any other spelling is not judged. A keyset page must not go back in time: a server
    /// walking the cursor backwards would otherwise be followed page after new page.
    static func isEarlier(_ version: String, than current: String) -> Bool {
        var version = version
        var current = current
        // On the bytes, allocating nothing: a look-back page compares every record's stamp (it built
        // a dictionary per character, a fifth of a quiet pull's time).
        return version.withUTF8 { a in current.withUTF8 { b in isoOrder(a, b) } } == -1
    }

    /// The order of two ISO 8601 UTC stamps (-1, 0, 1): their seconds as text, then their fractions
    /// as decimals (the shorter padded with zeros); nil when either is not one.
    static func isoOrder(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Int? {
        func isStamp(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
            guard bytes.count >= 20, bytes[bytes.count - 1] == UInt8(ascii: "Z") else { return false }
            for index in 0..<19 {
                let byte = bytes[index]
                switch index {
                case 4, 7: guard byte == UInt8(ascii: "-") else { return false }
                case 10: guard byte == UInt8(ascii: "T") else { return false }
                case 13, 16: guard byte == UInt8(ascii: ":") else { return false }
                default: guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return false }
                }
            }
            let end = bytes.count - 1  // the Z
            guard end > 19 else { return true }
            guard bytes[19] == UInt8(ascii: "."), end > 20 else { return false }
            for index in 20..<end where !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
                return false
            }
            return true
        }
        guard isStamp(a), isStamp(b) else { return nil }
        for index in 0..<19 where a[index] != b[index] { return a[index] < b[index] ? -1 : 1 }
        // Fractions: the digits after "." up to the Z (none without a fraction).
        let aDigits = a.count > 20 ? a.count - 21 : 0
        let bDigits = b.count > 20 ? b.count - 21 : 0
        for offset in 0..<max(aDigits, bDigits) {
            let x = offset < aDigits ? a[20 + offset] : UInt8(ascii: "0")
            let y = offset < bDigits ? b[20 + offset] : UInt8(ascii: "0")
            if x != y { return x < y ? -1 : 1 }
        }
        return 0
    }

    /// Fetches one keyset page (on the stream's thread).
    /// `count`: ask for the server's `total` (a COUNT query on its side; only the first page of a
    /// pull someone watches asks).
    /// `from`: the look-back's first page instead, every record stamped at or after it.
    func fetchPage(
        _ object: String, after cursor: (version: String, id: String)? = nil, from start: String? = nil,
        skip: Int = 0, count: Bool = false
    ) throws(OStackError) -> RawPage {
        let api = self.api
        var query: [(String, String)] = [("sort", "updated_at,id"), ("top", String(pageSize))]
        if skip > 0 { query.append(("skip", String(skip))) }
        if !count { query.append(("count", "false")) }
        if let cursor {
            let filter: JSONValue = [
                "or", ["updated_at", ">", .string(cursor.version)],
                ["and", ["updated_at", "=", .string(cursor.version)], ["id", ">", .string(cursor.id)]],
            ]
            query.append(("filter", String(decoding: filter.serialized(), as: UTF8.self)))
        } else if let start {
            let filter: JSONValue = ["updated_at", ">=", .string(start)]
            query.append(("filter", String(decoding: filter.serialized(), as: UTF8.self)))
        }
        let outcome = try api.exchange(.list(object: object), query: query)
        guard outcome.ok else {
            throw outcome.error.asOStackError(account: api.account.alias, host: api.account.server.authority)
        }
        guard let page = Self.split(outcome.response.body) else {
            throw OStackError(
                .unexpectedResponse, context: .init(host: api.account.server.authority), detail: "list page malformed")
        }
        return page
    }

    /// A list page as it came: its body, where its records are, and the keyset position of its last
    /// record with a usable id (which is all the fetcher needs to ask for the next page).
    struct RawPage: Sendable {
        var body: [UInt8]
        var ranges: [Range<Int>]
        var total: Int?
        var last: (version: String?, id: String)?
        /// Set by the fetcher on a full page that ended where a page had ended before, where no
        /// request can go on from (a server repeating or cycling pages): the pull stops with an error.
        var repeated = false
    }

    /// A list page's records, found without decoding the page; each record's syntax is checked
    /// strictly (`JSONSyntax`) before it may be stored.
    static func parsePage(_ body: [UInt8], indexed: [String] = []) -> Page? {
        split(body).map { parse($0, indexed: indexed) }
    }

    /// The records' places in the body and the last usable keyset position, without checking the
    /// records (nil when the body is not a list page).
    static func split(_ body: [UInt8]) -> RawPage? {
        body.withUnsafeBytes { raw -> RawPage? in
            guard let found = FieldScanner.recordRanges(in: raw) else { return nil }
            var page = RawPage(body: body, ranges: found.ranges, total: found.total)
            for range in found.ranges.reversed() {
                if let usable = key(of: UnsafeRawBufferPointer(rebasing: raw[range])) {
                    page.last = usable
                    break
                }
            }
            return page
        }
    }

    private static let keyScanner = FieldScanner(fields: ["id", "updated_at"])

    /// A record's id (when usable) and version.
    private static func key(of record: UnsafeRawBufferPointer) -> (version: String?, id: String)? {
        let values = keyScanner.scan(record)
        guard case .string(let id) = values[0], PushClassifier.isUsableID(id) else { return nil }
        let version: String? = if case .string(let text) = values[1] { text } else { nil }
        return (version, id)
    }

    /// The records of a page checked: (id, version, raw JSON) to store, the ids of those that cannot
    /// be stored (nil when unusable), and the values of the `indexed` fields of those to store. One
    /// pass over each record checks it and finds its id, version and indexed values
    /// (`JSONSyntax.checkObject`); a record that fails the check is read again only for its id.
    static func parse(_ raw: RawPage, indexed: [String] = []) -> Page {
        var page = Page()
        page.total = raw.total
        page.count = raw.ranges.count
        page.last = raw.last
        page.repeated = raw.repeated
        page.records.reserveCapacity(raw.ranges.count)
        if !indexed.isEmpty { page.fields.reserveCapacity(raw.ranges.count) }
        let names = [Array("id".utf8), Array("updated_at".utf8)] + indexed.map { Array($0.utf8) }
        var values: [FieldScanner.RawValue] = []
        var scratch: [Range<Int>] = []
        raw.body.withUnsafeBytes { body in
            for range in raw.ranges {
                let slice = UnsafeRawBufferPointer(rebasing: body[range])
                guard JSONSyntax.checkObject(slice, names: names, into: &values, scratch: &scratch) else {
                    let key = key(of: slice)
                    page.rejected.append(key?.id)
                    page.rejectedVersions.append(key?.version)
                    continue
                }
                guard case .string(let idRange, let escaped) = values[0],
                    case let id = FieldScanner.decodeString(slice, idRange, escaped: escaped),
                    PushClassifier.isUsableID(id)
                else {
                    page.rejected.append(nil)
                    page.rejectedVersions.append(nil)
                    continue
                }
                let version: String? =
                    if case .string(let versionRange, let escaped) = values[1] {
                        FieldScanner.decodeString(slice, versionRange, escaped: escaped)
                    } else {
                        nil
                    }
                page.records.append((id, version, Array(slice)))
                if !indexed.isEmpty {
                    // An indexed field named `id` or `updated_at` (a name field, say) was found in
                    // the first two slots only (`checkObject` fills the first slot of a name).
                    var fields = Array(values[2...])
                    for (position, name) in indexed.enumerated() where name == "id" || name == "updated_at" {
                        fields[position] = values[name == "id" ? 0 : 1]
                    }
                    page.fields.append(fields)
                }
            }
        }
        return page
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

/// Keyset pages fetched ahead of the writer on a thread of their own, at most `depth` waiting: the
/// fetcher does not stall while a commit writes, and the writer rarely waits for the network.
/// Each page's request needs the previous page's last key, so the fetcher follows the keyset on its
/// own, asking for the next page as soon as it has found that key; a second thread checks each
/// page's records (`Puller.parse`) meanwhile, in order. The fetcher stops at a short page, a page
/// without a key, a page bigger than asked, a last key seen before, an error, or `cancel()`. The
/// writer checks the same conditions and asks for a next page only when the fetcher goes on; a
/// `next()` after the fetcher stopped fails instead of waiting forever.
final class PageStream: Sendable {
    /// Pages in order; a failed fetch is an item too (the pages before it are written first).
    private let handOff: HandOff<Result<Puller.Page, OStackError>>
    /// Checks each page's records (in order) while the fetcher already asks for the next one.
    private let checker = DispatchQueue(label: "ostack.pull.check")

    /// The fields whose values the checker finds for the writer (`Puller.Page.fields`).
    let indexed: [String]
    /// Room is counted in bytes too: a page takes one unit of room per `roomBytes` of its body (at
    /// least one, at most `depth`), so pages far larger than an honest one (a server sending huge
    /// records) are fetched ahead fewer at a time. Pages of up to `roomBytes` each hold at most
    /// `depth` × `roomBytes` (24 MB by default) waiting; the largest (up to the transport's 64 MiB
    /// cap) one waiting and one fetched waiting for room, besides the writer's: not `depth` of them.
    let roomBytes: Int
    private let depth: Int
    /// The units of room each page put (in order) holds; given back when the writer takes it.
    private let units = Mutex<[Int]>([])
    /// Whether a stamp was paged through by offset (`start`): a record that left the stamp meanwhile
    /// moved the others up one place, so the pull reconciles to find any it skipped.
    private let offsetPaged = Mutex(false)
    var pagedByOffset: Bool { offsetPaged.withLock { $0 } }

    init(depth: Int, indexed: [String] = [], roomBytes: Int = 2 << 20) {
        self.indexed = indexed
        self.depth = max(1, depth)
        self.roomBytes = max(1, roomBytes)
        handOff = HandOff(depth: depth)
    }

    /// The units of room a page with a body of `bytes` takes.
    func unitsOfRoom(_ bytes: Int) -> Int {
        min(depth, max(1, (bytes + roomBytes - 1) / roomBytes))
    }

    /// Where a page starts: after a keyset position (`updated_at` then `id`), or at an offset into
    /// the records stamped `version` (`updated_at >= version`, skipping `skip`).
    enum Request: Sendable {
        case after(version: String, id: String)
        case stamp(version: String, skip: Int)
    }

    /// Fetches pages ahead of the writer: the first with `request` (nil: the caller's first page),
    /// each next one after the last record of the one before, until a page is not full.
    ///
    /// A server that keeps `updated_at` finer than it shows (ObjectStack on Postgres: microseconds,
    /// shown in milliseconds) answers a keyset request after `(v, id)` with every record of
    /// millisecond `v` again (`updated_at > v` holds for all of them there), so a full page of
    /// records stamped `v` (one transaction writing more records than a page holds: Postgres stamps
    /// its start) would come back for ever. Such a page, ending where one ended before, switches
    /// to paging through stamp `v` by offset, and back to the keyset after it. Any other page that
    /// ends where one ended before is `repeated`: the last one fetched.
    func start(
        after cursor: (version: String, id: String)?, pageSize: Int,
        fetch: @escaping @Sendable (Request?, Bool) throws(OStackError) -> Puller.RawPage
    ) {
        handOff.run { [self] in
            var request = cursor.map { Request.after(version: $0.version, id: $0.id) }
            var first = true
            var seen = Set<String>()
            if let cursor { seen.insert(cursor.version + "\u{0}" + cursor.id) }
            fetching: while handOff.reserve() {
                var result = Result { () throws(OStackError) -> Puller.RawPage in try fetch(request, first) }
                first = false
                // A large page waits for the room its size takes (the unit reserved above is one).
                let needed = (try? result.get()).map { unitsOfRoom($0.body.count) } ?? 1
                var taken = 1
                while taken < needed {
                    guard handOff.reserve() else { break fetching }  // stopped meanwhile
                    taken += 1
                }
                var next: Request?
                if case .success(var page) = result, page.ranges.count == pageSize, let last = page.last,
                    let version = last.version
                {
                    let new = seen.insert(version + "\u{0}" + last.id).inserted
                    switch request {
                    case .stamp(let stamped, let skip)? where new && version == stamped:
                        next = .stamp(version: version, skip: skip + pageSize)  // still inside the stamp
                    case .after(let after, _)? where !new && version == after:
                        next = .stamp(version: version, skip: pageSize)  // the stamp holds more than a page
                        offsetPaged.withLock { $0 = true }
                    default:
                        if new { next = .after(version: version, id: last.id) }
                    }
                    if next == nil {
                        page.repeated = true
                        result = .success(page)
                    }
                }
                units.withLock { $0.append(needed) }
                checker.async { [self, result] in handOff.put(result.map { Puller.parse($0, indexed: indexed) }) }
                guard let next else { break }
                request = next
            }
            // After every page the checker was given.
            checker.async { [self] in handOff.close() }
        }
    }

    /// The next page, waiting for it.
    func next() throws(OStackError) -> Puller.Page {
        guard let page = try handOff.next() else {
            throw OStackError(.unexpectedResponse, detail: "list pages ended early")
        }
        let taken = units.withLock { $0.isEmpty ? 1 : $0.removeFirst() }
        for _ in 0..<taken { handOff.release() }
        return try page.get()
    }

    /// Stops the fetcher after the request under way (it waits for room, so it is woken here) and
    /// waits for it: nothing of the pull (a request, a token refresh) outlives it. Call it once.
    func cancel() {
        handOff.stop()
    }
}

/// The pull's write settings, public so that `make bench` gives its raw-insert baselines the same
/// ones instead of copies that could drift.
public enum PullTuning {
    /// Records written per transaction.
    public static let recordsPerCommit = 20_000
    /// Records written per transaction by a first load (`MirrorLoad`): its levels are written once
    /// and merged only when an object has more than `MirrorIndex.maxLevels`, so they are larger (a
    /// 1 000 000-record load writes about 20). The same size at every mirror size keeps peak memory
    /// flat (the transaction's keys and values are sorted in memory).
    public static let firstLoadRecordsPerCommit = 50_000
    /// Seconds after which a transaction ends at the next page boundary, however few records it holds.
    public static let commitSeconds = 1.0
    /// The page cache while pulling, in KiB.
    public static let cacheKiB = 8_192
}
