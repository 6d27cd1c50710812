import FoundationEssentials
import PlatformKit
import SQLCipherKit
import SodiumKit

/// The data use cases of one account (SPEC §7–§8): metadata, records (local-first writes), sync,
/// queue and conflicts. Opened per command; opening needs the account's DEK, so a locked
/// PIN-protected account is `locked` (exit 4) here.
public final class DataService: @unchecked Sendable {
    // @unchecked: owns one database connection; a command uses it from one task.
    public let account: Account
    public let environment: AuthEnvironment
    public let store: LocalStore
    public let api: DataAPI
    public var metadata: MetadataCache
    /// Called inside every local write transaction (the audit trail's hook).
    public var auditHook:
        (@Sendable (_ store: LocalStore, _ event: String, _ details: [String: String]) throws(OStackError) -> Void)?

    public init(account: Account, environment: AuthEnvironment) throws(OStackError) {
        self.account = account
        self.environment = environment
        let key = try environment.databaseKey(account)
        let database: Database
        do {
            database = try AccountDatabase.open(path: environment.databasePath(account), key: key)
        } catch {
            if error.code == .storageUnreadable {
                // AUD-5: the account's own trail is in the database that failed to open.
                environment.auditGlobal("database.open", outcome: "failed", details: ["account": account.id.rawValue])
            }
            throw error
        }
        store = try LocalStore(database: database, clock: environment.clock)
        api = DataAPI(account: account, keeper: SessionKeeper(environment: environment))
        metadata = MetadataCache(store: store, api: api)
        audit = try AuditTrail(
            store: store, databaseKey: key, anchorKey: environment.namespaces.key(account.id, .auditAnchor),
            secrets: environment.secrets)
        // Events recorded while the database was closed (or locked) join the chain now.
        try audit.flush(AuditBuffer(layout: environment.layout, account: account))
        let trail = audit
        auditHook = { _, event, details throws(OStackError) in try trail.append(event, details: details) }
    }

    /// The account's tamper-evident trail (SPEC §10).
    public let audit: AuditTrail

    /// Anchors the trail's head in the keyring after a command's writes.
    func anchorAudit() { audit.anchor() }

    // MARK: Locking

    /// One sync (push or pull) per account at a time, across processes. Under this lock every
    /// `in_progress` claim found is stale.
    public func withSyncLock<R>(_ body: () throws(OStackError) -> R) throws(OStackError) -> R {
        let lock: FileLock
        do {
            try SecureFileSystem.createDirectory(environment.layout.locksDirectory)
            lock = try FileLock(
                path: environment.layout.locksDirectory + "/sync-\(account.dataDirectory).lock",
                timeout: environment.lockTimeout)
        } catch {
            throw OStackError(.storageFailure, context: .init(account: account.alias), detail: "sync lock: \(error)")
        }
        return try withExtendedLifetime(lock) { () throws(OStackError) -> R in try body() }
    }

    public func engine() -> SyncEngine {
        var engine = SyncEngine(store: store, api: api)
        engine.conditionalBatches = conditionalBatchSupport()
        return engine
    }

    /// The server's `capabilities.conditionalBatch` from discovery, remembered for a day (false when
    /// unknown: one request per update or delete, each with `If-Match`).
    func conditionalBatchSupport() -> Bool {
        if let text = try? store.value("server.conditional-batch"),
            let checked = try? store.value("server.capabilities-at"),
            let at = Double(checked), store.now - at < 86_400
        {
            return text == "1"
        }
        guard let json = try? api.call("GET", "/discovery") else { return false }
        let document = json["data"] ?? json
        let supported = document["capabilities"]?["conditionalBatch"]?.boolValue ?? false
        try? store.setValue("server.conditional-batch", supported ? "1" : "0")
        try? store.setValue("server.capabilities-at", String(store.now))
        return supported
    }

    // MARK: Metadata

