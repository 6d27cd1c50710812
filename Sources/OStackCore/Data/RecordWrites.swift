import SodiumKit

/// Local-first record writes (docs/sync.md, "Records"): each write is one local transaction — the
/// record, its queue entry and the audit entry — then pushed at once unless `offline`. A change the
/// server refused as it stands is undone (only the entry this write added on its own).
public struct RecordWrites {
    let session: AccountSession
    var store: LocalStore { session.store }

    public struct WriteResult: Sendable {
        public var object: String
        public var id: String
        public var record: JSONValue?
        /// Saved locally, not yet on the server.
        public var queued: Bool
        /// Why it is still queued (offline, server error, conflict), when it is.
        public var reason: OStackError?
        /// The server refused this create as it stands and it was undone: nothing of it is kept
        /// (`createMany` only; a single write throws the refusal instead).
        public var refusal: OStackError? = nil
        /// Older queued changes of other records that this write's push sent and that failed or
        /// met a conflict: not this write's failure, but said (a warning), not left to `status`.
        public var olderFailure: OStackError? = nil
    }

    public func create(_ object: String, data: [String: JSONValue], offline: Bool) throws(OStackError) -> WriteResult {
        let created = try createLocally(object, [data])
        return try pushAfterWrite(object, created[0].id, offline: offline, ownEntry: created[0].ownEntry)
    }

    /// Several creates in one local transaction (`--data` with a JSON array); all are checked first,
    /// so an invalid one saves none. Pushed at once unless `offline`. A row the server refused as it
    /// stands is undone, like a single create, and reported in its `refusal`: the command says which
    /// rows were created and which were not, so nothing is created twice by running it again.
    /// `reason` says why some are still queued (nil when none is, or when `offline` asked for it).
    public func createMany(_ object: String, data: [[String: JSONValue]], offline: Bool) throws(OStackError)
        -> (results: [WriteResult], reason: OStackError?)
    {
        let created = try createLocally(object, data)
        if offline {
            session.didChange()
            var results: [WriteResult] = []
            for row in created {
                results.append(
                    WriteResult(
                        object: object, id: row.id, record: try store.record(object, row.id)?.data, queued: true))
            }
            return (results, nil)
        }
        session.audit.anchor()  // the head as committed; written to the keyring while the push runs
        // After the refused rows are undone: `status` reads what is left queued.
        defer { try? session.writeStateSummary() }
        let stopped: OStackError?
        switch try pushNow() {
        case .ran(let error): stopped = error
        case .notStarted(let error): stopped = error
        }
        // Every row is settled and reported even when the store fails part-way (a row it cannot read
        // is reported queued): the rows created must be named, or running the command again would
        // create them twice.
        lazy var schema = try? session.schemaIfAvailable(object)  // labels, once, only for a refusal
        var results: [WriteResult] = []
        for row in created {
            var result = WriteResult(object: object, id: row.id, record: nil, queued: true)
            do throws(OStackError) {
                // The row's own entry decides a refusal (its id may since be another record's alias).
                if let own = row.ownEntry, let entry = try store.entry(own.id), entry.status == .failed,
                    let failure = entry.failure, failure.isRefusal,
                    try store.discardIfLatest(own.id, payload: own.payload)
                {
                    let labels = schema
                    result.queued = false
                    result.refusal = failure.userError(account: nil, object: object) { labels?.field($0)?.label ?? $0 }
                    results.append(result)
                    continue
                }
                // A server that assigned its own id: the record, and what the command prints, follow it.
                result.id = try store.currentID(object, row.id)
                result.queued = try store.firstEntry(object, recordID: result.id) != nil
                result.record = try store.record(object, result.id)?.data
            } catch {
                result.queued = true
            }
            results.append(result)
        }
        let stillQueued = results.filter(\.queued).map(\.id)
        var reason = stopped
        if stillQueued.isEmpty {
            reason = nil
        } else if reason == nil {
            reason = (try? queuedReason(object, ids: stillQueued)) ?? nil
        }
        return (results, reason)
    }

