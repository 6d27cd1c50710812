import Dispatch
import FoundationEssentials
import PlatformKit
import SodiumKit

/// The one sync core (SPEC §8), run per account against that account's `LocalStore` and `DataAPI`.
///
/// Push: stale claims recovered; the oldest due entry of each record (FIFO per record); creates,
/// updates and deletes batched through `createMany` / `updateMany` / `deleteMany` up to the server's
/// cap (a lone entry uses the plain route: `POST`, or `PATCH`/`DELETE` with `If-Match`); entries are
/// claimed and marked possibly-delivered in a committed transaction before the request goes out, and
/// a possibly-delivered create is looked up by id before it is sent again (exactly once).
/// Classification: network → pending (no attempt counted, stop); 401 → the keeper refreshed once,
/// then stop the account; 409 `CONCURRENT_UPDATE` → three-way merge or `conflict`; validation →
/// `failed` with the field names; 429/5xx → `failed` with backoff and jitter honouring
/// `Retry-After`; after 8 attempts → `failed` until `queue retry`.
///
/// Pull: per tracked object, a keyset over `(updated_at, id)` in pages; records with queued changes
/// are left alone; deletions found by an id-only reconciliation.
public struct SyncEngine: Sendable {
    public let store: LocalStore
    public let api: DataAPI
    public var batchCap = 200
    /// Whether the server honours per-row expected versions in `updateMany` / `deleteMany` (a
    /// discovery capability). Without it updates and deletes go one by one with `If-Match`, so no
    /// conditional write is ever sent unconditionally.
    public var conditionalBatches = false
    public var pageSize = 2000
    /// Reconcile deletions when the last reconciliation is older than this.
    public var reconcileInterval: Double = 900
    public var progress: (@Sendable (_ object: String, _ done: Int) -> Void)?

    public init(store: LocalStore, api: DataAPI) {
        self.store = store
        self.api = api
    }

    public struct PushReport: Sendable, Equatable {
        public var pushed = 0
        public var failed = 0
        public var conflicts = 0
        public var merged = 0
        /// Set when the push stopped early: offline, signed out, …
        public var stoppedBy: OStackError.Code?
        public var stoppedError: OStackError?

        public static func == (a: PushReport, b: PushReport) -> Bool {
            a.pushed == b.pushed && a.failed == b.failed && a.conflicts == b.conflicts && a.stoppedBy == b.stoppedBy
        }
    }

    // MARK: Push

    public func push() throws(OStackError) -> PushReport {
        var report = PushReport()
        try store.recoverStaleClaims()
        var cap = batchCap
        var rounds = 0
        while rounds < 1_000 {
            rounds += 1
            cap = min(batchCap, try store.value("sync.batch-cap").flatMap { Int($0) } ?? batchCap)
            let due = try store.due()
            if due.isEmpty { break }
            var progressed = false
            do {
                // Possibly-delivered creates first: find out whether they arrived.
                let unsure = due.filter { $0.sent && $0.operation == .create }
                if !unsure.isEmpty {
                    try verifyCreates(unsure, &report)
                    progressed = true
                    continue
                }
                var groups: [String: [QueueEntry]] = [:]
                var order: [String] = []
                for entry in due {
                    let key = entry.object + "\u{0}" + entry.operation.rawValue
                    if groups[key] == nil { order.append(key) }
                    groups[key, default: []].append(entry)
                }
                for key in order {
                    let entries = groups[key]!
                    let size = entries[0].operation == .create || conditionalBatches ? cap : 1
                    for chunk in entries.chunked(size) {
                        try send(Array(chunk), &report)
                        progressed = true
                    }
                }
            } catch let stop {
                if [.offline, .timeout, .tls, .sessionExpired, .notSignedIn, .locked].contains(stop.code) {
                    report.stoppedBy = stop.code
                    report.stoppedError = stop
                    return report
                }
                throw stop
            }
            if !progressed { break }
        }
        return report
    }

