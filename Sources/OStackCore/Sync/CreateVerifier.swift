/// Creates that may have arrived already (a dropped response, a crash) are looked up by id before
/// they are sent again — one list request per batch; found → done, missing → sent again as new.
/// Because ostack chooses record ids, this gives exactly-once creates without any help from the
/// server (docs/sync.md, "Push"). Only an answer that can prove absence decides "missing": a list
/// of records, all of them ones asked for, and nothing more to come; any other answer (or a failed
/// lookup) leaves the create possibly delivered, `unconfirmed`, and looked up again when due.
struct CreateVerifier {
    /// Set (in `account_info`) once a create came back under an id the server chose.
    static let assignsIDsKey = "sync.server-assigns-ids"
    /// Set once a create came back (or was found) under the id ostack chose, and never on a server
    /// that assigned one: then a create missing under its id did not arrive, and is not looked for
    /// by its fields. Until either is known (the first creates of an account), lost creates are
    /// looked for both ways; an inconclusive lookup by fields then leaves the miss by id the answer.
    static let keepsIDsKey = "sync.server-keeps-ids"

    let store: LocalStore
    let api: DataAPI
    let batchCap: Int
    /// Rows an import still has to queue (their ids are taken, like those of records here).
    var feed: PushFeed? = nil

    func verify(_ entries: [QueueEntry], _ report: inout PushReport) throws(OStackError) {
        let byObject = Dictionary(grouping: entries, by: \.object)
        for object in byObject.keys.sorted() {
            for group in Self.lookupGroups(byObject[object]!, cap: batchCap, id: \.recordID) {
                try verify(object, group, &report)
            }
        }
    }

    /// How much of a lookup's address its filter may take, percent-encoded: with the path and
    /// `top`, well within `DataAPI.maxURLBytes` (a real server refuses a longer address, 414 or 431,
    /// and a create that cannot be looked up stays unconfirmed).
    static let filterBudget = 6 << 10

    /// The bytes `value` takes in a filter in the address (percent-encoded, with a separator).
    static func addressCost(_ value: JSONValue) -> Int {
        DataAPI.percentEncode(String(decoding: value.serialized(), as: UTF8.self)).utf8.count + 3
    }

    /// Items in groups of at most `cap` whose `id in […]` filter stays within `filterBudget`: long
    /// ids make smaller groups.
    static func lookupGroups<Item>(_ items: [Item], cap: Int, id: (Item) -> String) -> [[Item]] {
        var groups: [[Item]] = []
        var current: [Item] = []
        var size = 0
        for item in items {
            let cost = addressCost(.string(id(item)))
            if !current.isEmpty && (current.count >= Swift.max(1, cap) || size + cost > filterBudget) {
                groups.append(current)
                current = []
                size = 0
            }
            current.append(item)
            size += cost
        }
        if !current.isEmpty { groups.append(current) }
        return groups
    }