    /// The schema, or nil when none is cached and the server cannot be reached (writes are then
    /// queued unchecked; the server validates them on push).
    public func schemaIfAvailable(_ object: String) throws(OStackError) -> ObjectSchema? {
        do {
            return try metadata.object(object).schema
        } catch let error where [.offline, .timeout, .tls].contains(error.code) {
            return nil
        }
    }

    // MARK: Writes

    public struct WriteResult: Sendable {
        public var object: String
        public var id: String
        public var record: JSONValue?
        /// Saved locally, not yet on the server.
        public var queued: Bool
        /// Why it is still queued (offline, server error, conflict), when it is.
        public var reason: OStackError?
    }

    public func create(_ object: String, data: [String: JSONValue], offline: Bool) throws(OStackError) -> WriteResult {
        let ids = try createLocally(object, [data])
        return try pushAfterWrite(object, ids[0], offline: offline, ownEntry: ownEntries[ids[0]])
    }

    /// Queue entries this service added on their own (record id → entry id), for undoing a refused write.
    var ownEntries: [String: String] = [:]

    /// Several creates in one local transaction (`--data` with a JSON array); all are checked first,
    /// so an invalid one saves none. Pushed at once unless `offline`.
    public func createMany(_ object: String, data: [[String: JSONValue]], offline: Bool) throws(OStackError)
        -> [WriteResult]
    {
        let ids = try createLocally(object, data)
        if !offline, let last = ids.last { _ = try pushAfterWrite(object, last, offline: false) }
        var results: [WriteResult] = []
        for id in ids {
            let queued = try hasQueuedChange(object, id: id) || offline
            results.append(
                WriteResult(object: object, id: id, record: try store.record(object, id)?.data, queued: queued))
        }
        return results
    }

    func createLocally(_ object: String, _ items: [[String: JSONValue]]) throws(OStackError) -> [String] {
        guard ObjectSchema.isIdentifier(object) else { throw OStackError(.unknownObject, detail: "bad object name") }
        let schema = try schemaIfAvailable(object)
        if let schema {
            let validator = FieldValidator(schema: schema)
            for data in items { try validator.validate(data, complete: true) }
        }
        var ids: [String] = []
        try store.transaction { () throws(OStackError) in
            for data in items {
                var record = data
                let id = data["id"]?.stringValue ?? Self.newRecordID()
                // A given id that is already here is not a create (it would overwrite the local copy).
                guard try store.record(object, id) == nil, !ids.contains(id) else {
                    throw OStackError(
                        .validation,
                        context: .init(
                            object: object, fields: ["id"],
                            suggestion: "A record with this id exists; use `records update`."),
                        detail: "create with an existing id")
                }
                record["id"] = .string(id)
                try store.putRecord(object, .object(record), version: nil)
                let entry = try store.enqueueReporting(
                    object: object, recordID: id, operation: .create, payload: record, baseVersion: nil,
                    baseSnapshot: nil)
                if entry.isNew, let entryID = entry.id { ownEntries[id] = entryID }
                ids.append(id)
            }
            try auditHook?(store, "record.create", ["object": object, "count": String(items.count)])
        }
        return ids
    }

    public func update(_ object: String, id: String, changes: [String: JSONValue], offline: Bool) throws(OStackError)
        -> WriteResult
    {
        let schema = try schemaIfAvailable(object)
        var base = try store.record(object, id)
        if base == nil && !offline {
            base = try fetchRemote(object, id)
        }
        // Only the changed fields are checked (a required field set to null is caught there).
        if let schema { try FieldValidator(schema: schema).validate(changes, complete: false) }
        guard let base else {
            throw OStackError(.notFound, context: .init(object: object), detail: "no local copy and offline")
        }
        let snapshot = base.data.objectValue ?? [:]
        let updated = snapshot.merging(changes) { _, new in new }
        try store.transaction { () throws(OStackError) in
            try store.putRecord(object, .object(updated), version: base.version)
            let entry = try store.enqueueReporting(
                object: object, recordID: id, operation: .update, payload: changes, baseVersion: base.version,
                baseSnapshot: snapshot)
            if entry.isNew, let entryID = entry.id { ownEntries[id] = entryID }
            try auditHook?(store, "record.update", ["object": object])
        }
        return try pushAfterWrite(object, id, offline: offline, ownEntry: ownEntries[id])
    }

