import SQLCipherKit

/// Claims and outcomes of queued changes: the writes a push, a conflict resolution and the queue
/// commands make to the queue (docs/sync.md, "Push" and "Conflicts").
extension LocalStore {
    /// A crashed push leaves `in_progress` claims; under the sync lock nobody else is pushing, so
    /// every claim is stale: back to pending (still marked `sent`, so it is verified before resending).
    @discardableResult
    public func recoverStaleClaims() throws(OStackError) -> Int {
        try run("UPDATE queue SET status = 'pending' WHERE status = 'in_progress'")
        return database.changes
    }

    /// Marks entries claimed and possibly-delivered, committed before the request goes out. Each
    /// entry is re-read inside the write transaction and claimed only if it is unchanged since it was
    /// selected (another process may have merged a change into it, discarded it, or claimed it): the
    /// returned entries — exactly what the database holds now — are what gets sent.
    public func claim(_ entries: [QueueEntry]) throws(OStackError) -> [QueueEntry] {
        try claim(entries, asRead: [:])
    }

    /// `claim`, given the stored rows the entries were decoded from (`dueRows`), by `seq` — each must
    /// be the row its entry was decoded from. An entry whose row is still stored byte for byte so is
    /// unchanged without being decoded again.
    func claim(_ entries: [QueueEntry], asRead: [Int64: Row]) throws(OStackError) -> [QueueEntry] {
        try transaction { () throws(OStackError) -> [QueueEntry] in
            var claimed: [QueueEntry] = []
            for entry in entries {
                guard let row = try rows("SELECT * FROM queue WHERE seq = ?", [.integer(entry.seq)]).first else {
                    continue
                }
                let current: QueueEntry
                if let read = asRead[entry.seq] {
                    guard row == read else { continue }
                    current = entry
                } else {
                    // (Entries compare texts as Swift strings, equal across Unicode normalisations:
                    // what is sent is the stored one.)
                    guard let stored = Self.entry(row), stored == entry else { continue }
                    current = stored
                }
                try run(
                    "UPDATE OR FAIL queue SET status = 'in_progress', sent = 1, updated_at = ? WHERE seq = ?",
                    [.real(now), .integer(entry.seq)])
                claimed.append(current)
            }
            return claimed
        }
    }

    /// Back to pending without counting an attempt (network errors, not attempted rows).
    public func release(_ entry: QueueEntry, delivered: Bool) throws(OStackError) {
        try run(
            "UPDATE OR FAIL queue SET status = 'pending', sent = ?, updated_at = ? WHERE seq = ?",
            [.integer(delivered ? 1 : (entry.sent ? 1 : 0)), .real(now), .integer(entry.seq)])
    }

    /// A create looked up by id and not found: it never arrived, so it is sent again as new.
    public func markUnsent(_ entry: QueueEntry) throws(OStackError) {
        try run("UPDATE OR FAIL queue SET sent = 0 WHERE seq = ?", [.integer(entry.seq)])
    }

    /// Done: removes the entry and writes the server's record; later entries of the record get the
    /// new version as their base.
    public func complete(_ entry: QueueEntry, serverRecord: JSONValue?) throws(OStackError) {
        try run("DELETE FROM queue WHERE seq = ?", [.integer(entry.seq)])
        let version = serverRecord?["updated_at"]?.stringValue
        let later = try integer(
            "SELECT count(*) FROM queue WHERE object = ? AND record_id = ?",
            [.text(entry.object), .text(entry.recordID)])
        if let serverRecord, entry.operation != .delete {
            if let version, later > 0 {
                try run(
                    // Several rows, `OR FAIL`: inside the settling transaction, which an error rolls back.
                    "UPDATE OR FAIL queue SET base_version = ? WHERE object = ? AND record_id = ? AND sent = 0",
                    [.text(version), .text(entry.object), .text(entry.recordID)])
            }
            if later == 0 {
                try putRecord(entry.object, serverRecord, version: version)
            } else if let (rid, _) = try index.current(entry.object, entry.recordID) {
                try run(
                    "UPDATE OR FAIL records SET version = ? WHERE rid = ?", [version.map { .text($0) } ?? .null, .integer(rid)])
            }
            // Only the server's own record is an echo: with later changes queued the mirror keeps
            // this client's copy under the server's version, which a pull must still replace when
            // those changes are undone.
            if let version, later == 0 { noteEcho(entry.object, version: version) }
        }
        if entry.operation == .delete && later == 0 { try deleteRecord(entry.object, entry.recordID) }
    }