    /// `records import`: saves and queues creates in one transaction, without pushing and without
    /// reading each record back (the caller pushes once at the end). The rows are not validated here
    /// again: the import checks every row against the object's metadata before it queues any.
    /// Returns how many were queued.
    @discardableResult
    public func queueCreates(_ object: String, _ items: [[String: JSONValue]]) throws(OStackError) -> Int {
        try createLocally(object, items, validate: false).count
    }

    /// Of `ids`, those whose record is already here, also under the id a server gave it instead (an
    /// adopted id: the record was created from this one; one query per 500 for each).
    /// On one snapshot: another process's merge committed between reading the levels and probing
    /// them would hide records that are here.
    public func existing(_ object: String, ids: [String]) throws(OStackError) -> Set<String> {
        try store.reading { () throws(OStackError) -> Set<String> in
            let found = Set(try store.index.current(object, Set(ids), in: try store.index.levels(object)).keys)
            return found.union(try store.adoptedIDs(object, among: ids))
        }
    }

    /// Validates, then saves records and queues their creates; returns each id with the queue entry
    /// the create added on its own (nil when it was merged into an older one).
    /// The queue entry a command added on its own, with the payload it queued: a refusal undoes it
    /// only while it still holds just that (another command's update may have merged into it).
    typealias OwnEntry = (id: String, payload: [String: JSONValue]?)

    func createLocally(_ object: String, _ items: [[String: JSONValue]], validate: Bool = true) throws(OStackError)
        -> [(id: String, ownEntry: OwnEntry?)]
    {
        guard ObjectSchema.isIdentifier(object) else { throw OStackError(.unknownObject, detail: "bad object name") }
        if validate, let schema = try session.schemaIfAvailable(object) {
            let validator = FieldValidator(schema: schema)
            for data in items { try validator.validate(data, complete: true) }
        }
        var created: [(id: String, ownEntry: OwnEntry?)] = []
        var ids = Set<String>()
        try store.transaction { () throws(OStackError) in
            // Inside the transaction: the writer's indexed fields are the ones this transaction sees.
            // The records are written together, as one level of the mirror's maps when they are many.
            let bulk = try store.bulkWriter(for: object, supersedes: false)
            // Given ids already here (each looked up in every level: for many, one read per level).
            let here = try store.index.current(
                object, Set(items.compactMap { $0["id"]?.stringValue }), in: try store.index.levels(object))
            for data in items {
                var record = data
                let given = data["id"]?.stringValue
                let id = given ?? Self.newRecordID()
                record["id"] = .string(id)
                // A given id that is already here is not a create (it would overwrite the local copy).
                // (An id made here is 16 random characters: not looked up.)
                let json = JSONValue.object(record).serialized()
                func refused(_ suggestion: Wording, _ detail: String) -> OStackError {
                    OStackError(
                        .validation, context: .init(object: object, fields: ["id"], suggestion: suggestion),
                        detail: detail)
                }
                // An id is a segment of the record's URL: `.` and `..` are dot segments that
                // libcurl folds away (a delete of `.` went to the collection), and an empty one names
                // nothing; one that is not a string was replaced by a made-up id without a word.
                if let raw = data["id"], given == nil || ["", ".", ".."].contains(given!) {
                    throw refused(
                        raw.stringValue == nil
                            ? "An id must be a string. Nothing was saved."
                            : "An id cannot be empty, '.' or '..': it is part of the record's address. Nothing was saved.",
                        "create: unusable id")
                }
                // An id the server's answer could never confirm (more than 255 characters, a control
                // character: `PushClassifier.isUsableID`) stayed unconfirmed for good; a very long one
                // also made every address of the record longer than servers take.
                if let given, !PushClassifier.isUsableID(given) {
                    throw refused(
                        "An id has 1 to 255 characters, none of them a control character. Nothing was saved.",
                        "create: id too long or with controls")
                }
                guard ids.insert(id).inserted else {
                    throw refused(
                        "Two rows have the id '\(String(id.prefix(64)))': each record needs its own. Nothing was saved.",
                        "create: the same id twice")
                }
                guard given.map({ here[$0] == nil }) ?? true else {
                    throw refused(
                        "A record with this id exists; use \(command: .recordsUpdate).", "create with an existing id")
                }
                try bulk.append(id: id, json: json, version: nil)
                let entry = try store.enqueueReporting(
                    object: object, recordID: id, operation: .create, payload: record, baseVersion: nil,
                    baseSnapshot: nil, serializedPayload: json)
                created.append((id, entry.isNew ? entry.id.map { ($0, record) } : nil))
            }
            try bulk.finish()
            try session.audit.append("record.create", details: ["object": object, "count": String(items.count)])
        }
        return created
    }

