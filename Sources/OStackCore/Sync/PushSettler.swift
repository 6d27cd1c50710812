/// Applies `PushVerdict`s to the queued changes they answer (docs/sync.md, "Push"): completes,
/// fails, releases or hands conflicts to the `ConflictResolver`. Called inside the transaction that
/// records a request's outcome.
struct PushSettler {
    let store: LocalStore
    let resolver: ConflictResolver
    /// Rows an import still has to queue (their ids are taken, like those of records here).
    var feed: PushFeed?

    init(store: LocalStore, feed: PushFeed? = nil) {
        self.store = store
        self.feed = feed
        resolver = ConflictResolver(store: store)
    }

    /// The verdict on a whole chunk (a single request, or a batch answered as a whole).
    func settle(_ chunk: [QueueEntry], _ verdict: PushVerdict, _ report: inout PushReport) throws(OStackError) {
        switch verdict {
        case .deliveredAll(let records):
            // Ours in our order, or all the server's (`PushClassifier.acknowledged`): the first tells.
            if let first = chunk.first, records.first?["id"]?.stringValue == first.recordID {
                try CreateVerifier.learnServerKeepsIDs(store)
            }
            for (index, entry) in chunk.enumerated() {
                if try adoptCreated(entry, records.indices.contains(index) ? records[index] : nil) {
                    report.pushed += 1
                } else {
                    report.unconfirmed += 1
                }
            }
        case .perRow(let results):
            for (index, entry) in chunk.enumerated() {
                let result =
                    results.first { $0["index"]?.intValue == index }
                    ?? results.first { $0["id"]?.stringValue == entry.recordID }
                try settle(
                    entry, PushClassifier.classifyRow(result, id: entry.recordID, operation: entry.operation), &report)
            }
        case .batchTooLarge(let max):
            // Learn the cap (kept for this account) and send again in smaller batches.
            let cap = Swift.max(1, Swift.min(chunk.count - 1, max ?? chunk.count / 2))
            try store.setValue("sync.batch-cap", String(cap))
            for entry in chunk { try store.release(entry, delivered: false) }
        case .refusedRow(let index, let rowVerdict):
            // A batch refused because of one row (createMany is all-or-nothing): settle that row,
            // release the rest untried.
            for (position, entry) in chunk.enumerated() where position != index {
                try store.release(entry, delivered: false)
            }
            try settle(chunk[index], rowVerdict, &report)
        default:
            for entry in chunk { try settle(entry, verdict, &report) }
        }
    }

    /// The verdict on one queued change.
    func settle(_ entry: QueueEntry, _ verdict: PushVerdict, _ report: inout PushReport) throws(OStackError) {
        switch verdict {
        case .delivered(let record):
            if entry.operation == .create {
                if record?["id"]?.stringValue == entry.recordID { try CreateVerifier.learnServerKeepsIDs(store) }
                guard try adoptCreated(entry, record) else {
                    report.unconfirmed += 1
                    return
                }
            } else {
                try store.complete(entry, serverRecord: entry.operation == .delete ? nil : record)
            }
            report.pushed += 1
        case .alreadyGone:
            try store.complete(entry, serverRecord: nil)
            report.pushed += 1
        case .concurrent(let theirs, let version):
            try resolver.resolveConcurrent(entry, theirs: theirs, version: version, &report)
        case .failed(let failure):
            try store.fail(entry, failure)
            // A taken id is not a failure yet: the next round looks it up.
            if failure != .idTaken { report.failed += 1 }
            if case .unconfirmed = failure { report.unconfirmed += 1 }
        case .notAttempted(let possiblyDelivered):
            try store.release(entry, delivered: possiblyDelivered)
        case .stop:
            // Handled for the whole chunk by the pusher; a row alone is simply left pending.
            try store.release(entry, delivered: false)
        case .lookUp:
            try store.fail(entry, .idTaken)
        case .deliveredAll, .perRow, .batchTooLarge, .refusedRow:
            try settle([entry], verdict, &report)
        }
    }

    /// A create's server answer: the record as stored (a server that ignored our id gets its id
    /// adopted, and the account remembers that its server assigns ids). An assigned id that another
    /// local record already has is no proof of this create: it stays queued as unconfirmed.
    /// Returns whether the create was taken as delivered.
    @discardableResult
    func adoptCreated(_ entry: QueueEntry, _ record: JSONValue?) throws(OStackError) -> Bool {
        if let serverID = record?["id"]?.stringValue, serverID != entry.recordID {
            if try PushFeed.isTaken(entry.object, serverID, store: store, feed: feed) {
                try store.fail(entry, .unconfirmed(status: 200))
                return false
            }
            try store.setValue(CreateVerifier.assignsIDsKey, "1")
            try store.renameRecord(entry.object, from: entry.recordID, to: serverID)
            var renamed = entry
            renamed.recordID = serverID
            try store.complete(renamed, serverRecord: record)
            return true
        }
        try store.complete(entry, serverRecord: record)
        return true
    }
}

/// What one push did, for the command's summary.
public struct PushReport: Sendable, Equatable {
    public var pushed = 0
    public var failed = 0
    public var conflicts = 0
    public var merged = 0
    /// Answered with success but without proof (kept queued; docs/sync.md, "Acknowledgement").
    public var unconfirmed = 0
    /// Set when the push stopped early: offline, signed out, …
    public var stoppedBy: OStackError.Code?
    public var stoppedError: OStackError?

    public init() {}

    public static func == (a: PushReport, b: PushReport) -> Bool {
        a.pushed == b.pushed && a.failed == b.failed && a.conflicts == b.conflicts && a.stoppedBy == b.stoppedBy
    }
}