    /// Sends one chunk of same-object, same-operation entries and records every outcome.
    func send(_ selected: [QueueEntry], _ report: inout PushReport) throws(OStackError) {
        let chunk = try store.claim(selected)
        if chunk.isEmpty { return }  // changed meanwhile: picked up again next round
        let outcome: DataAPI.Outcome
        let object = chunk[0].object
        do {
            switch (chunk[0].operation, chunk.count) {
            case (.create, 1):
                outcome = try api.exchange(
                    "POST", DataAPI.objectPath(object), body: .object(createBody(chunk[0])),
                    headers: [("Idempotency-Key", chunk[0].idempotencyKey)])
            case (.create, _):
                outcome = try api.exchange(
                    "POST", DataAPI.objectPath(object) + "/createMany",
                    body: .array(chunk.map { .object(createBody($0)) }),
                    headers: [("Idempotency-Key", Self.batchKey(chunk))])
            case (.update, 1):
                var headers = [("Idempotency-Key", chunk[0].idempotencyKey)]
                if let base = chunk[0].baseVersion { headers.append(("If-Match", base)) }
                outcome = try api.exchange(
                    "PATCH", DataAPI.recordPath(object, chunk[0].recordID), body: .object(chunk[0].payload ?? [:]),
                    headers: headers)
            case (.update, _):
                let rows: [JSONValue] = chunk.map { entry in
                    var row: [String: JSONValue] = [
                        "id": .string(entry.recordID), "data": .object(entry.payload ?? [:]),
                    ]
                    if let base = entry.baseVersion { row["expectedVersion"] = .string(base) }
                    return .object(row)
                }
                outcome = try api.exchange(
                    "POST", DataAPI.objectPath(object) + "/updateMany",
                    body: ["records": .array(rows), "options": ["continueOnError": true, "returnRecords": true]],
                    headers: [("Idempotency-Key", Self.batchKey(chunk))])
            case (.delete, 1):
                var headers = [("Idempotency-Key", chunk[0].idempotencyKey)]
                if let base = chunk[0].baseVersion { headers.append(("If-Match", base)) }
                outcome = try api.exchange("DELETE", DataAPI.recordPath(object, chunk[0].recordID), headers: headers)
            case (.delete, _):
                var versions: [String: JSONValue] = [:]
                for entry in chunk { if let base = entry.baseVersion { versions[entry.recordID] = .string(base) } }
                outcome = try api.exchange(
                    "POST", DataAPI.objectPath(object) + "/deleteMany",
                    body: [
                        "ids": .array(chunk.map { .string($0.recordID) }), "versions": .object(versions),
                        "options": ["continueOnError": true],
                    ],
                    headers: [("Idempotency-Key", Self.batchKey(chunk))])
            }
        } catch {
            // No answer: the request may or may not have arrived. Back to pending, no attempt counted.
            // Only a request that certainly never reached the server counts as undelivered.
            // (Locked, signed out or refused with 401: nothing was processed either.)
            let delivered =
                !error.requestNotSent && ![.locked, .pinLockedOut, .notSignedIn, .sessionExpired].contains(error.code)
            for entry in chunk { try store.release(entry, delivered: delivered) }
            throw error
        }
        try store.transaction { () throws(OStackError) in
            if chunk.count == 1 || !outcome.ok {
                try settleWhole(chunk, outcome, &report)
            } else {
                try settleRows(chunk, outcome, &report)
            }
        }
    }

    func createBody(_ entry: QueueEntry) -> [String: JSONValue] {
        var body = entry.payload ?? [:]
        body["id"] = .string(entry.recordID)
        for field in ObjectSchema.systemFields where field != "id" { body[field] = nil }
        return body
    }

    static func batchKey(_ chunk: [QueueEntry]) -> String {
        "b_" + Hex.encode(BLAKE2b.hash(Array(chunk.map(\.idempotencyKey).joined(separator: ",").utf8), length: 16))
    }