    public func delete(_ object: String, id: String, offline: Bool) throws(OStackError) -> WriteResult {
        var base = try store.record(object, id)
        if base == nil && !offline { base = try fetchRemote(object, id) }
        guard let base else {
            throw OStackError(.notFound, context: .init(object: object), detail: "no local copy and offline")
        }
        try store.transaction { () throws(OStackError) in
            try store.deleteRecord(object, id)
            let entry = try store.enqueueReporting(
                object: object, recordID: id, operation: .delete, payload: nil, baseVersion: base.version,
                baseSnapshot: base.data.objectValue)
            if entry.isNew, let entryID = entry.id { ownEntries[id] = entryID }
            try auditHook?(store, "record.delete", ["object": object])
        }
        var result = try pushAfterWrite(object, id, offline: offline, ownEntry: ownEntries[id])
        result.record = nil
        return result
    }

    /// Pushes at once unless `offline`; reports whether the change is still queued, and why.
    func pushAfterWrite(_ object: String, _ id: String, offline: Bool, ownEntry: String? = nil) throws(OStackError)
        -> WriteResult
    {
        anchorAudit()
        defer { try? writeStateSummary() }
        var result = WriteResult(object: object, id: id, record: nil, queued: true, reason: nil)
        if offline {
            result.record = try store.record(object, id)?.data
            return result
        }
        let report = try withSyncLock { () throws(OStackError) -> SyncEngine.PushReport in try engine().push() }
        let pending = try store.rows(
            "SELECT status, last_error FROM queue WHERE object = ? AND record_id = ? ORDER BY seq LIMIT 1",
            [.text(object), .text(id)]
        ).first
        result.record = try store.record(object, id)?.data
        guard let pending else {
            result.queued = false
            return result
        }
        if let stop = report.stoppedError {
            result.reason = stop
        } else if pending.text("status") == "conflict" {
            result.reason = OStackError(
                .conflict, context: .init(account: account.alias, object: object), detail: "push conflict")
        } else if pending.text("status") == "failed" {
            let error = pending.text("last_error") ?? "failed"
            if error.hasPrefix("validation") {
                // The server refused a change. Only the entry this command added on its own is undone
                // (an older queued change of the record is never dropped by a newer command).
                if let own = ownEntry, let entry = try store.entry(own), entry.status == .failed,
                    try store.integer(
                        "SELECT count(*) FROM queue WHERE object = ? AND record_id = ? AND seq > ?",
                        [.text(object), .text(id), .integer(entry.seq)]) == 0
                {
                    try store.discard(entry)
                } else {
                    throw OStackError(
                        .validation, context: .init(object: object, suggestion: "See `ostack queue list`."),
                        detail: "server validation of an older queued change")
                }
                let fields =
                    error.split(separator: ":").dropFirst().first.map {
                        $0.split(separator: ",").map { String($0).trimmingWhitespace() }
                    } ?? []
                let labels =
                    try schemaIfAvailable(object).map { schema in fields.map { schema.field($0)?.label ?? $0 } }
                    ?? fields
                throw OStackError(
                    .validation, context: .init(object: object, fields: labels), detail: "server validation")
            }
            result.reason = OStackError(
                error == "rate-limited" ? .rateLimited : (error == "not-found" ? .notFound : .serverError),
                context: .init(account: account.alias), detail: "push failed: \(error)")
        }
        return result
    }