    func verify(_ object: String, _ chunk: [QueueEntry], _ report: inout PushReport) throws(OStackError) {
        let filter: JSONValue = .array([.string("id"), .string("in"), .array(chunk.map { .string($0.recordID) })])
        let json: JSONValue
        do {
            json = try api.call(
                .list(object: object),
                query: [("filter", String(decoding: filter.serialized(), as: UTF8.self)), ("top", String(chunk.count))])
        } catch  where !error.stopsTheAccount {
            // This object cannot be listed (forbidden, unknown, …): its entries fail; others go on.
            for entry in chunk {
                try store.fail(entry, PushFailure(listing: error))
                report.failed += 1
            }
            return
        }
        let asked = Set(chunk.map(\.recordID))
        guard let records = Self.listed(json, where: { $0["id"]?.stringValue.map(asked.contains) ?? false }) else {
            try unconfirmed(chunk, &report)
            return
        }
        var found: [String: JSONValue] = [:]
        for record in records {
            if let id = record["id"]?.stringValue { found[id] = record }
        }
        // "More to come" matters only when some were not found: those cannot be called absent.
        var unknown: Set<String> =
            json["hasMore"]?.boolValue == true ? asked.filter { found[$0] == nil } : []
        // Not there under our id: a server that assigns its own ids (known to, or not yet known to
        // keep ours) may hold it under another.
        var assigned: [String: JSONValue] = [:]
        let assigns = try store.value(Self.assignsIDsKey) != nil
        let keeps = try store.value(Self.keepsIDsKey) != nil
        if assigns || !keeps {
            var claimed: [String: Int] = [:]
            var matches: [String: JSONValue] = [:]
            // Creates that sent the very same fields (identical rows of one batch) are looked for
            // together: k of them are proven by exactly k such records, one each — looked for one
            // by one, each saw k candidates, none was proven, and all were sent again.
            let missing = chunk.filter { found[$0.recordID] == nil && !unknown.contains($0.recordID) }
            let groups = Dictionary(grouping: missing) { Self.fieldsKey(Self.sentFields($0)) }.values
                .map { $0.sorted { $0.seq < $1.seq } }.sorted { $0[0].seq < $1[0].seq }
            for group in groups {
                switch try findByFields(group) {
                case .found(let pairs):
                    for (entry, pair) in zip(group, pairs) {
                        matches[entry.recordID] = pair.record
                        claimed[pair.id, default: 0] += 1
                    }
                case .absent: break
                // Inconclusive: on a server known to assign ids the create may be there, so it is not
                // sent again; on one not known either way, a miss under its own id stays the answer.
                case .unknown: if assigns { for entry in group { unknown.insert(entry.recordID) } }
                }
            }
            // One server record is proof for at most one change: a record two of them match is neither's.
            assigned = matches.filter { claimed[PushClassifier.recordID($0.value) ?? ""] == 1 }
        }
        try store.transaction { () throws(OStackError) in
            for entry in chunk {
                if unknown.contains(entry.recordID) {
                    try store.fail(entry, .unconfirmed(status: 200))
                    report.failed += 1
                    continue
                }
                if let match = assigned[entry.recordID], let serverID = PushClassifier.recordID(match) {
                    try store.renameRecord(entry.object, from: entry.recordID, to: serverID)
                    var renamed = entry
                    renamed.recordID = serverID
                    try store.complete(renamed, serverRecord: match)
                    report.pushed += 1
                    continue
                }
                guard let record = found[entry.recordID] else {
                    try store.markUnsent(entry)
                    continue
                }
                // Ours only if it holds what we sent; a different record with the same id is a
                // collision, never silently taken for our delivery.
                if Self.holds(record, entry) {
                    if !keeps { try Self.learnServerKeepsIDs(store) }
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

extension CreateVerifier {
    /// A create arrived under the id ostack sent: the account's server keeps ids (`keepsIDsKey`),
    /// unless it was seen to assign its own. Read once per batch, written once per account.
    static func learnServerKeepsIDs(_ store: LocalStore) throws(OStackError) {
        guard try store.value(keepsIDsKey) == nil, try store.value(assignsIDsKey) == nil else { return }
        try store.setValue(keepsIDsKey, "1")
    }

    /// What a lookup by fields found.
    enum Match {
        /// The server's records, under the ids it gave them: one per create looked for, in the
        /// order they were made.
        case found([(record: JSONValue, id: String)])
        /// Not there, or not to be told apart from others (sent again).
        case absent
        /// The lookup failed, or its answer cannot prove absence (the create stays unconfirmed).
        case unknown
    }

    /// A lookup's records, when the answer has a `records` list and every record in it is one
    /// `asked` takes (a server that ignored the filter proves nothing). nil otherwise.
    static func listed(_ json: JSONValue, where asked: (JSONValue) -> Bool) -> [JSONValue]? {
        guard let records = json["records"]?.arrayValue, records.allSatisfy(asked) else { return nil }
        return records
    }

    /// Entries whose lookup answered nothing usable: still possibly delivered, looked up again when due.
    func unconfirmed(_ entries: [QueueEntry], _ report: inout PushReport) throws(OStackError) {
        try store.transaction { () throws(OStackError) in
            for entry in entries {
                try store.fail(entry, .unconfirmed(status: 200))
                report.failed += 1
            }
        }
    }

    /// A possibly-delivered create that is not on the server under its own id, looked for by what it sent
    /// (docs/sync.md, "Acknowledgement") — unless the server is known to keep the ids ostack sends: one that assigns
    /// its own may hold it under one we never learnt. Ours is the one record that holds every scalar field sent, was
    /// created by this account's user (when the server says) and is not in the mirror under its id; none, or more than
    /// one (three or more with these fields on the server), is absent (sent again). A failed lookup, or an answer that
    /// cannot prove absence (no `records` list, a record that does not hold the fields asked for, more to come), is
    /// unknown: the create is not sent again.
    /// The scalar fields a create sent, as a lookup by fields matches them.
    static func sentFields(_ entry: QueueEntry) -> [String: JSONValue] {
        (entry.payload ?? [:]).filter { key, value in
            guard !ObjectSchema.systemFields.contains(key), ObjectSchema.isIdentifier(key) else { return false }
            switch value {
            case .string, .number, .bool: return true
            default: return false
            }
        }
    }

    /// The same text for the same fields and values, whatever their order.
    static func fieldsKey(_ fields: [String: JSONValue]) -> String {
        fields.keys.sorted().map { $0 + "\u{0}" + String(decoding: fields[$0]!.serialized(), as: UTF8.self) }
            .joined(separator: "\u{1}")
    }

    /// `group`: creates of one object that sent the same fields (one, usually), oldest first.
    func findByFields(_ group: [QueueEntry]) throws(OStackError) -> Match {
        let entry = group[0]
        let count = group.count
        let ours = Set(group.map(\.recordID))
        let sent = Self.sentFields(entry)
        guard !sent.isEmpty else { return .absent }
        // The server is asked for the fields whose conditions fit in the address, shortest first (a
        // long text field would make it longer than servers take); records are then matched on
        // every field here. Narrowed, the answer may hold records that differ in the others, so
        // more are asked for, and a list that may go on (as many as asked) proves nothing.
        let all = sent.keys.sorted().map { key -> (key: String, condition: JSONValue) in
            (key, .array([.string(key), .string("="), sent[key]!]))
        }
        var asked: [String: JSONValue] = [:]
        var conditions: [JSONValue] = []
        var size = 0
        for (key, condition) in all.sorted(by: { Self.addressCost($0.condition) < Self.addressCost($1.condition) }) {
            let cost = Self.addressCost(condition)
            if size + cost > Self.filterBudget { continue }
            size += cost
            asked[key] = sent[key]
            conditions.append(condition)
        }
        guard !conditions.isEmpty else { return .unknown }
        let narrowed = conditions.count < all.count
        let top = narrowed ? Swift.max(50, count + 2) : count + 2
        let filter = conditions.count == 1 ? conditions[0] : .array([.string("and")] + conditions)
        let outcome: DataAPI.Outcome
        do {
            outcome = try api.exchange(
                .list(object: entry.object),
                query: [("filter", String(decoding: filter.serialized(), as: UTF8.self)), ("top", String(top))])
        } catch  where !error.stopsTheAccount {
            return .unknown
        }
        guard outcome.ok, let json = outcome.json else {
            let error = outcome.error.asOStackError(account: api.account.alias, host: api.account.server.authority)
            if error.stopsTheAccount { throw error }
            return .unknown
        }
        // The server's clock against ours (its `Date` header, to the second): `created_at` is the
        // server's time. Two seconds' allowance; ten minutes without the header. (The offset is
        // measured now, not when the create was queued: a clock set back by more than that
        // meanwhile skips the create's own copy, and it is sent again — a duplicate, never a loss;
        // a wider allowance would let an identical record made just before swallow the create.)
        let skew = outcome.response.header("Date").flatMap(HTTPDate.parse).map { $0.timeIntervalSince1970 - store.now }
        let earliest = (group.map(\.createdAt).min() ?? entry.createdAt) + (skew.map { $0 - 2 } ?? -600)
        // Every record listed must hold the fields asked for, where it shows them (a server that
        // ignored the filter proves nothing); `hasMore` is expected here, `top` being k + 2.
        guard let listed = json["records"]?.arrayValue,
            listed.allSatisfy({ record in asked.allSatisfy { record[$0.key] == nil || record[$0.key] == $0.value } })
        else { return .unknown }
        var records = listed
        if narrowed {
            // Fields left out of the filter are matched here, so each record must show them: one
            // that leaves one out (a list that hides long or restricted fields) would be taken for
            // ours on the fields asked alone — and the create, perhaps never arrived, dropped.
            let unasked = sent.filter { asked[$0.key] == nil }
            if listed.contains(where: { record in unasked.contains { record[$0.key] == nil } }) { return .unknown }
            records = listed.filter { record in unasked.allSatisfy { record[$0.key] == $0.value } }
            // A list that may go on (as many as asked, `hasMore`, a larger `total`: a server that caps
            // its pages) can hide our copy among the rest: no proof of absence.
            let total = json["total"]?.doubleValue ?? 0  // compared as a double: any number from the wire
            let mayGoOn = listed.count >= top || json["hasMore"]?.boolValue == true || total > Double(listed.count)
            if mayGoOn && records.count < count + 2 { return .unknown }
        }
        let user = api.account.userID
        // k + 2 or more records with these very fields: which ones are ours cannot be told.
        if records.count >= count + 2 { return .absent }
        var candidates: [(record: JSONValue, id: String)] = []
        for record in records {
            // An id that names another change's record, or a row still to be queued, is no proof.
            guard let id = PushClassifier.recordID(record), !ours.contains(id),
                feed?.reserves(entry.object, id) != true
            else { continue }
            // A record here already is this create's own copy only if it came from the server (no
            // queued change, no alias leads to it).
            if try store.hasRecord(entry.object, id), try store.isLocalRecord(entry.object, id) { continue }
            // Made no earlier than this create was queued (in the server's clock, two seconds'
            // allowance): an older record with the same fields is another one, made elsewhere or
            // earlier, and must neither swallow this create nor make its own copy ambiguous.
            // Without a `created_at` the server's records cannot be told apart: not proof, not absence.
            guard let created = record["created_at"]?.stringValue.flatMap(Timestamp.parseISO8601) else {
                return .unknown
            }
            if created.timeIntervalSince1970 < earliest { continue }
            if let creator = record["created_by"]?.stringValue, creator != user { continue }
            if Self.holds(record, entry) { candidates.append((record, id)) }
        }
        // Exactly one record per create: paired in the order they were made (their fields are the same).
        guard candidates.count == count else { return .absent }
        return .found(
            candidates.sorted {
                ($0.record["created_at"]?.stringValue ?? "", $0.id) < ($1.record["created_at"]?.stringValue ?? "", $1.id)
            })
    }

    /// A create refused as a duplicate of something unnamed: looked up by id once, now. Found and
    /// holding what we sent → our own earlier delivery; found otherwise → an id collision (conflict);
    /// not found → the change itself duplicates another record (a validation failure, not retried).
    func settleDuplicate(_ entry: QueueEntry, _ report: inout PushReport) throws(OStackError) {
        let filter: JSONValue = .array([.string("id"), .string("="), .string(entry.recordID)])
        let json: JSONValue
        do {
            json = try api.call(
                .list(object: entry.object),
                query: [("filter", String(decoding: filter.serialized(), as: UTF8.self)), ("top", "1")])
        } catch  where !error.stopsTheAccount {
            try store.fail(entry, .duplicate(field: nil))
            report.failed += 1
            return
        } catch {
            try store.release(entry, delivered: true)
            throw error
        }
        let found = json["records"]?.arrayValue?.first { $0["id"]?.stringValue == entry.recordID }
        try store.transaction { () throws(OStackError) in
            guard let record = found else {
                try store.fail(entry, .duplicate(field: nil))
                report.failed += 1
                return
            }
            if Self.holds(record, entry) {
                try store.complete(entry, serverRecord: record)
                report.pushed += 1
            } else {
                try store.markConflict(entry, theirs: record.objectValue, version: record["updated_at"]?.stringValue)
                report.conflicts += 1
            }
        }
    }

    /// Whether the server's record holds what the create sent (then it is our delivery).
    static func holds(_ record: JSONValue, _ entry: QueueEntry) -> Bool {
        (entry.payload ?? [:]).allSatisfy { key, value in
            ObjectSchema.systemFields.contains(key) || record[key] == nil || record[key] == value
        }
    }
}

extension PushFailure {
    /// Why a possibly-delivered create could not be looked up.
    init(listing error: OStackError) {
        switch error.code {
        case .forbidden: self = .forbidden
        case .notFound, .unknownObject: self = .notFound
        case .rateLimited: self = .rateLimited(retryAfter: error.context.retryAfterSeconds.map(Double.init))
        case .serverError: self = .serverError(status: error.context.httpStatus ?? 500, retryAfter: nil)
        default: self = .unexpected(status: error.context.httpStatus ?? 0, code: nil)
        }
    }
}

extension OStackError {
    /// Failures that stop a whole account's sync (no connection, no session, locked): entries are
    /// left as they are and the command reports why.
    var stopsTheAccount: Bool {
        [.offline, .timeout, .tls, .sessionExpired, .notSignedIn, .locked, .passwordExpired, .mfaRequired]
            .contains(code)
    }
}

extension Array {
    func chunked(_ size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: Swift.max(1, size)).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
