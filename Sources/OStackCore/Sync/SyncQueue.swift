import FoundationEssentials
import SQLCipherKit
import SodiumKit

/// One queued change (SPEC §8 "Queue"). Its `id` is also the `Idempotency-Key` of a single push.
public struct QueueEntry: Sendable, Equatable {
    public enum Operation: String, Sendable { case create, update, delete }
    public enum Status: String, Sendable { case pending, inProgress = "in_progress", failed, conflict }

    public var seq: Int64
    public var id: String
    public var object: String
    public var recordID: String
    public var operation: Operation
    /// create: the full record; update: the changed fields; delete: nil.
    public var payload: [String: JSONValue]?
    /// The `updated_at` the change was made against (sent as `If-Match`).
    public var baseVersion: String?
    /// The record as it was before the change (the base of a three-way merge).
    public var baseSnapshot: [String: JSONValue]?
    public var status: Status
    public var attempts: Int
    public var retryable: Bool
    public var nextAttemptAt: Double
    public var lastError: String?
    /// Possibly delivered already (sent, no answer recorded): verify before sending again.
    public var sent: Bool
    /// Bumped when the change is rebased (merge, `--keep mine`): a new request, a new key.
    public var revision: Int
    /// For a conflict: the server's record and version.
    public var theirs: [String: JSONValue]?
    public var theirsVersion: String?
    public var createdAt: Double

    /// The `Idempotency-Key` of this version of the change.
    public var idempotencyKey: String { revision == 0 ? id : "\(id).\(revision)" }
}

/// The maximum automatic attempts for retryable failures (SPEC §8).
public let maximumPushAttempts = 8

extension LocalStore {
    static func encode(_ members: [String: JSONValue]?) -> SQLValue {
        guard let members else { return .null }
        return .text(String(decoding: JSONValue.object(members).serialized(), as: UTF8.self))
    }

    static func decode(_ value: SQLValue) -> [String: JSONValue]? {
        guard case .text(let text) = value else { return nil }
        return JSONValue.parse(Array(text.utf8))?.objectValue
    }

    static func entry(_ row: Row) -> QueueEntry? {
        guard let id = row.text("id"), let object = row.text("object"), let recordID = row.text("record_id"),
            let operation = row.text("operation").flatMap(QueueEntry.Operation.init(rawValue:)),
            let status = row.text("status").flatMap(QueueEntry.Status.init(rawValue:))
        else { return nil }
        func real(_ column: String) -> Double {
            switch row[column] {
            case .real(let value): value
            case .integer(let value): Double(value)
            default: 0
            }
        }
        return QueueEntry(
            seq: row.int("seq") ?? 0, id: id, object: object, recordID: recordID, operation: operation,
            payload: decode(row["payload"]), baseVersion: row.text("base_version"),
            baseSnapshot: decode(row["base_snapshot"]),
            status: status, attempts: Int(row.int("attempts") ?? 0), retryable: row.int("retryable") != 0,
            nextAttemptAt: real("next_attempt_at"), lastError: row.text("last_error"), sent: row.int("sent") == 1,
            revision: Int(row.int("revision") ?? 0),
            theirs: decode(row["theirs"]), theirsVersion: row.text("theirs_version"), createdAt: real("created_at"))
    }

    /// A random queue id (also the Idempotency-Key).
    static func newEntryID() -> String {
        "q_" + Hex.encode(SecureRandom.bytes(12))
    }

    // MARK: Enqueue with coalescing

    /// Queues a change, coalescing it with the record's last not-yet-sent pending entry (SPEC §8):
    /// create+update → create; update+update → one update; create+delete → nothing;
    /// update+delete → delete. Call inside the transaction that also writes the record.
    @discardableResult
    public func enqueue(
        object: String, recordID: String, operation: QueueEntry.Operation, payload: [String: JSONValue]?,
        baseVersion: String?, baseSnapshot: [String: JSONValue]?
    ) throws(OStackError) -> String? {
        try enqueueReporting(
            object: object, recordID: recordID, operation: operation, payload: payload, baseVersion: baseVersion,
            baseSnapshot: baseSnapshot
        ).id
    }