    /// One outcome for every entry of the chunk (a single request, or a batch refused as a whole).
    func settleWhole(_ chunk: [QueueEntry], _ outcome: DataAPI.Outcome, _ report: inout PushReport) throws(OStackError)
    {
        let status = outcome.response.status
        let json = outcome.json  // parsed once
        if outcome.ok {
            let entry = chunk[0]
            switch entry.operation {
            case .create:
                let created = json?["records"]?.arrayValue ?? [json?["record"] ?? .null]
                for (index, entry) in chunk.enumerated() {
                    try adoptCreated(entry, created.indices.contains(index) ? created[index] : nil)
                    report.pushed += 1
                }
            case .update:
                try store.complete(entry, serverRecord: json?["record"])
                report.pushed += 1
            case .delete:
                try store.complete(entry, serverRecord: nil)
                report.pushed += 1
            }
            return
        }
        let error = outcome.error
        // Over the server's batch cap: learn the cap (kept for this account) and send again in smaller batches.
        if status == 400, error.code == "BATCH_TOO_LARGE", chunk.count > 1 {
            let cap = max(1, min(chunk.count - 1, json?["max"]?.doubleValue.map { Int($0) } ?? chunk.count / 2))
            try store.setValue("sync.batch-cap", String(cap))
            for entry in chunk { try store.release(entry, delivered: false) }
            return
        }
        // A batch refused because of one row (createMany is all-or-nothing): settle that row, release the rest.
        if chunk.count > 1, let index = json?["index"]?.doubleValue.map({ Int($0) }), chunk.indices.contains(index) {
            for (position, entry) in chunk.enumerated() where position != index {
                try store.release(entry, delivered: false)
            }
            try settleWhole([chunk[index]], outcome, &report)
            return
        }
        for entry in chunk {
            switch status {
            case 409 where error.code == "CONCURRENT_UPDATE":
                try resolveConcurrent(entry, theirs: error.currentRecord, version: error.currentVersion, &report)
            case 409
            where entry.operation == .create && error.code == "UNIQUE_VIOLATION"
                && (json?["field"]?.stringValue).map({ $0 != "id" }) ?? false:
                // Another record has this value in a unique field: a validation problem of this change.
                let field = json?["field"]?.stringValue.flatMap { ObjectSchema.isIdentifier($0) ? $0 : nil }
                try store.fail(
                    entry, error: "validation" + (field.map { ": \($0)" } ?? ""), retryable: false, retryAfter: nil)
                report.failed += 1
            case 409 where entry.operation == .create:
                // The id is taken: most likely our own earlier delivery. It stays marked as sent, so
                // the next round looks it up; counted as an attempt so this cannot repeat forever.
                try store.fail(entry, error: "id-taken", retryable: true, retryAfter: 0)
            case 409 where error.code == "UNIQUE_VIOLATION" || error.code == "DELETE_RESTRICTED":
                // The server refuses this change as it stands (a duplicate value, dependent records).
                try store.fail(
                    entry, error: error.code == "DELETE_RESTRICTED" ? "restricted" : "validation", retryable: false,
                    retryAfter: nil)
                report.failed += 1
            case 404 where entry.operation == .delete:
                try store.complete(entry, serverRecord: nil)
                report.pushed += 1
            case 404:
                try store.fail(entry, error: "not-found", retryable: false, retryAfter: nil)
                report.failed += 1
            case 400, 422:
                let fields = error.fields.filter(ObjectSchema.isIdentifier)
                try store.fail(
                    entry, error: "validation" + (fields.isEmpty ? "" : ": " + fields.joined(separator: ", ")),
                    retryable: false, retryAfter: nil)
                report.failed += 1
            case 403:
                try store.fail(entry, error: "forbidden", retryable: false, retryAfter: nil)
                report.failed += 1
            case 429, 500...599:
                try store.fail(
                    entry, error: status == 429 ? "rate-limited" : "server-error", retryable: true,
                    retryAfter: error.retryAfterSeconds.map(Double.init))
                report.failed += 1
            default:
                try store.fail(entry, error: "unexpected-response", retryable: false, retryAfter: nil)
                report.failed += 1
            }
        }
    }

    /// Per-row outcomes of `updateMany` / `deleteMany` (`BatchUpdateResponse`).
    func settleRows(_ chunk: [QueueEntry], _ outcome: DataAPI.Outcome, _ report: inout PushReport) throws(OStackError) {
        if chunk[0].operation == .create {
            try settleWhole(chunk, outcome, &report)
            return
        }
        let results = outcome.json?["results"]?.arrayValue ?? []  // parsed once
        for (index, entry) in chunk.enumerated() {
            let result =
                results.first { $0["index"]?.doubleValue.map { Int($0) } == index }
                ?? results.first { $0["id"]?.stringValue == entry.recordID }
            guard let result else {
                try store.release(entry, delivered: true)
                continue
            }
            if result["success"]?.boolValue == true {
                try store.complete(
                    entry, serverRecord: entry.operation == .delete ? nil : result["data"] ?? result["record"])
                report.pushed += 1
                continue
            }
            let rowError = result["errors"]?.arrayValue?.first
            let code = rowError?["code"]?.stringValue
            let status = rowError?["httpStatus"]?.doubleValue.map { Int($0) } ?? 400
            switch code {
            case "CONCURRENT_UPDATE":
                try resolveConcurrent(
                    entry, theirs: rowError?["currentRecord"] ?? result["currentRecord"],
                    version: rowError?["currentVersion"]?.stringValue ?? result["currentVersion"]?.stringValue, &report)
            case "RECORD_NOT_FOUND" where entry.operation == .delete:
                try store.complete(entry, serverRecord: nil)
                report.pushed += 1
            case "NOT_ATTEMPTED", "ROLLED_BACK":
                try store.release(entry, delivered: false)
            default:
                let retryable = status == 429 || status >= 500
                try store.fail(
                    entry,
                    error: code == "RECORD_NOT_FOUND" ? "not-found" : (retryable ? "server-error" : "validation"),
                    retryable: retryable, retryAfter: nil)
                report.failed += 1
            }
        }
    }