    func fetchRemote(_ object: String, _ id: String) throws(OStackError) -> LocalStore.StoredRecord? {
        do {
            let json = try api.call("GET", DataAPI.recordPath(object, id))
            guard let record = json["record"] else { return nil }
            return LocalStore.StoredRecord(
                object: object, id: id, data: record, version: record["updated_at"]?.stringValue)
        } catch let error where error.code == .notFound {
            var error = error
            error.context.object = object
            throw error
        }
    }

    /// A client-chosen record id: lets "did my create arrive?" be answered by id (SPEC §8).
    public static func newRecordID() -> String {
        let alphabet = Array("abcdefghijkmnpqrstuvwxyz23456789".utf8)
        return "r" + String(decoding: SecureRandom.bytes(16).map { alphabet[Int($0) % alphabet.count] }, as: UTF8.self)
    }

    // MARK: Reads

    public enum Source: String, Sendable { case local, remote }

    public struct ListResult: Sendable {
        public var source: Source
        public var records: [JSONValue]
        public var total: Int?
        /// For local reads: when the mirror was last pulled (nil: never), and whether it is tracked.
        public var lastPullAt: Double?
        public var tracked: Bool
    }

    public struct ListRequest: Sendable {
        public var object: String
        public var filter: FilterCondition?
        /// What to send the server as `filter` (the wire form the user gave, or the compiled AST).
        public var wireFilter: JSONValue?
        public var sort: [SortKey] = []
        public var limit: Int?
        public var offset = 0
        public var fields: [String]?
        public var source: Source?

        public init(object: String) { self.object = object }
    }

    public func list(_ request: ListRequest) throws(OStackError) -> ListResult {
        guard ObjectSchema.isIdentifier(request.object) else {
            throw OStackError(.unknownObject, detail: "bad object name")
        }
        var fieldTypes: [String: String] = [:]
        if let schema = try schemaIfAvailable(request.object) {
            let checker = QueryChecker(schema: schema)
            fieldTypes = checker.fieldTypes
            if let filter = request.filter { try checker.check(filter) }
            for key in request.sort { try checker.requireKnown(key.field) }
            for field in request.fields ?? [] { try checker.requireKnown(field) }
        }
        let tracked = try store.isTracked(request.object)
        let source = request.source ?? (tracked ? .local : .remote)
        if source == .local {
            let result = try store.query(
                .init(
                    object: request.object, filter: request.filter, sort: request.sort, limit: request.limit,
                    offset: request.offset, fieldTypes: fieldTypes))
            let records = result.records.compactMap { JSONValue.parse($0) }.map { Self.select($0, request.fields) }
            return ListResult(
                source: .local, records: records, total: result.total,
                lastPullAt: try store.trackState(request.object)?.lastPullAt,
                tracked: tracked)
        }
        var query: [(String, String)] = []
        if let wire = request.wireFilter {
            query.append(("filter", String(decoding: wire.serialized(), as: UTF8.self)))
        }
        if !request.sort.isEmpty { query.append(("sort", request.sort.map(\.wire).joined(separator: ","))) }
        if let limit = request.limit { query.append(("top", String(limit))) }
        if request.offset > 0 { query.append(("skip", String(request.offset))) }
        if let fields = request.fields {
            query.append(("select", (["id"] + fields.filter { $0 != "id" }).joined(separator: ",")))
        }
        let json = try call("GET", DataAPI.objectPath(request.object), query: query, object: request.object)
        guard let records = json["records"]?.arrayValue else {
            throw OStackError(
                .unexpectedResponse, context: .init(host: account.server.authority), detail: "list: no records")
        }
        return ListResult(
            source: .remote, records: records.map { Self.select($0, request.fields) },
            total: json["total"]?.doubleValue.map { Int($0) },
            lastPullAt: nil, tracked: tracked)
    }

