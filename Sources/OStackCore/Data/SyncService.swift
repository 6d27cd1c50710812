import FoundationEssentials

/// Sync, tracking, the queue and conflicts of one account (docs/sync.md): what `sync`, `queue` and
/// `conflicts` do, each a single call the command renders.
public struct SyncService {
    let session: AccountSession
    var store: LocalStore { session.store }

    public struct Report: Sendable {
        public var pushed = 0
        public var pulled = 0
        public var deleted = 0
        public var failed = 0
        public var conflicts = 0
        public var merged = 0
        /// Failed entries whose records the server does not have.
        public var gone = 0
        /// Failed entries the server refused as they stand (validation, a taken unique value).
        public var refused = 0
        /// The failure every other failed entry shares (neither refused nor gone), when they share one.
        public var commonFailure: PushFailure?
        /// Pulled records that could not be stored, by object (ids; nil when unusable).
        public var rejected: [(object: String, id: String?)] = []
        /// Why the account's sync did not complete (offline, signed out, …); nil when it reached the server.
        public var error: OStackError?
        public var ok: Bool { error == nil && failed == 0 && conflicts == 0 && rejected.isEmpty }
        /// Nothing moved and nothing is wrong.
        public var isIdle: Bool { ok && pushed == 0 && pulled == 0 && deleted == 0 && merged == 0 }

        /// The error a command exits with for this account: why it stopped, else its conflicts, else
        /// its failed changes; nil when it synced cleanly.
        public func exitError(account: String) -> OStackError? {
            if let error { return error }
            if conflicts > 0 {
                return OStackError(.conflict, context: .init(account: account), detail: "sync conflicts")
            }
            if failed > 0 {
                if gone == failed {
                    // Not a server problem: the records were deleted there (docs/sync.md, "Push").
                    return OStackError(
                        .notFound, context: .init(account: account, count: failed, suggestion: .see(.queueList)),
                        detail: "failed entries: records gone")
                }
                // A refusal needs the user (fix or discard the change); any other failure is the
                // server's, retried later: that one is named while there is one.
                if refused > 0 && refused + gone == failed {
                    return OStackError(
                        .refused, context: .init(account: account, count: refused),
                        detail: "failed entries: refused")
                }
                // The failure itself when they all share one (`forbidden` 8, a response ostack does not
                // understand, a rate limit with its wait); else "the server had a problem".
                if let common = commonFailure {
                    var error = common.userError(account: account, object: nil)
                    error.context.count = failed
                    return error
                }
                return OStackError(
                    .serverError, context: .init(account: account, count: failed), detail: "failed entries")
            }
            if let first = rejected.first {
                var context = OStackError.Context(account: account, object: first.object, count: rejected.count)
                context.recordIDs = rejected.compactMap(\.id)
                return OStackError(.rejectedRecords, context: context, detail: "pull: records not stored")
            }
            return nil
        }
    }

    /// `auditIdle: false` (`sync --watch`): a cycle that changed nothing and met no problem writes
    /// no audit event (a watch would otherwise write one per cycle).
    public func sync(
        push: Bool = true, pull: Bool = true, reconcile: Bool = false, auditIdle: Bool = true,
        progress: (@Sendable (SyncProgress) -> Void)? = nil, feed: PushFeed? = nil
    ) throws(OStackError) -> Report {
        var report = Report()
        try session.withSyncLock { () throws(OStackError) in
            var engine = session.engine()
            engine.progress = progress
            // Cleared when the sync completes: a sync that was interrupted (Ctrl-C, a crash) leaves it,
            // and `sync status` says the last sync is partial.
            try store.setValue("sync.started-at", String(store.now))
            if push {
                let pushed = try engine.push(feed: feed)
                report.pushed = pushed.pushed
                report.merged = pushed.merged
                if let stop = pushed.stoppedError {
                    report.error = stop
                    return
                }
            }
            if pull {
                for object in try store.trackedObjects() {
                    session.reads.refetchRemembered(object)  // copies a discard could not refresh
                    do throws(OStackError) {
                        let pulled = try engine.pull(object, reconcile: reconcile)
                        report.pulled += pulled.pulled
                        report.deleted += pulled.deleted
                        report.rejected += pulled.rejected.map { (object, $0) }
                    } catch {
                        report.error = error
                        return
                    }
                }
            }
            let counts = try store.counts()
            report.failed = counts.failed
            if counts.failed > 0 {
                let failed = try store.entries(statuses: [.failed])
                report.gone = failed.filter { $0.failure == .notFound }.count
                report.refused = failed.filter { $0.failure?.isRefusal == true }.count
                let others = failed.compactMap(\.failure).filter { !$0.isRefusal && $0 != .notFound }
                if let first = others.first, others.allSatisfy({ $0.summary == first.summary }),
                    others.count == failed.count - report.refused - report.gone
                {
                    report.commonFailure = first
                }
            }
            report.conflicts = counts.conflict
            try store.transaction { () throws(OStackError) in
                try store.setValue("sync.last-at", String(store.now))
                try store.removeValue("sync.started-at")
            }
        }
        if auditIdle || !report.isIdle { record(report, push: push, pull: pull) }
        return report
    }