    public func update(_ object: String, id: String, changes: [String: JSONValue], offline: Bool) throws(OStackError)
        -> WriteResult
    {
        let id = try store.currentID(object, id)
        // A record keeps its id: an update naming another would store a copy under it here.
        if let given = changes["id"], given != .string(id) {
            throw OStackError(
                .validation,
                context: .init(object: object, fields: ["id"], suggestion: "A record's id cannot be changed."),
                detail: "update changes the id")
        }
        let schema = try session.schemaIfAvailable(object)
        // Only the changed fields are checked (a required field set to null is caught there).
        if let schema { try FieldValidator(schema: schema).validate(changes, complete: false) }
        let base = try baseRecord(object, id, offline: offline)
        FailPoint.hit("record-write.before-transaction")
        var own: OwnEntry?
        var written = id
        try store.transaction { () throws(OStackError) in
            // The record as it is now, inside the write transaction: another process may have
            // changed it (a write, a pull), or renamed it to the id its server assigned, since the
            // reads above, which only decided that it exists.
            let (now, current) = try current(object, id, else: base)
            written = now
            let snapshot = current.data.objectValue ?? [:]
            let updated = snapshot.merging(changes) { _, new in new }
            try store.putRecord(object, .object(updated), version: current.version)
            let entry = try store.enqueueReporting(
                object: object, recordID: now, operation: .update, payload: changes, baseVersion: current.version,
                baseSnapshot: snapshot)
            own = entry.isNew ? entry.id.map { ($0, changes) } : nil
            try session.audit.append("record.update", details: ["object": object])
        }
        return try pushAfterWrite(object, written, offline: offline, ownEntry: own)
    }

    /// The record an update or a delete starts from: the local copy, else the server's (not
    /// offline). Not found, and nothing sent, when the record's deletion is queued here (its changes
    /// would go out after the delete and fail, while the local copy came back), and when there is no
    /// copy to start from — offline, or the server out of reach: saying so, for an object whose
    /// records are kept here only once tracked, instead of a hint about queued changes.
    private func baseRecord(_ object: String, _ id: String, offline: Bool) throws(OStackError)
        -> LocalStore.StoredRecord
    {
        func notFound(_ suggestion: Wording?, _ detail: String) -> OStackError {
            var context = OStackError.Context(object: object, suggestion: suggestion)
            context.recordIDs = [id]
            return OStackError(.notFound, context: context, detail: detail)
        }
        if let local = try store.record(object, id) { return local }
        // Renamed meanwhile by another process (a server-assigned id): the record under its new id.
        let renamed = try store.currentID(object, id)
        if renamed != id, let local = try store.record(object, renamed) { return local }
        if try store.hasQueuedChange(object, recordID: id) {
            throw notFound(
                "Its deletion is queued here; \(command: .queueDiscard) of that change brings it back.", "deleted here")
        }
        let untracked = try !store.isTracked(object)
        let track: Wording =
            untracked
            ? " \(object) is not tracked, so its records are read from the server; \(command: .syncTrack(object: object)) keeps them here."
            : ""
        if offline {
            throw notFound("There is no copy of it here to change offline.\(track)", "no local copy and offline")
        }
        let remote: LocalStore.StoredRecord?
        do {
            remote = try session.reads.fetchRemote(object, id)
        } catch  where error.code == .unknownObject && error.context.object == nil {
            var error = error
            error.context.object = object  // named: "Unknown object 'tsak'."
            throw error
        } catch  where error.code == .notFound && error.context.recordIDs.isEmpty && error.context.count == nil {
            throw notFound(nil, "not on the server")  // named, with where to look
        } catch  where [.offline, .timeout].contains(error.code) && untracked && error.context.suggestion == nil {
            var error = error
            error.context.suggestion = "Nothing was saved: the record must be read from the server first.\(track)"
            throw error
        }
        guard let remote else { throw notFound(nil, "not on the server") }
        return remote
    }

