/// What an answer to a push means for the queued changes it carried. Produced only by
/// `PushClassifier` (pure: status, body, headers in; a verdict out), applied by `PushSettler`.
public indirect enum PushVerdict: Sendable, Equatable {
    /// Taken; the record as the server now has it (nil: the answer carried none, or a delete).
    case delivered(JSONValue?)
    /// A `createMany` taken whole: the records in request order.
    case deliveredAll([JSONValue])
    /// A batch whose rows each have their own outcome (`updateMany`/`deleteMany` results).
    case perRow([JSONValue])
    /// A delete of a record the server no longer has: done.
    case alreadyGone
    /// 409 `CONCURRENT_UPDATE`: the server's record and version, for a three-way merge.
    case concurrent(theirs: JSONValue?, version: String?)
    case failed(PushFailure)
    /// Over the server's batch cap (`BATCH_TOO_LARGE`), with the cap when it said it.
    case batchTooLarge(max: Int?)
    /// A batch refused as a whole because of one row it names (`index`); the others were not taken.
    case refusedRow(index: Int, PushVerdict)
    /// Not processed (a row `NOT_ATTEMPTED` or `ROLLED_BACK`, or no result for it): try again.
    case notAttempted(possiblyDelivered: Bool)
    /// The account cannot push now and nothing was processed: 401 after the session keeper's one
    /// refresh (`session-expired`), or the server's auth policy (`password-expired`, `mfa-required`).
    /// The whole account stops; every change stays pending.
    case stop(OStackError.Code)
    /// A create refused as a duplicate without saying of what (a unique 409 with no `field`): one
    /// lookup by id decides whether it is our own earlier delivery or the change's own failure.
    case lookUp
}

/// Classifies answers to pushed changes (docs/sync.md, "Push"): the single place where protocol
/// status codes and error codes become queue outcomes. Pure and table-tested
/// (`Tests/OStackCoreTests/PushClassifierTests.swift`).
public enum PushClassifier {
    /// One answer to a whole request carrying the changes of `operation` to the records `ids` (in
    /// request order).
    public static func classify(
        status: Int, body: JSONValue?, retryAfter: Int?, operation: QueueEntry.Operation, ids: [String]
    ) -> PushVerdict {
        let code = errorCode(body)
        let count = ids.count
        switch status {
        case 200..<300:
            return acknowledged(body, operation: operation, ids: ids) ?? .failed(.unconfirmed(status: status))
        case 400 where code == "BATCH_TOO_LARGE" && count > 1:
            return .batchTooLarge(max: body?["max"]?.intValue.flatMap { $0 > 0 ? $0 : nil })
        default: break
        }
        let failure = classifyFailure(
            status: status, code: code, body: body, retryAfter: retryAfter.map(Double.init), operation: operation)
        if count > 1, let index = body?["index"]?.intValue, (0..<count).contains(index) {
            return .refusedRow(index: index, failure)
        }
        return failure
    }

    /// A success is proof only with the record in it (docs/sync.md, "Acknowledgement"): a create's
    /// record with an id (ours, or one the server assigned, adopted by position in a batch); an
    /// update's record with our id; a delete's answer naming our id; a batch's results. Anything
    /// else — an empty or HTML body, a redirect answered by a list — is nil: not delivered.
    static func acknowledged(_ body: JSONValue?, operation: QueueEntry.Operation, ids: [String]) -> PushVerdict? {
        switch (operation, ids.count) {
        case (.create, 1):
            guard let record = body?["record"], recordID(record) != nil else { return nil }
            return .delivered(record)
        case (.create, _):
            guard let records = body?["records"]?.arrayValue, records.count == ids.count else { return nil }
            let returned = records.compactMap(recordID)
            // Our ids in our order, or ids the server assigned (none of ours): anything else could
            // pair a record with the wrong change.
            guard returned.count == ids.count, Set(returned).count == ids.count,
                returned == ids || Set(returned).isDisjoint(with: ids)
            else {
                return nil
            }
            return .deliveredAll(records)
        case (.update, 1):
            guard let record = body?["record"], recordID(record) == ids[0] else { return nil }
            return .delivered(record)
        case (.delete, 1):
            let named = (body?["id"] ?? body?["record"]?["id"])?.stringValue
            guard named == ids[0], body?["success"]?.boolValue != false else { return nil }
            return .delivered(nil)
        default:
            guard let results = body?["results"]?.arrayValue else { return nil }
            return .perRow(results)
        }
    }

