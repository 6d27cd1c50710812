import SQLCipherKit
import SodiumKit
import Synchronization

/// The sync queue's SQL — all of it lives here and in `QueueStore+Outcomes.swift` (docs/sync.md,
/// "The queue"): rows to entries, enqueueing with coalescing, and the reads the push, the pull and
/// the commands need.
extension LocalStore {
    /// Typed failure columns (migration `0004-queue-failures`); `last_error` of older files is
    /// converted there and no longer written.
    static let queueFailureMigration = """
        ALTER TABLE queue ADD COLUMN failure TEXT;
        ALTER TABLE queue ADD COLUMN failure_fields TEXT;
        ALTER TABLE queue ADD COLUMN failure_status INTEGER;
        ALTER TABLE queue ADD COLUMN failure_code TEXT;
        ALTER TABLE queue ADD COLUMN failure_retry_after REAL;
        UPDATE queue SET
          failure = CASE
            WHEN last_error IS NULL OR last_error = 'conflict' THEN NULL
            WHEN last_error LIKE 'validation%' THEN 'validation'
            WHEN last_error IN ('restricted', 'id-taken', 'forbidden', 'not-found', 'rate-limited', 'server-error')
              THEN last_error
            ELSE 'unexpected' END,
          failure_fields = CASE WHEN last_error LIKE 'validation: %'
            THEN '["' || replace(substr(last_error, 13), ', ', '","') || '"]' END,
          last_error = NULL;
        """

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
        return QueueEntry(
            seq: row.int("seq") ?? 0, id: id, object: object, recordID: recordID, operation: operation,
            payload: decode(row["payload"]), baseVersion: row.text("base_version"),
            baseSnapshot: decode(row["base_snapshot"]),
            status: status, attempts: Int(row.int("attempts") ?? 0), retryable: row.int("retryable") != 0,
            nextAttemptAt: real(row, "next_attempt_at"), failure: failure(row), sent: row.int("sent") == 1,
            revision: Int(row.int("revision") ?? 0),
            theirs: decode(row["theirs"]), theirsVersion: row.text("theirs_version"),
            createdAt: real(row, "created_at"))
    }

    static func real(_ row: Row, _ column: String) -> Double {
        switch row[column] {
        case .real(let value): value
        case .integer(let value): Double(value)
        default: 0
        }
    }

    // MARK: Failures in typed columns

    static func failure(_ row: Row) -> PushFailure? {
        guard let kind = row.text("failure") else { return nil }
        let fields: [String] =
            row.text("failure_fields").flatMap { JSONValue.parse(Array($0.utf8))?.arrayValue }?.compactMap(
                \.stringValue) ?? []
        let retryAfter: Double? = row["failure_retry_after"] == .null ? nil : real(row, "failure_retry_after")
        let status = row.int("failure_status").map(Int.init)
        switch kind {
        case "validation": return .validation(fields: fields)
        case "duplicate": return .duplicate(field: fields.first)
        case "restricted": return .restricted
        case "id-taken": return .idTaken
        case "forbidden": return .forbidden
        case "not-found": return .notFound
        case "rate-limited": return .rateLimited(retryAfter: retryAfter)
        case "server-error": return .serverError(status: status ?? 500, retryAfter: retryAfter)
        case "unconfirmed": return .unconfirmed(status: status ?? 200)
        default: return .unexpected(status: status ?? 0, code: row.text("failure_code"))
        }
    }

    /// The failure's typed columns: kind, fields (a JSON array), status, server code, retry-after.
    static func columns(_ failure: PushFailure?) -> [SQLValue] {
        guard let failure else { return [.null, .null, .null, .null, .null] }
        let fields = PushFailure.fields(of: failure)
        let fieldsValue: SQLValue =
            fields.isEmpty
            ? .null : .text(String(decoding: JSONValue.array(fields.map { .string($0) }).serialized(), as: UTF8.self))
        let kind: String
        var status: Int?
        var code: String?
        switch failure {
        case .validation: kind = "validation"
        case .duplicate: kind = "duplicate"
        case .restricted: kind = "restricted"
        case .idTaken: kind = "id-taken"
        case .forbidden: kind = "forbidden"
        case .notFound: kind = "not-found"
        case .rateLimited: kind = "rate-limited"
        case .serverError(let value, _):
            kind = "server-error"
            status = value
        case .unexpected(let value, let serverCode):
            kind = "unexpected"
            status = value
            code = serverCode
        case .unconfirmed(let value):
            kind = "unconfirmed"
            status = value
        }
        return [
            .text(kind), fieldsValue, status.map { .integer(Int64($0)) } ?? .null, code.map { .text($0) } ?? .null,
            failure.retryAfter.map { .real($0) } ?? .null,
        ]
    }

    /// A queue id (also the Idempotency-Key): `q_`, 13 hex digits that count up within the process
    /// from a random start, then 11 random ones. Ids queued together sort together, so the rows a
    /// push settles in one transaction sit side by side in the id index instead of on every page of
    /// it; the count's random start says nothing of when or how much was queued.
    static func newEntryID() -> String {
        let stamp = String(nextEntryStamp.wrappingAdd(1, ordering: .relaxed).oldValue & entryStampMask, radix: 16)
        return RandomID.make(
            prefix: "q_" + String(repeating: "0", count: 13 - stamp.count) + stamp, count: 11,
            alphabet: RandomID.hexDigits)
    }

    /// 13 hex digits.
    static let entryStampMask: UInt64 = 1 << 52 - 1
    /// The next id's count: a random start, far enough from the top that a process never wraps.
    private static let nextEntryStamp = Atomic<UInt64>(
        SecureRandom.bytes(8).reduce(0) { $0 << 8 | UInt64($1) } % (entryStampMask - 1 << 40))

    // MARK: Enqueue with coalescing

    /// Queues a change, coalescing it with the record's last not-yet-sent pending entry:
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
    /// `serializedPayload`: `payload` as `JSONValue.serialized()` wrote it, when the caller has it.
    public func enqueueReporting(
        object: String, recordID: String, operation: QueueEntry.Operation, payload: [String: JSONValue]?,
        baseVersion: String?, baseSnapshot: [String: JSONValue]?, serializedPayload: [UInt8]? = nil
    ) throws(OStackError) -> (id: String?, isNew: Bool) {
        // Only an update or a delete folds into the change queued before it; a create never does, so
        // it needs no look at that change (an import queues thousands of creates).
        let last =
            operation == .create
            ? nil
            : try rows(
                "SELECT * FROM queue WHERE object = ? AND record_id = ? ORDER BY seq DESC LIMIT 1",
                [.text(object), .text(recordID)]
            ).first.flatMap(Self.entry)
        // A change the server refused as it stood (validation, a taken unique value) is edited like a
        // pending one: the edit is its fix, and it is due again at once. Queued as a change behind it,
        // the fix waited for ever behind a change that `queue retry` only sent again unchanged.
        // (Its refusal answered the request it was sent in: nothing of it was applied.)
        let refused = last.map { $0.status == .failed && $0.failure?.isRefusal == true } ?? false
        if let last, (last.status == .pending && !last.sent) || refused {
            switch (last.operation, operation) {
            case (.create, .update), (.update, .update):
                var merged = last.payload ?? [:]
                for (key, value) in payload ?? [:] { merged[key] = value }
                if refused {
                    try rebase(
                        last, payload: merged, operation: last.operation, baseVersion: last.baseVersion,
                        baseSnapshot: last.baseSnapshot)
                    return (last.id, false)
                }
                try run(
                    "UPDATE OR FAIL queue SET payload = ?, updated_at = ? WHERE seq = ?",
                    [Self.encode(merged), .real(now), .integer(last.seq)])
                return (last.id, false)
            case (.create, .delete):
                try run("DELETE FROM queue WHERE seq = ?", [.integer(last.seq)])
                return (nil, false)
            case (.update, .delete):
                if refused {
                    try rebase(
                        last, payload: nil, operation: .delete, baseVersion: last.baseVersion,
                        baseSnapshot: last.baseSnapshot)
                    return (last.id, false)
                }
                try run(
                    "UPDATE OR FAIL queue SET operation = 'delete', payload = NULL, updated_at = ? WHERE seq = ?",
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
                .text(id), .text(object), .text(recordID), .text(operation.rawValue),
                serializedPayload.map { .text(String(decoding: $0, as: UTF8.self)) } ?? Self.encode(payload),
                baseVersion.map { .text($0) } ?? .null, Self.encode(baseSnapshot), .real(now), .real(now),
            ])
        return (id, true)
    }

    /// A record renamed by the server (it ignored the client-chosen id): its queued changes follow.
    /// (`OR FAIL` on several rows: a failure part-way would keep the rows already changed, so every
    /// caller runs it inside a transaction its error rolls back; no statement journal is needed.)
    func renameQueuedRecord(_ object: String, from oldID: String, to newID: String) throws(OStackError) {
        // The copies a change keeps of the record (its base, a create's payload) name the new id
        // too: written back (`queue discard`, a merge), they must not bring the old id back.
        let kept = try rows(
            "SELECT seq, payload, base_snapshot FROM queue WHERE object = ? AND record_id = ?",
            [.text(object), .text(oldID)])
        for row in kept {
            guard let seq = row.int("seq") else { continue }
            func renamed(_ column: String) -> SQLValue {
                guard let text = row.text(column) else { return .null }
                guard let json = JSONValue.parse(Array(text.utf8)), json["id"]?.stringValue == oldID else {
                    return .text(text)
                }
                return .text(String(decoding: LocalStore.renamed(json, to: newID).serialized(), as: UTF8.self))
            }
            try run(
                "UPDATE OR FAIL queue SET record_id = ?, payload = ?, base_snapshot = ? WHERE seq = ?",
                [.text(newID), renamed("payload"), renamed("base_snapshot"), .integer(seq)])
        }
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

    /// The record's oldest queued change (the one a push sends next), if any.
    public func firstEntry(_ object: String, recordID: String) throws(OStackError) -> QueueEntry? {
        try rows(
            "SELECT * FROM queue WHERE object = ? AND record_id = ? ORDER BY seq LIMIT 1",
            [.text(object), .text(recordID)]
        ).first.flatMap(Self.entry)
    }

    /// How many changes of the same record were queued after `entry`.
    public func laterEntryCount(_ entry: QueueEntry) throws(OStackError) -> Int {
        try integer(
            "SELECT count(*) FROM queue WHERE object = ? AND record_id = ? AND seq > ?",
            [.text(entry.object), .text(entry.recordID), .integer(entry.seq)])
    }

    public func hasQueuedChange(_ object: String, recordID: String) throws(OStackError) -> Bool {
        try integer(
            "SELECT count(*) FROM queue WHERE object = ? AND record_id = ?", [.text(object), .text(recordID)]) > 0
    }

    /// Ids of the object's records with a queued change (a pull leaves them alone).
    public func queuedRecordIDs(_ object: String) throws(OStackError) -> Set<String> {
        Set(
            try rows("SELECT record_id FROM queue WHERE object = ?", [.text(object)]).compactMap {
                $0.text("record_id")
            })
    }

    /// The entries of the object's records among `ids`.
    public func entries(_ object: String, recordIDs ids: [String]) throws(OStackError) -> [QueueEntry] {
        let wanted = Set(ids)
        return try rows("SELECT * FROM queue WHERE object = ? ORDER BY seq", [.text(object)]).compactMap(Self.entry)
            .filter { wanted.contains($0.recordID) }
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

    /// The newest entry's sequence number (0 for an empty queue): entries queued after this call have
    /// higher ones (`seq` is AUTOINCREMENT, never reused).
    public func queueMark() throws(OStackError) -> Int {
        try integer("SELECT coalesce(max(seq), 0) FROM sqlite_sequence WHERE name = 'queue'")
    }

    /// Creates of `object` queued after `mark` still in the queue, whatever their state (pending,
    /// failed, in conflict): those of an import that were not delivered.
    public func createsQueued(since mark: Int, object: String) throws(OStackError) -> Int {
        try integer(
            "SELECT count(*) FROM queue WHERE seq > ? AND object = ? AND operation = 'create'",
            [.integer(Int64(mark)), .text(object)])
    }

    /// Entries ready to push: the oldest entry of each record (FIFO per record), pending or retryable
    /// and due, in queue order.
    public func due(limit: Int = 100_000) throws(OStackError) -> [QueueEntry] {
        try dueRows(limit: limit).map(\.entry)
    }

    /// `due`, with the stored row each entry was decoded from (`claim` compares them as stored).
    func dueRows(limit: Int = 100_000) throws(OStackError) -> [(entry: QueueEntry, row: Row)] {
        try rows(
            """
            SELECT * FROM queue q
            WHERE (status = 'pending' OR (status = 'failed' AND retryable = 1 AND attempts < ?1))
              AND next_attempt_at <= ?2
              AND NOT EXISTS (SELECT 1 FROM queue p WHERE p.object = q.object AND p.record_id = q.record_id AND p.seq < q.seq)
            ORDER BY seq LIMIT ?3
            """, [.integer(Int64(maximumPushAttempts)), .real(now), .integer(Int64(limit))]
        ).compactMap { row in Self.entry(row).map { ($0, row) } }
    }
}