    /// The record's current id and local copy, read inside the write transaction; `fetched` (the
    /// server's copy, or the local one read before) when there is no local copy.
    private func current(_ object: String, _ id: String, else fetched: LocalStore.StoredRecord) throws(OStackError)
        -> (String, LocalStore.StoredRecord)
    {
        let now = try store.currentID(object, id)
        return (now, try store.record(object, now) ?? fetched)
    }

    public func delete(_ object: String, id: String, offline: Bool) throws(OStackError) -> WriteResult {
        let id = try store.currentID(object, id)
        let base = try baseRecord(object, id, offline: offline)
        FailPoint.hit("record-write.before-transaction")
        var own: OwnEntry?
        var written = id
        try store.transaction { () throws(OStackError) in
            let (now, current) = try current(object, id, else: base)  // as `update`
            written = now
            try store.deleteRecord(object, now)
            let entry = try store.enqueueReporting(
                object: object, recordID: now, operation: .delete, payload: nil, baseVersion: current.version,
                baseSnapshot: current.data.objectValue)
            own = entry.isNew ? entry.id.map { ($0, nil) } : nil
            try session.audit.append("record.delete", details: ["object": object])
        }
        var result = try pushAfterWrite(object, written, offline: offline, ownEntry: own)
        result.record = nil
        return result
    }

    /// Pushes at once unless `offline`; reports whether the change is still queued, and why.
    func pushAfterWrite(_ object: String, _ id: String, offline: Bool, ownEntry: OwnEntry?) throws(OStackError)
        -> WriteResult
    {
        session.audit.anchor()  // the head as committed; written to the keyring while the push runs
        // At the end, after a refused change is undone: `status` reads what is left queued.
        defer { try? session.writeStateSummary() }
        var result = WriteResult(object: object, id: id, record: nil, queued: true, reason: nil)
        if offline {
            result.record = try store.record(object, id)?.data
            return result
        }
        let troubled: [QueueEntry.Status] = [.failed, .conflict]
        let troubledBefore = Set(try store.entries(statuses: troubled).map(\.id))
        let stopped: OStackError?
        switch try pushNow() {
        case .ran(let error): stopped = error
        case .notStarted(let error):
            result.record = try? store.record(object, id)?.data
            result.reason = error
            return result
        }
        // A server that assigned its own id: the record, and what the command prints, follow it.
        let id = try store.currentID(object, id)
        result.id = id
        // A taken id is no failure yet (the next round looks the create up): not reported.
        let older = try store.entries(statuses: troubled).filter {
            !troubledBefore.contains($0.id) && !($0.object == object && $0.recordID == id) && $0.failure != .idTaken
        }
        if let first = older.first {
            var context = OStackError.Context(account: session.account.alias, object: first.object, count: older.count)
            context.recordIDs = [first.recordID]
            if older.allSatisfy({ $0.status == .conflict }) { context.suggestion = .run(.conflictsList) }
            result.olderFailure = OStackError(.olderChangeFailed, context: context, detail: "older change failed")
        }
        let pending = try store.firstEntry(object, recordID: id)
        result.record = try store.record(object, id)?.data
        guard let pending else {
            result.queued = false
            return result
        }
        if let stopped {
            result.reason = stopped
        } else if pending.status == .conflict {
            result.reason = OStackError(
                .conflict, context: .init(account: session.account.alias, object: object), detail: "push conflict")
        } else if pending.status == .failed {
            let failure = pending.failure ?? .unexpected(status: 0, code: nil)
            if failure == .restricted, ownEntry == nil {
                // The deletion joined a change queued before it (an offline edit): undoing it would
                // drop that edit too, so it stays queued, failed, and the record stays deleted here.
                var context = OStackError.Context(object: object)
                context.suggestion =
                    "It joined a change queued here before it and stays queued: \(command: .queueList) shows it; \(command: .queueDiscard) of it brings back the server's copy."
                throw OStackError(.deleteRestricted, context: context, detail: "restricted, joined an earlier change")
            }
            if failure.isRefusal {
                try undoRefused(pending, ownEntry: ownEntry, object: object)
                let schema = try session.schemaIfAvailable(object)
                throw failure.userError(account: nil, object: object) { schema?.field($0)?.label ?? $0 }
            }
            result.reason = failure.userError(account: session.account.alias, object: nil)
        }
        return result
    }