    /// The sync summary (and conflicts it created) in the trail; never fails the sync itself.
    func record(_ report: Report, push: Bool, pull: Bool) {
        var details = [
            "pushed": String(report.pushed), "pulled": String(report.pulled), "failed": String(report.failed),
        ]
        if report.merged > 0 { details["merged"] = String(report.merged) }
        if report.deleted > 0 { details["removed"] = String(report.deleted) }
        if !report.rejected.isEmpty { details["rejected"] = String(report.rejected.count) }
        if let error = report.error { details["stopped"] = error.code.rawValue }
        let kind = push && pull ? "sync" : (push ? "sync.push" : "sync.pull")
        if report.conflicts > 0 { details["conflicts"] = String(report.conflicts) }
        // `ok` only for a clean sync (the command exits 0); one that ran through but left changes
        // failed, in conflict or not stored is `incomplete`; one that stopped is `failed`.
        let outcome = report.error != nil ? "failed" : (report.ok ? "ok" : "incomplete")
        try? session.audit.append(kind, outcome: outcome, details: details)
        if report.conflicts > 0 {
            try? session.audit.append("conflict.open", details: ["count": String(report.conflicts)])
        }
        session.didChange()
    }

    // MARK: Tracking

    /// `sync track OBJECT`: checks the object exists (metadata), starts mirroring it.
    public func track(_ object: String) throws(OStackError) -> ObjectSchema {
        let schema = try session.metadata.object(object).schema
        try store.track(schema)
        return schema
    }

    /// `sync untrack OBJECT`: the mirror is dropped; records with queued changes are kept.
    public func untrack(_ object: String) throws(OStackError) {
        try store.untrack(object)
    }

    public struct Status: Sendable {
        public struct Object: Sendable, Encodable {
            public var name: String
            public var records: Int
            public var lastPullAt: Date?
        }

        public var objects: [Object]
        public var queue: LocalStore.QueueCounts
        public var lastSyncAt: Date?
        /// When a sync started that did not complete (interrupted or failed part-way), if it is later
        /// than the last complete one: what it pulled is kept, the rest comes with the next sync.
        public var partialSyncAt: Date?
    }

    /// `sync status`: tracked objects, the queue, the last sync.
    public func status() throws(OStackError) -> Status {
        let objects = try store.trackedObjects().map { (name) throws(OStackError) -> Status.Object in
            Status.Object(
                name: name, records: try store.recordCount(name),
                lastPullAt: try store.trackState(name)?.lastPullAt.map { Date(timeIntervalSince1970: $0) })
        }
        let started = try store.value("sync.started-at").flatMap(Double.init).map { Date(timeIntervalSince1970: $0) }
        return Status(
            objects: objects, queue: try store.counts(), lastSyncAt: try session.lastSyncAt(), partialSyncAt: started)
    }

    // MARK: The queue

    public func queue() throws(OStackError) -> [QueueEntry] { try store.entries() }

    /// An id that names no queued change, named in the hint (the message alone said "Not found.").
    static func noEntry(_ id: String) -> OStackError {
        OStackError(
            .notFound, context: .init(suggestion: "No queued change has the id '\(id)'. \(Wording.see(.queueList))"),
            detail: "no such queue entry")
    }

    /// `queue retry [ID…]`: failed entries become due now; returns how many.
    public func retry(ids: [String]?) throws(OStackError) -> Int {
        // An id that names no entry is an error, not "0 entries will be retried".
        for id in ids ?? [] where try store.entry(id) == nil { throw Self.noEntry(id) }
        let count = try store.retry(ids: ids)
        try? session.writeStateSummary()
        return count
    }

    /// `queue discard ID`: drops the change (and later ones of its record) and restores the record
    /// as the server last had it. Under the sync lock, so no push is sending it at that moment.
    public func discard(_ id: String) throws(OStackError) {
        guard let entry = try store.entry(id) else { throw Self.noEntry(id) }
        try session.withSyncLock { () throws(OStackError) in
            // The event in the same transaction as the change it records (docs/audit.md): a
            // `kill -9` leaves both or neither.
            try store.transaction { () throws(OStackError) in
                guard let current = try store.entry(id), current.status != .inProgress else {
                    throw OStackError(
                        .notFound,
                        context: .init(
                            suggestion: "It is gone, or a sync is sending it now: see \(command: .queueList)."),
                        detail: "entry gone or being pushed")
                }
                try store.discard(current)
                FailPoint.hit("queue-discard.before-event")
                try session.audit.append(
                    "queue.discard", details: ["object": entry.object, "operation": entry.operation.rawValue])
            }
        }
        session.reads.refreshMirror(entry.object, id: entry.recordID)
        session.didChange()
    }