    /// `enqueue`, also saying whether the change is an entry of its own (not merged into an older one).
    public func enqueueReporting(
        object: String, recordID: String, operation: QueueEntry.Operation, payload: [String: JSONValue]?,
        baseVersion: String?, baseSnapshot: [String: JSONValue]?
    ) throws(OStackError) -> (id: String?, isNew: Bool) {
        let last = try rows(
            "SELECT * FROM queue WHERE object = ? AND record_id = ? ORDER BY seq DESC LIMIT 1",
            [.text(object), .text(recordID)]
        ).first.flatMap(Self.entry)
        if let last, last.status == .pending, !last.sent {
            switch (last.operation, operation) {
            case (.create, .update), (.update, .update):
                var merged = last.payload ?? [:]
                for (key, value) in payload ?? [:] { merged[key] = value }
                try run(
                    "UPDATE queue SET payload = ?, updated_at = ? WHERE seq = ?",
                    [Self.encode(merged), .real(now), .integer(last.seq)])
                return (last.id, false)
            case (.create, .delete):
                try run("DELETE FROM queue WHERE seq = ?", [.integer(last.seq)])
                return (nil, false)
            case (.update, .delete):
                try run(
                    "UPDATE queue SET operation = 'delete', payload = NULL, updated_at = ? WHERE seq = ?",
                    [.real(now), .integer(last.seq)])
                return (last.id, false)
            default: break
            }
        }
        let id = Self.newEntryID()
        try run(
            """
            INSERT INTO queue (id, object, record_id, operation, payload, base_version, base_snapshot, created_at, updated_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .text(id), .text(object), .text(recordID), .text(operation.rawValue), Self.encode(payload),
                baseVersion.map { .text($0) } ?? .null, Self.encode(baseSnapshot), .real(now), .real(now),
            ])
        return (id, true)
    }

    // MARK: Reading

    public func entries(statuses: [QueueEntry.Status]? = nil) throws(OStackError) -> [QueueEntry] {
        var sql = "SELECT * FROM queue"
        if let statuses {
            sql += " WHERE status IN (\(statuses.map { "'\($0.rawValue)'" }.joined(separator: ", ")))"
        }
        return try rows(sql + " ORDER BY seq").compactMap(Self.entry)
    }

    public func entry(_ id: String) throws(OStackError) -> QueueEntry? {
        try rows("SELECT * FROM queue WHERE id = ?", [.text(id)]).first.flatMap(Self.entry)
    }

    public struct QueueCounts: Sendable, Equatable, Codable {
        public var pending: Int
        public var failed: Int
        public var conflict: Int
    }

    public func counts() throws(OStackError) -> QueueCounts {
        var counts = QueueCounts(pending: 0, failed: 0, conflict: 0)
        for row in try rows("SELECT status, count(*) AS n FROM queue GROUP BY status") {
            let n = Int(row.int("n") ?? 0)
            switch row.text("status") {
            case "pending", "in_progress": counts.pending += n
            case "failed": counts.failed += n
            case "conflict": counts.conflict += n
            default: break
            }
        }
        return counts
    }

    /// Entries ready to push: the oldest entry of each record (FIFO per record), pending or retryable
    /// and due, in queue order.
    public func due(limit: Int = 100_000) throws(OStackError) -> [QueueEntry] {
        try rows(
            """
            SELECT * FROM queue q
            WHERE (status = 'pending' OR (status = 'failed' AND retryable = 1 AND attempts < ?1))
              AND next_attempt_at <= ?2
              AND NOT EXISTS (SELECT 1 FROM queue p WHERE p.object = q.object AND p.record_id = q.record_id AND p.seq < q.seq)
            ORDER BY seq LIMIT ?3
            """, [.integer(Int64(maximumPushAttempts)), .real(now), .integer(Int64(limit))]
        ).compactMap(Self.entry)
    }

    // MARK: Claims and outcomes

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
        try transaction { () throws(OStackError) -> [QueueEntry] in
            var claimed: [QueueEntry] = []
            for entry in entries {
                guard
                    let current = try rows("SELECT * FROM queue WHERE seq = ?", [.integer(entry.seq)]).first.flatMap(
                        Self.entry),
                    current == entry
                else { continue }
                try run(
                    "UPDATE queue SET status = 'in_progress', sent = 1, updated_at = ? WHERE seq = ?",
                    [.real(now), .integer(entry.seq)])
                claimed.append(current)
            }
            return claimed
        }
    }

    /// Back to pending without counting an attempt (network errors, not attempted rows).
    public func release(_ entry: QueueEntry, delivered: Bool) throws(OStackError) {
        try run(
            "UPDATE queue SET status = 'pending', sent = ?, updated_at = ? WHERE seq = ?",
            [.integer(delivered ? 1 : (entry.sent ? 1 : 0)), .real(now), .integer(entry.seq)])
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
            if let version {
                try run(
                    "UPDATE queue SET base_version = ? WHERE object = ? AND record_id = ? AND sent = 0",
                    [.text(version), .text(entry.object), .text(entry.recordID)])
            }
            if later == 0 {
                try putRecord(entry.object, serverRecord, version: version)
            } else if let local = try record(entry.object, entry.recordID) {
                try run(
                    "UPDATE records SET version = ? WHERE object = ? AND id = ?",
                    [version.map { .text($0) } ?? .null, .text(local.object), .text(local.id)])
            }
        }
        if entry.operation == .delete && later == 0 { try deleteRecord(entry.object, entry.recordID) }
    }

    /// A retryable failure (429, 5xx): counts an attempt and schedules the next with backoff.
    public func fail(_ entry: QueueEntry, error: String, retryable: Bool, retryAfter: Double?) throws(OStackError) {
        let attempts = entry.attempts + 1
        let backoff = min(3600, Double(1 << min(attempts, 12)) * Double.random(in: 0.5...1.0))
        // The server's Retry-After is honoured as given; otherwise exponential backoff with jitter.
        let delay = retryable ? (retryAfter ?? backoff) : 0
        try run(
            "UPDATE queue SET status = 'failed', attempts = ?, retryable = ?, next_attempt_at = ?, last_error = ?, updated_at = ? WHERE seq = ?",
            [
                .integer(Int64(attempts)), .integer(retryable ? 1 : 0), .real(now + delay), .text(error), .real(now),
                .integer(entry.seq),
            ])
    }

    public func markConflict(_ entry: QueueEntry, theirs: [String: JSONValue]?, version: String?) throws(OStackError) {
        try run(
            "UPDATE queue SET status = 'conflict', theirs = ?, theirs_version = ?, last_error = 'conflict', updated_at = ? WHERE seq = ?",
            [Self.encode(theirs), version.map { .text($0) } ?? .null, .real(now), .integer(entry.seq)])
    }

    /// Re-queues an entry as a fresh pending change against a new base (merge, `--keep mine`).
    public func rebase(
        _ entry: QueueEntry, payload: [String: JSONValue]?, operation: QueueEntry.Operation, baseVersion: String?,
        baseSnapshot: [String: JSONValue]?
    ) throws(OStackError) {
        try run(
            """
            UPDATE queue SET status = 'pending', operation = ?, payload = ?, base_version = ?, base_snapshot = ?, theirs = NULL,
              theirs_version = NULL, attempts = 0, retryable = 1, next_attempt_at = 0, last_error = NULL, sent = 0,
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

    /// `queue discard ID`: drops the change and restores the record as the server last had it.
    public func discard(_ entry: QueueEntry) throws(OStackError) {
        try transaction { () throws(OStackError) in
            try run(
                "DELETE FROM queue WHERE object = ? AND record_id = ? AND seq >= ?",
                [.text(entry.object), .text(entry.recordID), .integer(entry.seq)])
            if entry.operation == .create {
                try deleteRecord(entry.object, entry.recordID)
            } else if let base = entry.baseSnapshot {
                try putRecord(entry.object, .object(base), version: entry.baseVersion)
            }
        }
    }

    public func removeEntry(_ entry: QueueEntry) throws(OStackError) {
        try run("DELETE FROM queue WHERE seq = ?", [.integer(entry.seq)])
    }
}