    public func get(_ object: String, id: String, source requested: Source?) throws(OStackError) -> (
        record: JSONValue, source: Source
    ) {
        guard ObjectSchema.isIdentifier(object) else { throw OStackError(.unknownObject, detail: "bad object name") }
        let tracked = try store.isTracked(object)
        let local = try store.record(object, id)
        let pending =
            try store.integer(
                "SELECT count(*) FROM queue WHERE object = ? AND record_id = ?", [.text(object), .text(id)]) > 0
        let source = requested ?? ((tracked || pending) ? .local : .remote)
        if source == .local {
            guard let local else {
                throw OStackError(.notFound, context: .init(object: object), detail: "no local record")
            }
            return (local.data, .local)
        }
        let json = try call("GET", DataAPI.recordPath(object, id), object: object)
        guard let record = json["record"] else {
            throw OStackError(
                .unexpectedResponse, context: .init(host: account.server.authority), detail: "get: no record")
        }
        if tracked && !pending { try store.putRecord(object, record, version: record["updated_at"]?.stringValue) }
        return (record, .remote)
    }

    /// After a discard or `--keep theirs`, the mirror's copy may be older than the server's (pulls
    /// skipped it while a change was queued): fetch it again, best effort.
    public func refreshMirror(_ object: String, id: String) {
        guard (try? store.isTracked(object)) == true, (try? hasQueuedChange(object, id: id)) == false else { return }
        do {
            let json = try api.call("GET", DataAPI.recordPath(object, id))
            if let record = json["record"] {
                try store.putRecord(object, record, version: record["updated_at"]?.stringValue)
            }
        } catch  where error.code == .notFound {
            try? store.deleteRecord(object, id)
        } catch {
            return  // offline: the next reconciliation or edit corrects it
        }
    }

    public func hasQueuedChange(_ object: String, id: String) throws(OStackError) -> Bool {
        try store.integer("SELECT count(*) FROM queue WHERE object = ? AND record_id = ?", [.text(object), .text(id)])
            > 0
    }

    func call(_ method: String, _ path: String, query: [(String, String)] = [], object: String) throws(OStackError)
        -> JSONValue
    {
        do {
            return try api.call(method, path, query: query)
        } catch {
            var error = error
            error.context.object = object
            // Field names from the server are shown only as the labels of fields our metadata knows.
            if !error.context.fields.isEmpty {
                let schema = try? metadata.object(object).schema
                error.context.fields = error.context.fields.compactMap { name in schema?.field(name)?.label }
            }
            throw error
        }
    }

    /// Why some of `ids` are still queued after a push (nil: none is): the most serious reason.
    public func queuedReason(_ object: String, ids: [String]) throws(OStackError) -> OStackError? {
        var statuses: [String: String] = [:]
        for row in try store.rows("SELECT record_id, status, last_error FROM queue WHERE object = ?", [.text(object)]) {
            if let id = row.text("record_id"), ids.contains(id) {
                statuses[id] = (row.text("status") ?? "") + "|" + (row.text("last_error") ?? "")
            }
        }
        let values = Array(statuses.values)
        let context = OStackError.Context(account: account.alias, object: object, count: values.count)
        if values.isEmpty { return nil }
        if values.contains(where: { $0.hasPrefix("conflict") }) {
            return OStackError(.conflict, context: context, detail: "bulk: conflict")
        }
        if values.contains(where: { $0.hasPrefix("failed|validation") }) {
            var refused = context
            refused.suggestion = "See `ostack queue list` for the refused records."
            return OStackError(.validation, context: refused, detail: "bulk: refused by the server")
        }
        if values.contains(where: { $0.hasPrefix("failed") }) {
            return OStackError(.serverError, context: context, detail: "bulk: failed")
        }
        return OStackError(.offline, context: context, detail: "bulk: queued")
    }

    static func select(_ record: JSONValue, _ fields: [String]?) -> JSONValue {
        guard let fields, case .object(let members) = record else { return record }
        return .object(members.filter { $0.key == "id" || fields.contains($0.key) })
    }

    // MARK: Sync