    /// A create's server answer: the record as stored (a server that ignored our id gets its id adopted).
    func adoptCreated(_ entry: QueueEntry, _ record: JSONValue?) throws(OStackError) {
        if let serverID = record?["id"]?.stringValue, serverID != entry.recordID {
            try store.renameRecord(entry.object, from: entry.recordID, to: serverID)
            var renamed = entry
            renamed.recordID = serverID
            try store.complete(renamed, serverRecord: record)
            return
        }
        try store.complete(entry, serverRecord: record)
    }

    /// Creates that may have arrived already (a dropped response, a crash): looked up by id in one
    /// list request per batch; found → done, missing → sent again (still with their Idempotency-Key).
    func verifyCreates(_ entries: [QueueEntry], _ report: inout PushReport) throws(OStackError) {
        let byObject = Dictionary(grouping: entries, by: \.object)
        for object in byObject.keys.sorted() {
            for slice in byObject[object]!.chunked(
                min(batchCap, try store.value("sync.batch-cap").flatMap { Int($0) } ?? batchCap))
            {
                let chunk = Array(slice)
                let filter: JSONValue = .array([
                    .string("id"), .string("in"), .array(chunk.map { .string($0.recordID) }),
                ])
                let json: JSONValue
                do {
                    json = try api.call(
                        "GET", DataAPI.objectPath(object),
                        query: [
                            ("filter", String(decoding: filter.serialized(), as: UTF8.self)),
                            ("top", String(chunk.count)),
                        ])
                } catch  where ![.offline, .timeout, .tls, .sessionExpired, .notSignedIn, .locked].contains(error.code)
                {
                    // This object cannot be listed (forbidden, unknown, …): its entries fail; others go on.
                    for entry in chunk {
                        try store.fail(entry, error: error.code.rawValue, retryable: false, retryAfter: nil)
                        report.failed += 1
                    }
                    continue
                }
                var found: [String: JSONValue] = [:]
                for record in json["records"]?.arrayValue ?? [] {
                    if let id = record["id"]?.stringValue { found[id] = record }
                }
                try store.transaction { () throws(OStackError) in
                    for entry in chunk {
                        guard let record = found[entry.recordID] else {
                            try store.run("UPDATE queue SET sent = 0 WHERE seq = ?", [.integer(entry.seq)])
                            continue
                        }
                        // Ours only if it holds what we sent; a different record with the same id is a
                        // collision, never silently taken for our delivery.
                        let ours = (entry.payload ?? [:]).allSatisfy { key, value in
                            ObjectSchema.systemFields.contains(key) || record[key] == nil || record[key] == value
                        }
                        if ours {
                            try store.complete(entry, serverRecord: record)
                            report.pushed += 1
                        } else {
                            try store.markConflict(
                                entry, theirs: record.objectValue, version: record["updated_at"]?.stringValue)
                            report.conflicts += 1
                        }
                    }
                }
            }
        }
    }

    // MARK: Conflicts

