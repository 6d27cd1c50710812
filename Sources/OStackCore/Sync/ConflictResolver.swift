/// Conflicts (docs/sync.md, "Conflicts"): a 409 `CONCURRENT_UPDATE` is merged three ways against the
/// change's base snapshot, or becomes a conflict the user resolves with `--keep mine|theirs`.
struct ConflictResolver {
    let store: LocalStore

    /// Already applied (our earlier delivery) → done; fields changed on both sides differ →
    /// `conflict` with the server's record kept; otherwise the change is rebased on the server's
    /// version (a new revision, so a new `Idempotency-Key`) and pushed again.
    func resolveConcurrent(_ entry: QueueEntry, theirs: JSONValue?, version: String?, _ report: inout PushReport)
        throws(OStackError)
    {
        // The server's copy must be this record: one without its id, or with another, is no copy of
        // it (it would be stored under that id, or taken as proof that our change was applied), and
        // the version that came with it is not trusted either.
        guard let theirs, theirs["id"]?.stringValue == entry.recordID,
            let theirsRecord = theirs.objectValue.map({ visible($0, object: entry.object) })
        else {
            try store.markConflict(entry, theirs: nil, version: (theirs?.isNull ?? true) ? version : nil)
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
                // With later changes of the record queued (an edit, a delete), the mirror holds them
                // on top of this one and stays as it is (as `complete` leaves it): the merged record
                // would drop them, or bring a deleted record back, until they are pushed.
                if try store.laterEntryCount(entry) == 0 {
                    try store.putRecord(entry.object, .object(merge.merged), version: version)
                }
                report.merged += 1
            } else {
                try store.markConflict(entry, theirs: theirsRecord, version: version)
                report.conflicts += 1
            }
        }
    }

    /// A 409's `currentRecord` is read by the server with system rights: only the fields the object's
    /// cached metadata lists (and the system fields) are merged or stored.
    func visible(_ record: [String: JSONValue], object: String) -> [String: JSONValue] {
        guard let schema = try? MetadataCache(store: store, api: nil).object(object).schema else { return record }
        return record.filter { schema.isKnown($0.key) }
    }

    /// `conflicts resolve ID --keep mine|theirs`: mine is re-queued over the server's version;
    /// theirs drops the change (and later ones of the record) and adopts the server's record.
    func resolve(_ entry: QueueEntry, keepMine: Bool) throws(OStackError) {
        guard entry.status == .conflict else {
            throw OStackError(.notFound, detail: "entry is not a conflict")
        }
        try store.transaction { () throws(OStackError) in
            if keepMine {
                let payload = entry.operation == .delete ? nil : entry.payload
                // A create whose id the server's record holds is sent over that record as an update:
                // sent as a create again, it met the same record and was a conflict again, for ever.
                let operation: QueueEntry.Operation =
                    entry.operation == .create && entry.theirs != nil ? .update : entry.operation
                try store.rebase(
                    entry, payload: payload, operation: operation, baseVersion: entry.theirsVersion,
                    baseSnapshot: entry.theirs)
            } else {
                try store.dropChanges(from: entry)
                if let theirs = entry.theirs {
                    try store.putRecord(entry.object, .object(theirs), version: entry.theirsVersion)
                } else if entry.operation != .create, let base = entry.baseSnapshot {
                    // No server copy came with the conflict (none, or one that was not this record):
                    // the record as it was before the change; the next pull brings the server's.
                    try store.putRecord(
                        entry.object, LocalStore.renamed(.object(base), to: entry.recordID), version: entry.baseVersion)
                } else {
                    try store.deleteRecord(entry.object, entry.recordID)
                }
            }
        }
    }
}

/// A three-way merge of one record (docs/sync.md, "Conflicts").
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