    public struct SyncReport: Sendable {
        public var pushed = 0
        public var pulled = 0
        public var deleted = 0
        public var failed = 0
        public var conflicts = 0
        public var merged = 0
        /// Why the account's sync did not complete (offline, signed out, …); nil when it reached the server.
        public var error: OStackError?
        public var ok: Bool { error == nil && failed == 0 && conflicts == 0 }
    }

    public func sync(
        push: Bool = true, pull: Bool = true, reconcile: Bool = false,
        progress: (@Sendable (String, Int) -> Void)? = nil
    ) throws(OStackError) -> SyncReport {
        var report = SyncReport()
        try withSyncLock { () throws(OStackError) in
            var engine = engine()
            engine.progress = progress
            if push {
                let pushed = try engine.push()
                report.pushed = pushed.pushed
                report.merged = pushed.merged
                if let stop = pushed.stoppedError {
                    report.error = stop
                    return
                }
            }
            if pull {
                for object in try store.trackedObjects() {
                    do throws(OStackError) {
                        let pulled = try engine.pull(object, reconcile: reconcile)
                        report.pulled += pulled.pulled
                        report.deleted += pulled.deleted
                    } catch {
                        report.error = error
                        return
                    }
                }
            }
            let counts = try store.counts()
            report.failed = counts.failed
            report.conflicts = counts.conflict
            try store.setValue("sync.last-at", String(store.now))
        }
        recordSync(report, push: push, pull: pull)
        return report
    }

    /// The sync summary (and conflicts it created) in the trail; never fails the sync itself.
    func recordSync(_ report: SyncReport, push: Bool, pull: Bool) {
        var details = [
            "pushed": String(report.pushed), "pulled": String(report.pulled), "failed": String(report.failed),
        ]
        if report.merged > 0 { details["merged"] = String(report.merged) }
        if report.deleted > 0 { details["removed"] = String(report.deleted) }
        if let error = report.error { details["stopped"] = error.code.rawValue }
        let kind = push && pull ? "sync" : (push ? "sync.push" : "sync.pull")
        try? audit.append(kind, outcome: report.error == nil ? "ok" : "failed", details: details)
        if report.conflicts > 0 { try? audit.append("conflict.open", details: ["count": String(report.conflicts)]) }
        anchorAudit()
        try? writeStateSummary()
    }

    /// `state.json` beside the database: queue counts and the last sync, for `status` (which must
    /// work without the keyring and while locked). Counts and a time only — no record content.
    public func writeStateSummary() throws(OStackError) {
        let counts = try store.counts()
        let summary = AccountStateSummary(
            pending: counts.pending, failed: counts.failed, conflict: counts.conflict, lastSyncAt: try lastSyncAt())
        try? summary.write(to: environment.layout.accountDirectory(account.dataDirectory) + "/state.json")
    }

    public func lastSyncAt() throws(OStackError) -> Date? {
        try store.value("sync.last-at").flatMap(Double.init).map { Date(timeIntervalSince1970: $0) }
    }

    /// `sync track OBJECT`: checks the object exists (metadata), starts mirroring it.
    public func track(_ object: String) throws(OStackError) -> ObjectSchema {
        let schema = try metadata.object(object).schema
        try store.track(schema)
        return schema
    }
}

/// The non-secret summary `status` reads without opening the database.
public struct AccountStateSummary: Codable, Sendable, Equatable {
    public var pending: Int
    public var failed: Int
    public var conflict: Int
    public var lastSyncAt: Date?

    public init(pending: Int, failed: Int, conflict: Int, lastSyncAt: Date?) {
        self.pending = pending
        self.failed = failed
        self.conflict = conflict
        self.lastSyncAt = lastSyncAt
    }

    public func write(to path: String) throws {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        try SecureFileSystem.writeAtomically(Array(try encoder.encode(self)), to: path)
    }

    public static func read(_ path: String) -> AccountStateSummary? {
        guard let bytes = try? SecureFileSystem.readFile(path) else { return nil }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return try? decoder.decode(AccountStateSummary.self, from: Data(bytes))
    }
}