    /// A 409 `CONCURRENT_UPDATE`: three-way merge against the base snapshot (SPEC §8). Already applied
    /// (our earlier delivery) → done; fields changed on both sides differ → `conflict`; otherwise the
    /// change is rebased on the server's version and pushed again.
    func resolveConcurrent(_ entry: QueueEntry, theirs: JSONValue?, version: String?, _ report: inout PushReport)
        throws(OStackError)
    {
        guard let theirsRecord = theirs?.objectValue else {
            try store.markConflict(entry, theirs: nil, version: version)
            report.conflicts += 1
            return
        }
        let merge = ThreeWayMerge(base: entry.baseSnapshot ?? [:], mine: entry.payload ?? [:], theirs: theirsRecord)
        switch entry.operation {
        case .delete:
            try store.markConflict(entry, theirs: theirsRecord, version: version)
            report.conflicts += 1
        case .create, .update:
            if merge.alreadyApplied {
                try store.complete(entry, serverRecord: .object(theirsRecord))
                report.pushed += 1
            } else if merge.conflictingFields.isEmpty && entry.revision < 5 {
                try store.rebase(
                    entry, payload: merge.localChanges, operation: .update, baseVersion: version,
                    baseSnapshot: theirsRecord)
                try store.putRecord(entry.object, .object(merge.merged), version: version)
                report.merged += 1
            } else {
                try store.markConflict(entry, theirs: theirsRecord, version: version)
                report.conflicts += 1
            }
        }
    }

    /// `conflicts resolve ID --keep mine|theirs`.
    public func resolve(_ entry: QueueEntry, keepMine: Bool) throws(OStackError) {
        guard entry.status == .conflict else {
            throw OStackError(.notFound, detail: "entry is not a conflict")
        }
        try store.transaction { () throws(OStackError) in
            if keepMine {
                let payload = entry.operation == .delete ? nil : entry.payload
                try store.rebase(
                    entry, payload: payload, operation: entry.operation, baseVersion: entry.theirsVersion,
                    baseSnapshot: entry.theirs)
            } else {
                try store.run(
                    "DELETE FROM queue WHERE object = ? AND record_id = ? AND seq >= ?",
                    [.text(entry.object), .text(entry.recordID), .integer(entry.seq)])
                if let theirs = entry.theirs {
                    try store.putRecord(entry.object, .object(theirs), version: entry.theirsVersion)
                } else {
                    try store.deleteRecord(entry.object, entry.recordID)
                }
            }
        }
    }

    // MARK: Pull

    public struct PullReport: Sendable {
        public var pulled = 0
        public var deleted = 0
    }

    /// Pulls every change of a tracked object since its cursor, then reconciles deletions when due.
    public func pull(_ object: String, reconcile forceReconcile: Bool = false) throws(OStackError) -> PullReport {
        var report = PullReport()
        guard var state = try store.trackState(object) else { return report }
        // The first pull is a bulk load: build the object's indexes once at the end instead. It also
        // brings every record, so it needs no deletion reconciliation right after.
        let initial = state.cursorVersion == nil
        if initial { try store.suspendIndexes(object) }
        // Pipelined: while one page is written, the next one is already being fetched (the keyset
        // cursor of the next request is known as soon as a page is parsed).
        var pending = fetchPage(object, after: state.cursorVersion.flatMap { v in state.cursorID.map { (v, $0) } })
        while true {
            let page = try pending.wait()
            if page.isEmpty { break }
            let last = page.last!
            let more = page.count >= pageSize && last.version != nil
            if more { pending = fetchPage(object, after: (last.version!, last.id)) }
            try store.transaction { () throws(OStackError) in
                report.pulled += try store.applyPulled(object, page)
                if let version = last.version {
                    try store.advanceCursor(object, version: version, id: last.id)
                    state.cursorVersion = version
                    state.cursorID = last.id
                }
            }
            progress?(object, report.pulled)
            if !more { break }
        }
        try store.restoreIndexes(object)
        let due = forceReconcile || state.lastReconcileAt.map { store.now - $0 >= reconcileInterval } ?? true
        if due && !(initial && !forceReconcile) { report.deleted = try reconcile(object) }
        try store.markPulled(object, reconciled: due)
        return report
    }

    typealias Page = [(id: String, version: String?, json: [UInt8])]