    /// Records why the server did not take the change. A retryable failure counts an attempt and is
    /// due again after the server's `Retry-After` as given, else after an exponential backoff with
    /// jitter; any other failure waits for `queue retry`.
    public func fail(_ entry: QueueEntry, _ failure: PushFailure) throws(OStackError) {
        let attempts = entry.attempts + 1
        let backoff = min(3600, Double(1 << min(attempts, 12)) * Double.random(in: 0.5...1.0))
        let delay = failure.retryable ? (failure.retryAfter ?? backoff) : 0
        try run(
            """
            UPDATE OR FAIL queue SET status = 'failed', attempts = ?, retryable = ?, next_attempt_at = ?, failure = ?,
              failure_fields = ?, failure_status = ?, failure_code = ?, failure_retry_after = ?, updated_at = ?
            WHERE seq = ?
            """,
            [.integer(Int64(attempts)), .integer(failure.retryable ? 1 : 0), .real(now + delay)]
                + Self.columns(failure) + [.real(now), .integer(entry.seq)])
    }

    public func markConflict(_ entry: QueueEntry, theirs: [String: JSONValue]?, version: String?) throws(OStackError) {
        try run(
            """
            UPDATE OR FAIL queue SET status = 'conflict', theirs = ?, theirs_version = ?, failure = NULL, failure_fields = NULL,
              failure_status = NULL, failure_code = NULL, failure_retry_after = NULL, updated_at = ?
            WHERE seq = ?
            """,
            [Self.encode(theirs), version.map { .text($0) } ?? .null, .real(now), .integer(entry.seq)])
    }

    /// Re-queues an entry as a fresh pending change against a new base (merge, `--keep mine`).
    public func rebase(
        _ entry: QueueEntry, payload: [String: JSONValue]?, operation: QueueEntry.Operation, baseVersion: String?,
        baseSnapshot: [String: JSONValue]?
    ) throws(OStackError) {
        try run(
            """
            UPDATE OR FAIL queue SET status = 'pending', operation = ?, payload = ?, base_version = ?, base_snapshot = ?, theirs = NULL,
              theirs_version = NULL, attempts = 0, retryable = 1, next_attempt_at = 0, failure = NULL, failure_fields = NULL,
              failure_status = NULL, failure_code = NULL, failure_retry_after = NULL, sent = 0,
              revision = revision + 1, updated_at = ?
            WHERE seq = ?
            """,
            [
                .text(operation.rawValue), Self.encode(payload), baseVersion.map { .text($0) } ?? .null,
                Self.encode(baseSnapshot),
                .real(now), .integer(entry.seq),
            ])
    }

    /// `queue retry`: failed (and, with `all`, also exhausted) entries become due now.
    public func retry(ids: [String]?) throws(OStackError) -> Int {
        var sql =
            "UPDATE queue SET status = 'pending', attempts = 0, retryable = 1, next_attempt_at = 0 WHERE status = 'failed'"
        var bindings: [SQLValue] = []
        if let ids {
            sql += " AND id IN (\(ids.map { _ in "?" }.joined(separator: ", ")))"
            bindings = ids.map { .text($0) }
        }
        try run(sql, bindings)
        return database.changes
    }

    /// Drops `entry` and every later change of its record (they were made on top of it).
    public func dropChanges(from entry: QueueEntry) throws(OStackError) {
        try run(
            "DELETE FROM queue WHERE object = ? AND record_id = ? AND seq >= ?",
            [.text(entry.object), .text(entry.recordID), .integer(entry.seq)])
    }

    /// `queue discard ID`: drops the change and restores the record as the server last had it.
    public func discard(_ entry: QueueEntry) throws(OStackError) {
        try transaction { () throws(OStackError) in
            try dropChanges(from: entry)
            if entry.operation == .create {
                try deleteRecord(entry.object, entry.recordID)
            } else if let base = entry.baseSnapshot {
                try putRecord(entry.object, .object(base), version: entry.baseVersion)
            }
        }
    }

    /// Discards the failed entry `id` only while it is still the record's latest change and holds
    /// just `payload` (what the command that added it queued), deciding that inside the transaction
    /// that drops it: a change another process queued meanwhile — on top of it, or merged into it
    /// while it was pending — is never dropped with it. False when it is not there, not failed, no
    /// longer the latest, or holds more.
    public func discardIfLatest(_ id: String, payload: [String: JSONValue]?) throws(OStackError) -> Bool {
        try transaction { () throws(OStackError) -> Bool in
            guard let entry = try entry(id), entry.status == .failed, entry.payload == payload,
                try laterEntryCount(entry) == 0
            else {
                return false
            }
            try discard(entry)
            return true
        }
    }

    public func removeEntry(_ entry: QueueEntry) throws(OStackError) {
        try run("DELETE FROM queue WHERE seq = ?", [.integer(entry.seq)])
    }
}
