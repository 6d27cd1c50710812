/// One queued change (docs/sync.md, "The queue"). Its `id` is also the `Idempotency-Key` of a
/// single push.
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
    /// Why the last attempt did not deliver the change (nil: it never failed, or it is a conflict).
    public var failure: PushFailure?
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

/// The maximum automatic attempts for retryable failures (docs/sync.md, "Push").
public let maximumPushAttempts = 8

/// Why the server did not take a queued change, as the push classifier decided it
/// (`PushClassifier`). Stored in the queue's typed `failure_*` columns; never server text: field
/// names only when they are identifiers, the server's code only when it is an upper-case token.
public enum PushFailure: Sendable, Equatable {
    /// Refused as invalid (400/422, or a row's `VALIDATION_FAILED`); the fields the server named.
    case validation(fields: [String])
    /// Another record already holds this value in a unique field (409 `UNIQUE_VIOLATION`).
    case duplicate(field: String?)
    /// The record cannot be deleted while others depend on it (409 `DELETE_RESTRICTED`).
    case restricted
    /// A create's id is taken: most likely our own earlier delivery (looked up by id next round).
    case idTaken
    case forbidden
    case notFound
    case rateLimited(retryAfter: Double?)
    case serverError(status: Int, retryAfter: Double?)
    /// An answer the protocol does not allow here (with the status, 0 when there was none).
    case unexpected(status: Int, code: String?)
    /// A success status without proof: the answer did not carry the record (or every row) with the
    /// id we sent or one the server assigned. Kept queued; a create is looked up by id first.
    case unconfirmed(status: Int)

    /// Whether the queue tries again by itself (with backoff) after this failure.
    public var retryable: Bool {
        switch self {
        case .idTaken, .rateLimited, .serverError, .unconfirmed: true
        default: false
        }
    }

    /// The server's wait, when it gave one.
    public var retryAfter: Double? {
        switch self {
        case .rateLimited(let seconds), .serverError(_, let seconds): seconds
        case .idTaken: 0
        default: nil
        }
    }

    /// The short text `queue list` shows (`validation: title`, `rate-limited`, …).
    public var summary: String {
        switch self {
        case .validation(let fields): fields.isEmpty ? "validation" : "validation: " + fields.joined(separator: ", ")
        case .duplicate(let field): "validation" + (field.map { ": \($0)" } ?? "")
        case .restricted: "restricted"
        case .idTaken: "id-taken"
        case .forbidden: "forbidden"
        case .notFound: "not-found"
        case .rateLimited: "rate-limited"
        case .serverError: "server-error"
        case .unexpected: "unexpected-response"
        case .unconfirmed: "unconfirmed"
        }
    }

    /// Whether the server refused the change as it stands (the user has to change or drop it): a
    /// command that made it undoes it (a refused delete puts the record back), `sync` counts it as
    /// refused. A restricted delete is one: sending it again gets the same answer until the records
    /// that refer to it change.
    public var isRefusal: Bool {
        switch self {
        case .validation, .duplicate, .restricted: true
        default: false
        }
    }

    /// The user-facing error for a change still queued because of this failure. Field names become
    /// the labels `label` gives (metadata), or are left out when it knows none.
    public func userError(account: String?, object: String?, label: (String) -> String? = { $0 }) -> OStackError {
        let context = OStackError.Context(account: account, object: object)
        switch self {
        case .validation, .duplicate:
            var refused = context
            refused.fields = Self.fields(of: self).compactMap(label)
            return OStackError(.validation, context: refused, detail: "push refused: \(summary)")
        case .forbidden: return OStackError(.forbidden, context: context, detail: "push refused: forbidden")
        case .notFound: return OStackError(.notFound, context: context, detail: "push failed: not found")
        case .rateLimited(let seconds):
            var limited = context
            limited.retryAfterSeconds = seconds.map { Int($0.rounded(.up)) }
            return OStackError(.rateLimited, context: limited, detail: "push failed: rate limited")
        case .unexpected:
            return OStackError(.unexpectedResponse, context: context, detail: "push failed: \(summary)")
        case .restricted:
            return OStackError(.deleteRestricted, context: context, detail: "push refused: restricted")
        case .serverError, .idTaken:
            return OStackError(.serverError, context: context, detail: "push failed: \(summary)")
        case .unconfirmed: return OStackError(.unconfirmed, context: context, detail: "push unconfirmed")
        }
    }

    static func fields(of failure: PushFailure) -> [String] {
        switch failure {
        case .validation(let fields): fields
        case .duplicate(let field): field.map { [$0] } ?? []
        default: []
        }
    }
}