    enum PushOutcome {
        /// The push ran; why it stopped early (offline, signed out, …), nil when it ran to its end.
        case ran(stopped: OStackError?)
        /// It could not even start (the sync lock, the store refusing).
        case notStarted(OStackError)
    }

    /// Pushes the account's queue now (the write is committed and queued already). The caller
    /// anchors the trail before and writes `status`'s summary after it has settled the outcome.
    private func pushNow() throws(OStackError) -> PushOutcome {
        // A push that cannot even start is a reason the change is still queued, not a failed
        // command: a script that retried a failed create would create it twice.
        do {
            return .ran(
                stopped: try session.withSyncLock { () throws(OStackError) -> PushReport in try session.engine().push()
                }
                .stoppedError)
        } catch  where [.storageFailure, .storageFull, .unsafeStorage].contains(error.code) {
            return .notStarted(error)
        }
    }

    /// The server refused a change as it stands: only the entry this command added on its own is
    /// undone (an older queued change of the record is never dropped by a newer command).
    /// Decided and done in one transaction (`discardIfLatest`): another process may queue a change
    /// of the same record on top of this one until the moment it is dropped.
    func undoRefused(_ pending: QueueEntry, ownEntry: OwnEntry?, object: String) throws(OStackError) {
        guard let own = ownEntry, try store.discardIfLatest(own.id, payload: own.payload) else {
            throw OStackError(
                .validation, context: .init(object: object, suggestion: .see(.queueList)),
                detail: "server validation of an older queued change")
        }
    }

    /// Why some of `ids` are still queued after a push (nil: none is): the most serious reason.
    public func queuedReason(_ object: String, ids: [String]) throws(OStackError) -> OStackError? {
        let entries = try store.entries(object, recordIDs: ids)
        if entries.isEmpty { return nil }
        let records = Set(entries.map(\.recordID)).count
        let context = OStackError.Context(account: session.account.alias, object: object, count: records)
        if entries.contains(where: { $0.status == .conflict }) {
            return OStackError(.conflict, context: context, detail: "bulk: conflict")
        }
        let failed = entries.filter { $0.status == .failed }
        if failed.contains(where: { $0.failure?.isRefusal == true }) {
            var refused = context
            refused.suggestion = "See \(command: .queueList) for the refused records."
            return OStackError(.validation, context: refused, detail: "bulk: refused by the server")
        }
        if !failed.isEmpty { return OStackError(.serverError, context: context, detail: "bulk: failed") }
        return OStackError(.offline, context: context, detail: "bulk: queued")
    }

    /// A client-chosen record id: lets "did my create arrive?" be answered by id (docs/sync.md).
    public static func newRecordID() -> String {
        RandomID.make(prefix: "r", count: 16, alphabet: "abcdefghijkmnpqrstuvwxyz23456789")
    }
}

extension RecordWrites {
    /// The id `records import --key FIELD` gives a row: the same object, field and value always give
    /// the same id (so a second run of the same import finds its records instead of duplicating
    /// them); 16 characters of the URL-safe alphabet, like ObjectStack's own ids.
    public static func importID(object: String, key: String, value: String) -> String {
        let digest = BLAKE2b.hash(Array("ostack-import\u{0}\(object)\u{0}\(key)\u{0}\(value)".utf8), length: 16)
        return String(decoding: digest.map { idAlphabet[Int($0) & 63] }, as: UTF8.self)
    }

    private static let idAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-".utf8)
}