    /// A record's id, when it is one ostack can keep: a non-empty string of at most 255 characters
    /// without control characters.
    static func recordID(_ record: JSONValue) -> String? {
        guard record.objectValue != nil, let id = record["id"]?.stringValue, isUsableID(id) else { return nil }
        return id
    }

    /// 1 to 255 characters, none of them a control character. Printable ASCII (every id the real
    /// server mints) is decided on the bytes, without looking up Unicode properties.
    public static func isUsableID(_ id: String) -> Bool {
        var utf8 = id
        if let ascii = utf8.withUTF8({ bytes -> Bool? in
            guard bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return nil }
            return (1...255).contains(bytes.count)
        }) {
            return ascii
        }
        return (1...255).contains(id.count)
            && !id.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
    }

    /// Everything but success: shared by whole answers and the rows of a batch.
    static func classifyFailure(
        status: Int, code: String?, body: JSONValue?, retryAfter: Double?, operation: QueueEntry.Operation
    ) -> PushVerdict {
        let declared = (body?["declaredCode"] ?? body?["error"]?["declaredCode"])?.stringValue
        let field = (body?["field"] ?? body?["error"]?["field"])?.stringValue
        let duplicate = code == "DUPLICATE_RECORD" || declared == "DUPLICATE_RECORD"
        switch status {
        case 401: return .stop(.sessionExpired)
        case 403 where code == "PASSWORD_EXPIRED": return .stop(.passwordExpired)
        case 403 where code == "MFA_REQUIRED": return .stop(.mfaRequired)
        case 409 where code == "CONCURRENT_UPDATE":
            return .concurrent(theirs: body?["currentRecord"], version: body?["currentVersion"]?.stringValue)
        case 409 where operation == .create && code == "UNIQUE_VIOLATION" && field == "id" && !duplicate:
            // The id is taken: most likely our own earlier delivery (looked up by id next round).
            return .failed(.idTaken)
        case 409 where operation == .create && (code == "UNIQUE_VIOLATION" || duplicate) && (field != nil || duplicate):
            // Another record has this value in a unique field: a validation problem of this change.
            return .failed(.duplicate(field: field.flatMap(identifier)))
        case 409 where operation == .create && code == "UNIQUE_VIOLATION":
            // A duplicate of something unnamed (a composite or index-named constraint), perhaps our id.
            return .lookUp
        case 409 where operation == .create:
            // The id is taken: most likely our own earlier delivery (looked up by id next round).
            return .failed(.idTaken)
        case 409 where code == "UNIQUE_VIOLATION" || duplicate:
            return .failed(.duplicate(field: field.flatMap(identifier)))
        case 409 where code == "DELETE_RESTRICTED": return .failed(.restricted)
        // Gone only when the server says this record is not found: any other 404 (an unknown object,
        // a proxy's page for a route it does not know) proves nothing about the record.
        case 404 where operation == .delete && code == "RECORD_NOT_FOUND": return .alreadyGone
        case 404: return .failed(.notFound)
        // A refusal of the change as it stands comes as a JSON error (a hook's refusal may carry no
        // code). Any other 400/422 (a proxy's HTML page) says nothing about the change: it is
        // not undone as refused, but kept as an unexpected answer.
        case 400 where body?.objectValue != nil, 422 where body?.objectValue != nil:
            return .failed(.validation(fields: fieldNames(body)))
        case 403: return .failed(.forbidden)
        case 429: return .failed(.rateLimited(retryAfter: retryAfter))
        case 500...599: return .failed(.serverError(status: status, retryAfter: retryAfter))
        default: return .failed(.unexpected(status: status, code: code))
        }
    }

    /// One row of a `updateMany`/`deleteMany` answer (`BatchUpdateResponse.results[]`) for the
    /// change to record `id`. A success row is proof only when it names that id.
    public static func classifyRow(_ result: JSONValue?, id: String, operation: QueueEntry.Operation) -> PushVerdict {
        guard let result else { return .notAttempted(possiblyDelivered: true) }
        if result["success"]?.boolValue == true {
            guard result["id"]?.stringValue == id else { return .failed(.unconfirmed(status: 200)) }
            let record = result["data"] ?? result["record"]
            // A returned record must be this one; a row without it is still a proven delivery.
            guard operation != .delete, let record, record["id"]?.stringValue == id else { return .delivered(nil) }
            return .delivered(record)
        }
        let rowError = result["errors"]?.arrayValue?.first
        let code = rowError?["code"]?.stringValue
        switch code {
        case "CONCURRENT_UPDATE":
            return .concurrent(
                theirs: rowError?["currentRecord"] ?? result["currentRecord"],
                version: rowError?["currentVersion"]?.stringValue ?? result["currentVersion"]?.stringValue)
        case "RECORD_NOT_FOUND" where operation == .delete: return .alreadyGone
        case "RECORD_NOT_FOUND": return .failed(.notFound)
        case "NOT_ATTEMPTED", "ROLLED_BACK": return .notAttempted(possiblyDelivered: false)
        default:
            // The real server writes `httpStatus` only when the failure declared one
            // (`toRowApiError`): a row without it failed for a reason nobody declared, a server
            // fault in row form (a lost connection, a deadlock; `INTERNAL_ERROR`), which the
            // one-record route answers with 500. It is retried, not undone as a refusal. A row
            // with a status is judged as a whole answer with that status would be, so a
            // `DELETE_RESTRICTED` row is `restricted` as a refused DELETE is.
            let status = rowError?["httpStatus"]?.intValue.flatMap { (100...599).contains($0) ? $0 : nil } ?? 500
            if status == 429 || status >= 500 { return .failed(.serverError(status: status, retryAfter: nil)) }
            switch classifyFailure(status: status, code: errorCode(rowError), body: rowError, retryAfter: nil, operation: operation) {
            case .failed(let failure): return .failed(failure)
            // What a row cannot ask for (a new session, a look-up, another copy): a refusal as before.
            default: return .failed(.validation(fields: fieldNames(rowError)))
            }
        }
    }

    /// `code` or `error.code`, when it is an upper-case protocol token.
    static func errorCode(_ body: JSONValue?) -> String? {
        let code = body?["code"]?.stringValue ?? body?["error"]?["code"]?.stringValue
        guard let code, !code.isEmpty, code.count <= 64,
            code.unicodeScalars.allSatisfy({ ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_" })
        else { return nil }
        return code
    }

    /// The names in `fields[].field` that are identifiers (they name metadata fields; anything else
    /// is server text and dropped).
    static func fieldNames(_ body: JSONValue?) -> [String] {
        let list = body?["fields"]?.arrayValue ?? body?["error"]?["details"]?["fields"]?.arrayValue ?? []
        let named = list.compactMap { $0["field"]?.stringValue.flatMap(identifier) }
        // `INVALID_FIELD` names its one field in a singular `field`.
        if named.isEmpty, let single = (body?["field"] ?? body?["error"]?["field"])?.stringValue {
            return identifier(single).map { [$0] } ?? []
        }
        return named
    }

    static func identifier(_ name: String) -> String? { ObjectSchema.isIdentifier(name) ? name : nil }
}