    /// Starts fetching one keyset page on a background thread.
    func fetchPage(_ object: String, after cursor: (version: String, id: String)?) -> PageFetch {
        let fetch = PageFetch()
        let api = self.api
        var query: [(String, String)] = [("sort", "updated_at,id"), ("top", String(pageSize)), ("count", "false")]
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
                    let outcome = try api.exchange("GET", DataAPI.objectPath(object), query: request)
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

    /// A list page's records as (id, version, raw JSON), found without decoding the page.
    static func parsePage(_ body: [UInt8]) -> Page? {
        let scanner = FieldScanner(fields: ["id", "updated_at"])
        return body.withUnsafeBytes { raw -> Page? in
            guard let found = FieldScanner.recordRanges(in: raw) else { return nil }
            var page: Page = []
            page.reserveCapacity(found.ranges.count)
            for range in found.ranges {
                let slice = UnsafeRawBufferPointer(rebasing: raw[range])
                let values = scanner.scan(slice)
                guard case .string(let id) = values[0] else { return nil }
                let version: String? = if case .string(let v) = values[1] { v } else { nil }
                page.append((id, version, Array(slice)))
            }
            return page
        }
    }

    /// Id-only reconciliation: local records (without queued changes) the server no longer has are
    /// deleted locally.
    func reconcile(_ object: String) throws(OStackError) -> Int {
        var remote = Set<String>()
        var after: String?
        let scanner = FieldScanner(fields: ["id"])
        while true {
            var query: [(String, String)] = [("select", "id"), ("sort", "id"), ("top", "10000"), ("count", "false")]
            if let after {
                let filter: JSONValue = ["id", ">", .string(after)]
                query.append(("filter", String(decoding: filter.serialized(), as: UTF8.self)))
            }
            let outcome = try api.exchange("GET", DataAPI.objectPath(object), query: query)
            guard outcome.ok else {
                throw outcome.error.asOStackError(account: api.account.alias, host: api.account.server.authority)
            }
            let page: (ids: [String], hasMore: Bool?)? = outcome.response.body.withUnsafeBytes { raw in
                FieldScanner.recordRanges(in: raw).map { found in
                    let ids = found.ranges.compactMap { range -> String? in
                        if case .string(let id) = scanner.scan(UnsafeRawBufferPointer(rebasing: raw[range]))[0] {
                            return id
                        }
                        return nil
                    }
                    return (ids, found.hasMore)
                }
            }
            guard let page else {
                throw OStackError(
                    .unexpectedResponse, context: .init(host: api.account.server.authority), detail: "id page malformed"
                )
            }
            remote.formUnion(page.ids)
            // A server may cap a page below what was asked: `hasMore` decides, not the page size.
            if page.ids.isEmpty || !(page.hasMore ?? (page.ids.count >= 10000)) { break }
            after = page.ids.last
        }
        let gone = try store.settledIDs(object).subtracting(remote)
        try store.transaction { () throws(OStackError) in
            for id in gone { try store.deleteRecord(object, id) }
        }
        return gone.count
    }
}

/// A three-way merge of one record (SPEC §8 "Conflicts").
public struct ThreeWayMerge: Sendable {
    public let base: [String: JSONValue]
    public let mine: [String: JSONValue]
    public let theirs: [String: JSONValue]

    public init(base: [String: JSONValue], mine: [String: JSONValue], theirs: [String: JSONValue]) {
        self.base = base
        self.mine = mine
        self.theirs = theirs
    }

    /// Fields the local change sets to something other than the base.
    public var localChanges: [String: JSONValue] {
        mine.filter { key, value in !ObjectSchema.systemFields.contains(key) && (base[key] ?? .null) != value }
    }

    /// Fields the server changed since the base.
    public var remoteChanges: Set<String> {
        Set(
            Set(theirs.keys).union(base.keys).filter { key in
                !ObjectSchema.systemFields.contains(key) && (theirs[key] ?? .null) != (base[key] ?? .null)
            })
    }

    /// Changed on both sides, to different values.
    public var conflictingFields: [String] {
        localChanges.keys.filter { remoteChanges.contains($0) && (theirs[$0] ?? .null) != mine[$0] }.sorted()
    }

    /// The server already has every local change (e.g. our own earlier delivery).
    public var alreadyApplied: Bool {
        localChanges.allSatisfy { (theirs[$0.key] ?? .null) == $0.value }
    }

    /// Theirs with the local changes on top.
    public var merged: [String: JSONValue] {
        theirs.merging(localChanges) { _, mine in mine }
    }
}

extension Array {
    func chunked(_ size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: Swift.max(1, size)).map { self[$0..<Swift.min($0 + size, count)] }
    }
}

/// One page being fetched in the background; `wait` blocks until it arrives.
final class PageFetch: @unchecked Sendable {
    // @unchecked: `result` is written once before `done` is signalled and read only after waiting.
    private var result: Result<SyncEngine.Page, OStackError>?
    private let done = DispatchSemaphore(value: 0)

    func finish(_ result: Result<SyncEngine.Page, OStackError>) {
        self.result = result
        done.signal()
    }

    func wait() throws(OStackError) -> SyncEngine.Page {
        done.wait()
        return try result!.get()
    }
}