    // MARK: Conflicts

    public func conflicts() throws(OStackError) -> [Conflict] {
        try store.entries(statuses: [.conflict]).map(Conflict.init)
    }

    public func conflict(_ id: String) throws(OStackError) -> Conflict {
        guard let entry = try store.entry(id), entry.status == .conflict else {
            throw OStackError(.notFound, context: .init(suggestion: .see(.conflictsList)), detail: "no such conflict")
        }
        return Conflict(entry)
    }

    /// `conflicts resolve ID --keep mine|theirs`. Mine is pushed at once: the answer says whether it
    /// is still queued, and why (`error`: what stopped the push, or the change's own new conflict or
    /// failure), which the command reports after the resolution itself. Theirs drops the change and
    /// every later change of the record queued behind it (they were made on top of it): `dropped`
    /// counts those later ones, so the command can say so.
    public struct Resolution: Sendable {
        public var queued: Bool
        public var error: OStackError?
        public var dropped: Int
    }

    public func resolve(_ id: String, keepMine: Bool) throws(OStackError) -> Resolution {
        let entry = try store.entry(id)
        guard let entry, entry.status == .conflict else {
            throw OStackError(.notFound, context: .init(suggestion: .see(.conflictsList)), detail: "no such conflict")
        }
        var dropped = 0
        try session.withSyncLock { () throws(OStackError) in
            // Made before the transaction: it may ask the server for its discovery document, which
            // must not happen while the database's write lock is held.
            let engine = session.engine()
            try store.transaction { () throws(OStackError) in  // with its event, as `discard`
                guard let current = try store.entry(id), current.status == .conflict else {
                    throw OStackError(
                        .notFound, context: .init(suggestion: .see(.conflictsList)), detail: "no such conflict")
                }
                if !keepMine { dropped = try store.laterEntryCount(current) }
                try engine.resolve(current, keepMine: keepMine)
                try session.audit.append(
                    "conflict.resolved", details: ["object": entry.object, "keep": keepMine ? "mine" : "theirs"])
            }
        }
        if !keepMine { session.reads.refreshMirror(entry.object, id: entry.recordID) }
        session.didChange()
        guard keepMine else { return Resolution(queued: false, error: nil, dropped: dropped) }
        let report = try sync(push: true, pull: false)
        guard let left = try store.entry(id) else { return Resolution(queued: false, error: report.error, dropped: 0) }
        if let stop = report.error { return Resolution(queued: true, error: stop, dropped: 0) }
        // Sent and answered, but not taken: the exit says so (it was 0 whatever happened).
        switch left.status {
        case .conflict:
            return Resolution(
                queued: true,
                error: OStackError(
                    .conflict, context: .init(account: session.account.alias, object: entry.object),
                    detail: "resolved change in conflict again"),
                dropped: 0)
        case .failed:
            let failure = left.failure ?? .unexpected(status: 0, code: nil)
            return Resolution(
                queued: true, error: failure.userError(account: session.account.alias, object: nil), dropped: 0)
        default:
            return Resolution(queued: true, error: nil, dropped: 0)
        }
    }
}

/// A conflict as the user reviews it: per field, the base the change was made on, mine and theirs.
public struct Conflict: Sendable {
    public struct Field: Sendable {
        public var name: String
        public var base: JSONValue?
        public var mine: JSONValue?
        public var theirs: JSONValue?
    }

    public var id: String
    public var object: String
    public var recordID: String
    public var operation: QueueEntry.Operation
    public var fields: [Field]

    init(_ entry: QueueEntry) {
        let base = entry.baseSnapshot ?? [:]
        let theirs = entry.theirs ?? [:]
        let mine = entry.operation == .delete ? [:] : (entry.payload ?? [:])
        let merge = ThreeWayMerge(base: base, mine: mine, theirs: theirs)
        let names = Set(merge.localChanges.keys).union(merge.remoteChanges).sorted()
        id = entry.id
        object = entry.object
        recordID = entry.recordID
        operation = entry.operation
        fields = names.map { name in
            Field(
                name: name, base: base[name], mine: entry.operation == .delete ? nil : (mine[name] ?? base[name]),
                theirs: theirs[name])
        }
    }
}
