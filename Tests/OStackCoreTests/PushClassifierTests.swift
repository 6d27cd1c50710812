import Testing

@testable import OStackCore

/// Every answer shape the protocol allows to a pushed change, whole-request and per-row, and what
/// the queue makes of it (`PushClassifier`, docs/sync.md "Push").
@Suite struct PushClassifierTests {
    static func json(_ text: String) -> JSONValue? { JSONValue.parse(Array(text.utf8)) }

    struct Whole: Sendable, CustomTestStringConvertible {
        var status: Int
        var body: String
        var retryAfter: Int? = nil
        var operation: QueueEntry.Operation
        var count = 1
        var expected: PushVerdict
        /// The records the request carried: `r1` alone, or `a`, `b`, `c`, … in a batch.
        var ids: [String] {
            count == 1
                ? ["r1"] : (0..<count).map { String(UnicodeScalar(UInt8(97 + $0 % 26))) + ($0 < 26 ? "" : String($0)) }
        }
        var testDescription: String { "\(operation) ×\(count) → \(status) \(body.prefix(60))" }
    }

    static let record = json(#"{"id":"r1","title":"a","updated_at":"v2"}"#)

    static let whole: [Whole] = [
        // 2xx
        Whole(
            status: 201, body: #"{"object":"task","id":"r1","record":{"id":"r1","title":"a","updated_at":"v2"}}"#,
            operation: .create, expected: .delivered(record)),
        Whole(
            status: 200, body: #"{"record":{"id":"r1","title":"a","updated_at":"v2"}}"#, operation: .update,
            expected: .delivered(record)),
        Whole(status: 200, body: #"{"id":"r1","success":true}"#, operation: .delete, expected: .delivered(nil)),
        Whole(
            status: 201, body: #"{"records":[{"id":"a"},{"id":"b"}],"count":2}"#, operation: .create, count: 2,
            expected: .deliveredAll([json(#"{"id":"a"}"#)!, json(#"{"id":"b"}"#)!])),
        Whole(
            status: 200, body: #"{"results":[{"id":"a","success":true}]}"#, operation: .update, count: 2,
            expected: .perRow([json(#"{"id":"a","success":true}"#)!])),
        // 400 validation: field names kept only when they are identifiers
        Whole(
            status: 400,
            body: #"{"code":"VALIDATION_FAILED","fields":[{"field":"title"},{"field":"CALL 1-800"}]}"#,
            operation: .create, expected: .failed(.validation(fields: ["title"]))),
        Whole(
            status: 422, body: #"{"error":{"code":"VALIDATION_ERROR","details":{"fields":[{"field":"amount"}]}}}"#,
            operation: .update, expected: .failed(.validation(fields: ["amount"]))),
        Whole(
            status: 400, body: #"{"code":"BATCH_TOO_LARGE","max":50}"#, operation: .create, count: 200,
            expected: .batchTooLarge(max: 50)),
        Whole(
            status: 400, body: #"{"code":"VALIDATION_FAILED","index":3}"#, operation: .create, count: 5,
            expected: .refusedRow(index: 3, .failed(.validation(fields: [])))),
        Whole(
            status: 400, body: #"{"code":"VALIDATION_FAILED","index":9}"#, operation: .create, count: 5,
            expected: .failed(.validation(fields: []))),
        // 401 (after the keeper's refresh), 403, 404, 405
        Whole(status: 401, body: #"{"code":"UNAUTHENTICATED"}"#, operation: .update, expected: .stop(.sessionExpired)),
        Whole(status: 403, body: #"{"code":"PERMISSION_DENIED"}"#, operation: .update, expected: .failed(.forbidden)),
        Whole(status: 404, body: #"{"code":"RECORD_NOT_FOUND"}"#, operation: .update, expected: .failed(.notFound)),
        Whole(status: 404, body: #"{"code":"RECORD_NOT_FOUND"}"#, operation: .delete, expected: .alreadyGone),
        Whole(
            status: 404, body: #"{"error":{"code":"RECORD_NOT_FOUND"}}"#, operation: .delete, expected: .alreadyGone),
        // A 404 that does not say the record is not found proves nothing about it.
        Whole(status: 404, body: #"{"code":"OBJECT_NOT_FOUND"}"#, operation: .delete, expected: .failed(.notFound)),
        Whole(status: 404, body: "<html>Not Found</html>", operation: .delete, expected: .failed(.notFound)),
        Whole(
            status: 405, body: #"{"code":"OBJECT_API_METHOD_NOT_ALLOWED"}"#, operation: .create, count: 3,
            expected: .failed(.unexpected(status: 405, code: "OBJECT_API_METHOD_NOT_ALLOWED"))),
        // 409: conflict, unique on another field, id taken, restricted
        Whole(
            status: 409, body: #"{"code":"CONCURRENT_UPDATE","currentVersion":"v3","currentRecord":{"id":"r1"}}"#,
            operation: .update, expected: .concurrent(theirs: json(#"{"id":"r1"}"#), version: "v3")),
        Whole(
            status: 409, body: #"{"code":"UNIQUE_VIOLATION","field":"email"}"#, operation: .create,
            expected: .failed(.duplicate(field: "email"))),
        Whole(
            status: 409, body: #"{"code":"UNIQUE_VIOLATION","field":"id"}"#, operation: .create,
            expected: .failed(.idTaken)),
        // A unique violation that names no field (composite or index-named constraint): one lookup by id.
        Whole(status: 409, body: #"{"code":"UNIQUE_VIOLATION"}"#, operation: .create, expected: .lookUp),
        Whole(
            status: 409, body: #"{"code":"UNIQUE_VIOLATION","declaredCode":"DUPLICATE_RECORD"}"#, operation: .create,
            expected: .failed(.duplicate(field: nil))),
        Whole(
            status: 409, body: #"{"error":{"code":"DUPLICATE_RECORD","field":"code"}}"#, operation: .update,
            expected: .failed(.duplicate(field: "code"))),
        // The auth-policy gate stops the account like a 401 does.
        Whole(
            status: 403, body: #"{"error":{"code":"PASSWORD_EXPIRED","message":"x"}}"#, operation: .create, count: 100,
            expected: .stop(.passwordExpired)),
        Whole(
            status: 403, body: #"{"error":{"code":"MFA_REQUIRED","message":"x"}}"#, operation: .update,
            expected: .stop(.mfaRequired)),
        // INVALID_FIELD names its field in a singular `field`.
        Whole(
            status: 400, body: #"{"code":"INVALID_FIELD","field":"amount","object":"task"}"#, operation: .update,
            expected: .failed(.validation(fields: ["amount"]))),
        Whole(
            status: 409, body: #"{"code":"UNIQUE_VIOLATION"}"#, operation: .update,
            expected: .failed(.duplicate(field: nil))),
        Whole(status: 409, body: #"{"code":"DELETE_RESTRICTED"}"#, operation: .delete, expected: .failed(.restricted)),
        Whole(
            status: 409, body: #"{"code":"RESOURCE_CONFLICT"}"#, operation: .update,
            expected: .failed(.unexpected(status: 409, code: "RESOURCE_CONFLICT"))),
        // 412, 429 with Retry-After, 5xx
        Whole(status: 412, body: "", operation: .update, expected: .failed(.unexpected(status: 412, code: nil))),
        Whole(
            status: 429, body: #"{"code":"RATE_LIMIT_EXCEEDED"}"#, retryAfter: 7, operation: .create,
            expected: .failed(.rateLimited(retryAfter: 7))),
        Whole(
            status: 503, body: "<html>down</html>", retryAfter: 30, operation: .update,
            expected: .failed(.serverError(status: 503, retryAfter: 30))),
        Whole(status: 500, body: "", operation: .delete, expected: .failed(.serverError(status: 500, retryAfter: nil))),
        // Malformed bodies: no server text, no crash; a code that is not a protocol token is dropped
        // A 400/422 that is not a JSON error (a proxy's page) is no refusal of the change.
        Whole(status: 400, body: "not json", operation: .create, expected: .failed(.unexpected(status: 400, code: nil))),
        Whole(
            status: 422, body: "<html>Unprocessable</html>", operation: .update,
            expected: .failed(.unexpected(status: 422, code: nil))),
        Whole(status: 400, body: #"{"error":"refused by a hook"}"#, operation: .create, expected: .failed(.validation(fields: []))),
        Whole(
            status: 418, body: #"{"code":"\u001b]0;pwned\u0007"}"#, operation: .update,
            expected: .failed(.unexpected(status: 418, code: nil))),
        Whole(
            status: 409, body: #"{"code":42}"#, operation: .update,
            expected: .failed(.unexpected(status: 409, code: nil))),
    ]

    /// A success status is proof only with the record in it (docs/sync.md, "Acknowledgement"); an
    /// empty, HTML or list body, a record without an id or with another record's id leave the change
    /// queued as unconfirmed. A create may come back with an id the server assigned.
    static let unproven: [Whole] = [
        Whole(status: 201, body: "", operation: .create, expected: .failed(.unconfirmed(status: 201))),
        Whole(status: 200, body: "<html>ok</html>", operation: .create, expected: .failed(.unconfirmed(status: 200))),
        Whole(status: 200, body: #"{"records":[]}"#, operation: .create, expected: .failed(.unconfirmed(status: 200))),
        Whole(
            status: 201, body: #"{"record":{"title":"a"}}"#, operation: .create,
            expected: .failed(.unconfirmed(status: 201))),
        Whole(
            status: 201, body: #"{"record":{"id":"\u001b[2J"}}"#, operation: .create,
            expected: .failed(.unconfirmed(status: 201))),
        Whole(
            status: 201, body: #"{"record":{"id":"srv_9","title":"a"}}"#, operation: .create,
            expected: .delivered(json(#"{"id":"srv_9","title":"a"}"#))),
        Whole(status: 200, body: "", operation: .update, expected: .failed(.unconfirmed(status: 200))),
        Whole(
            status: 200, body: #"{"record":{"id":"other"}}"#, operation: .update,
            expected: .failed(.unconfirmed(status: 200))),
        Whole(status: 204, body: "", operation: .delete, expected: .failed(.unconfirmed(status: 204))),
        Whole(
            status: 200, body: #"{"id":"r1","success":false}"#, operation: .delete,
            expected: .failed(.unconfirmed(status: 200))),
        // createMany: every row, ours in order or all assigned by the server
        Whole(
            status: 201, body: #"{"records":[{"id":"a"}]}"#, operation: .create, count: 2,
            expected: .failed(.unconfirmed(status: 201))),
        Whole(
            status: 201, body: #"{"records":[{"id":"b"},{"id":"a"}]}"#, operation: .create, count: 2,
            expected: .failed(.unconfirmed(status: 201))),
        Whole(
            status: 201, body: #"{"records":[{"id":"x1"},{"id":"x2"}]}"#, operation: .create, count: 2,
            expected: .deliveredAll([json(#"{"id":"x1"}"#)!, json(#"{"id":"x2"}"#)!])),
        Whole(status: 200, body: "", operation: .update, count: 3, expected: .failed(.unconfirmed(status: 200))),
    ]

    @Test(arguments: unproven)
    func successWithoutProofIsUnconfirmed(_ row: Whole) {
        let verdict = PushClassifier.classify(
            status: row.status, body: Self.json(row.body), retryAfter: nil, operation: row.operation, ids: row.ids)
        #expect(verdict == row.expected)
    }

    @Test func aSuccessRowMustNameItsRecord() {
        #expect(
            PushClassifier.classifyRow(Self.json(#"{"id":"b","success":true}"#), id: "a", operation: .update)
                == .failed(.unconfirmed(status: 200)))
        #expect(
            PushClassifier.classifyRow(Self.json(#"{"success":true,"index":0}"#), id: "a", operation: .delete)
                == .failed(.unconfirmed(status: 200)))
        #expect(
            PushClassifier.classifyRow(
                Self.json(#"{"id":"a","success":true,"data":{"id":"z"}}"#), id: "a", operation: .update)
                == .delivered(nil))
        #expect(PushFailure.unconfirmed(status: 201).retryable)
        #expect(PushFailure.unconfirmed(status: 201).userError(account: nil, object: nil).code == .unconfirmed)
    }

    /// Numbers from the wire out of range never trap, and a nonsense cap is not learnt.
    static let hostileNumbers: [Whole] = [
        Whole(
            status: 400, body: #"{"code":"BATCH_TOO_LARGE","max":-5}"#, operation: .create, count: 10,
            expected: .batchTooLarge(max: nil)),
        Whole(
            status: 400, body: #"{"code":"BATCH_TOO_LARGE","max":1e19}"#, operation: .create, count: 10,
            expected: .batchTooLarge(max: nil)),
        Whole(
            status: 400, body: #"{"code":"VALIDATION_FAILED","index":1e19}"#, operation: .create, count: 5,
            expected: .failed(.validation(fields: []))),
        Whole(
            status: 400, body: #"{"code":"VALIDATION_FAILED","index":-1}"#, operation: .create, count: 5,
            expected: .failed(.validation(fields: []))),
        Whole(
            status: 400, body: #"{"code":"VALIDATION_FAILED","index":2.5}"#, operation: .create, count: 5,
            expected: .failed(.validation(fields: []))),
    ]

    @Test(arguments: hostileNumbers)
    func hostileNumbersNeverTrap(_ row: Whole) {
        let verdict = PushClassifier.classify(
            status: row.status, body: Self.json(row.body), retryAfter: row.retryAfter, operation: row.operation,
            ids: row.ids)
        #expect(verdict == row.expected)
        #expect(
            PushClassifier.classifyRow(
                Self.json(#"{"success":false,"errors":[{"httpStatus":1e300}]}"#), id: "a", operation: .update)
                == .failed(.serverError(status: 500, retryAfter: nil)))  // no status it could have: none declared
    }

    /// Issue 14, defect 8: only names that can be field names survive from an error body; server
    /// text in `fields[].field` or `field` never reaches the user.
    @Test func errorBodiesKeepOnlyFieldNames() {
        func fields(_ body: String) -> [String] {
            ServerError(response: TransportResponse(status: 400, headers: [], body: Array(body.utf8))).fields
        }
        #expect(
            fields(#"{"code":"VALIDATION_FAILED","fields":[{"field":"CALL 1-800-555-0100 now"},{"field":"title"}]}"#)
                == ["title"])
        #expect(fields(#"{"code":"INVALID_FIELD","field":"Visit evil.example"}"#) == [])
        #expect(fields(#"{"code":"INVALID_FIELD","field":"address.city"}"#) == ["address.city"])
        #expect(fields(#"{"error":{"details":{"fields":[{"field":"\u001b]0;x\u0007"},{"field":""}]}}}"#) == [])
    }

    /// An address too long for the server — nginx's 414, Node's bodiless 431 — is said as such,
    /// not "a response ostack does not understand".
    @Test func anAddressTooLongIsNamed() {
        for status in [414, 431] {
            let error = ServerError(response: TransportResponse(status: status, headers: [], body: []))
                .asOStackError(account: "work", host: "crm.example.com")
            #expect(error.code == .requestTooLong, "\(status)")
        }
    }

    @Test func retryAfterTakesSecondsOrAnHTTPDate() {
        func seconds(_ headers: [(String, String)]) -> Int? {
            ServerError.retryAfterSeconds(TransportResponse(status: 503, headers: headers))
        }
        #expect(seconds([("Retry-After", "30")]) == 30)
        #expect(seconds([("Retry-After", "-4")]) == 0)
        #expect(seconds([("Retry-After", "999999999")]) == 86_400)
        #expect(
            seconds([("Date", "Wed, 21 Oct 2026 07:28:00 GMT"), ("Retry-After", "Wed, 21 Oct 2026 07:29:30 GMT")]) == 90
        )
        #expect(seconds([("Retry-After", "soon")]) == nil)
    }

    @Test(arguments: whole)
    func wholeAnswers(_ row: Whole) {
        let verdict = PushClassifier.classify(
            status: row.status, body: Self.json(row.body), retryAfter: row.retryAfter, operation: row.operation,
            ids: row.ids)
        #expect(verdict == row.expected)
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var result: String?
        var operation: QueueEntry.Operation
        var expected: PushVerdict
        var testDescription: String { "\(operation): \(result ?? "no result")" }
    }

    static let rows: [Row] = [
        Row(
            result: #"{"id":"a","success":true,"data":{"id":"a","updated_at":"v2"}}"#, operation: .update,
            expected: .delivered(json(#"{"id":"a","updated_at":"v2"}"#))),
        Row(
            result: #"{"id":"a","success":true,"record":{"id":"a"}}"#, operation: .update,
            expected: .delivered(json(#"{"id":"a"}"#))),
        Row(result: #"{"id":"a","success":true,"data":{"id":"a"}}"#, operation: .delete, expected: .delivered(nil)),
        Row(
            result:
                #"{"id":"a","success":false,"errors":[{"code":"CONCURRENT_UPDATE","currentVersion":"v9","currentRecord":{"id":"a"}}]}"#,
            operation: .update, expected: .concurrent(theirs: json(#"{"id":"a"}"#), version: "v9")),
        Row(
            result: #"{"id":"a","success":false,"currentVersion":"v9","errors":[{"code":"CONCURRENT_UPDATE"}]}"#,
            operation: .delete, expected: .concurrent(theirs: nil, version: "v9")),
        Row(
            result: #"{"id":"a","success":false,"errors":[{"code":"RECORD_NOT_FOUND","httpStatus":404}]}"#,
            operation: .delete, expected: .alreadyGone),
        Row(
            result: #"{"id":"a","success":false,"errors":[{"code":"RECORD_NOT_FOUND","httpStatus":404}]}"#,
            operation: .update, expected: .failed(.notFound)),
        Row(
            result: #"{"id":"a","success":false,"errors":[{"code":"NOT_ATTEMPTED"}]}"#, operation: .update,
            expected: .notAttempted(possiblyDelivered: false)),
        Row(
            result: #"{"id":"a","success":false,"errors":[{"code":"ROLLED_BACK"}]}"#, operation: .delete,
            expected: .notAttempted(possiblyDelivered: false)),
        Row(
            result: #"{"id":"a","success":false,"errors":[{"code":"VALIDATION_FAILED","httpStatus":400}]}"#,
            operation: .update, expected: .failed(.validation(fields: []))),
        Row(
            result: #"{"id":"a","success":false,"errors":[{"code":"INTERNAL_ERROR","httpStatus":503}]}"#,
            operation: .update, expected: .failed(.serverError(status: 503, retryAfter: nil))),
        Row(
            result: #"{"id":"a","success":false,"errors":[{"code":"RATE_LIMIT_EXCEEDED","httpStatus":429}]}"#,
            operation: .update, expected: .failed(.serverError(status: 429, retryAfter: nil))),
        // A failed row that declares nothing is a server fault in row form (RealServerRowErrorTests).
        Row(
            result: #"{"id":"a","success":false}"#, operation: .update,
            expected: .failed(.serverError(status: 500, retryAfter: nil))),
        Row(
            result: #"{"id":"a","success":false,"errors":[{"code":"VALIDATION_FAILED","httpStatus":400,"fields":[{"field":"title"}]}]}"#,
            operation: .update, expected: .failed(.validation(fields: ["title"]))),
        Row(
            result: #"{"id":"a","success":false,"errors":[{"code":"PERMISSION_DENIED","httpStatus":403}]}"#,
            operation: .delete, expected: .failed(.forbidden)),
        Row(result: nil, operation: .update, expected: .notAttempted(possiblyDelivered: true)),
    ]

    @Test(arguments: rows)
    func perRowAnswers(_ row: Row) {
        #expect(
            PushClassifier.classifyRow(row.result.flatMap(Self.json), id: "a", operation: row.operation)
                == row.expected)
    }

    @Test func failuresSayWhetherTheyAreRetriedAndHowTheyAreShown() {
        #expect(PushFailure.rateLimited(retryAfter: 7).retryable && PushFailure.idTaken.retryable)
        #expect(!PushFailure.validation(fields: ["title"]).retryable && !PushFailure.forbidden.retryable)
        #expect(PushFailure.validation(fields: ["title", "amount"]).summary == "validation: title, amount")
        #expect(PushFailure.duplicate(field: "email").summary == "validation: email")
        #expect(PushFailure.serverError(status: 502, retryAfter: nil).summary == "server-error")
        let error = PushFailure.validation(fields: ["title"]).userError(account: "work", object: "task") {
            $0 == "title" ? "Title" : nil
        }
        #expect(error.code == .validation && error.context.fields == ["Title"])
        #expect(
            PushFailure.rateLimited(retryAfter: 7).userError(account: nil, object: nil).context.retryAfterSeconds == 7)
        #expect(PushFailure.forbidden.userError(account: nil, object: nil).code == .forbidden)
    }
}
