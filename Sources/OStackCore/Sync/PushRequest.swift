import SodiumKit

/// The request that carries a chunk of same-object, same-operation queued changes: a lone change
/// uses the plain route (`POST`, or `PATCH`/`DELETE` with `If-Match`), several use `createMany` /
/// `updateMany` / `deleteMany` (docs/sync.md, "Push").
struct PushRequest {
    var endpoint: Endpoint
    var body: JSONValue?
    var headers: [(String, String)]

    init(_ chunk: [QueueEntry]) {
        let first = chunk[0]
        let object = first.object
        switch (first.operation, chunk.count) {
        case (.create, 1):
            endpoint = .create(object: object)
            body = .object(Self.createBody(first))
            headers = [("Idempotency-Key", first.idempotencyKey)]
        case (.create, _):
            endpoint = .createMany(object: object)
            body = .array(chunk.map { .object(Self.createBody($0)) })
            headers = [("Idempotency-Key", Self.batchKey(chunk))]
        case (.update, 1):
            endpoint = .updateRecord(object: object, id: first.recordID)
            body = .object(first.payload ?? [:])
            headers = Self.conditional(first)
        case (.update, _):
            let rows: [JSONValue] = chunk.map { entry in
                var row: [String: JSONValue] = ["id": .string(entry.recordID), "data": .object(entry.payload ?? [:])]
                if let base = entry.baseVersion { row["expectedVersion"] = .string(base) }
                return .object(row)
            }
            endpoint = .updateMany(object: object)
            body = ["records": .array(rows), "options": ["continueOnError": true, "returnRecords": true]]
            headers = [("Idempotency-Key", Self.batchKey(chunk))]
        case (.delete, 1):
            endpoint = .deleteRecord(object: object, id: first.recordID)
            body = nil
            headers = Self.conditional(first)
        case (.delete, _):
            var versions: [String: JSONValue] = [:]
            for entry in chunk { if let base = entry.baseVersion { versions[entry.recordID] = .string(base) } }
            endpoint = .deleteMany(object: object)
            body = [
                "ids": .array(chunk.map { .string($0.recordID) }), "versions": .object(versions),
                "options": ["continueOnError": true],
            ]
            headers = [("Idempotency-Key", Self.batchKey(chunk))]
        }
    }

    /// `Idempotency-Key`, and `If-Match` with the version the change was made against.
    static func conditional(_ entry: QueueEntry) -> [(String, String)] {
        var headers = [("Idempotency-Key", entry.idempotencyKey)]
        if let base = entry.baseVersion { headers.append(("If-Match", base)) }
        return headers
    }

    /// The record to create: the client-chosen id, no system fields.
    static func createBody(_ entry: QueueEntry) -> [String: JSONValue] {
        var body = entry.payload ?? [:]
        body["id"] = .string(entry.recordID)
        for field in ObjectSchema.systemFields where field != "id" { body[field] = nil }
        return body
    }

    static func batchKey(_ chunk: [QueueEntry]) -> String {
        "b_" + Hex.encode(BLAKE2b.hash(Array(chunk.map(\.idempotencyKey).joined(separator: ",").utf8), length: 16))
    }
}
