/// Creates that may have arrived already (a dropped response, a crash) are looked up by id before
/// they are sent again — one list request per batch; found → done, missing → sent again as new.
/// Because ostack chooses record ids, this gives exactly-once creates without any help from the
/// server (docs/sync.md, "Push").
struct CreateVerifier {
    let store: LocalStore
    let api: DataAPI
    let batchCap: Int

    func verify(_ entries: [QueueEntry], _ report: inout PushReport) throws(OStackError) {
        let byObject = Dictionary(grouping: entries, by: \.object)
        for object in byObject.keys.sorted() {
            for slice in byObject[object]!.chunked(batchCap) {
                try verify(object, Array(slice), &report)
            }
        }
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
        var found: [String: JSONValue] = [:]
        for record in json["records"]?.arrayValue ?? [] {
            if let id = record["id"]?.stringValue { found[id] = record }
        }
        try store.transaction { () throws(OStackError) in
            for entry in chunk {
                guard let record = found[entry.recordID] else {
                    try store.markUnsent(entry)
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
        [.offline, .timeout, .tls, .sessionExpired, .notSignedIn, .locked].contains(code)
    }
}

extension Array {
    func chunked(_ size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: Swift.max(1, size)).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
