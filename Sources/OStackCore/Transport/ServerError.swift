import FoundationEssentials

/// What ostack keeps of a non-2xx response (docs/protocol.md, "Errors"): the status, the
/// machine code and the names of invalid fields. The server's human text is deliberately NOT kept,
/// so it can never reach the user or a log (docs/security.md#err-2).
public struct ServerError: Sendable, Equatable {
    public var status: Int
    /// `body.code` or `body.error.code`, upper-cased server vocabulary (e.g. `CONCURRENT_UPDATE`).
    public var code: String?
    /// Field names from `fields[].field` (allowlisted: they name our metadata's fields).
    public var fields: [String]
    /// Seconds from `Retry-After` / `X-Retry-After` (delta-seconds form only).
    public var retryAfterSeconds: Int?
    /// `X-Request-Id`, shown with `--verbose`.
    public var requestID: String?
    /// For 409 `CONCURRENT_UPDATE`: the server's version and record (used by sync, never printed).
    public var currentVersion: String?
    public var currentRecord: JSONValue?

    public init(response: TransportResponse) {
        status = response.status
        let body = JSONValue.parse(response.body)
        code = body?["code"]?.stringValue ?? body?["error"]?["code"]?.stringValue
        let fieldList = body?["fields"]?.arrayValue ?? body?["error"]?["details"]?["fields"]?.arrayValue ?? []
        // Only names that can be field names (identifiers, or a dotted path of them) are kept:
        // anything else is server text ("CALL 1-800-…") and never reaches the user.
        fields = fieldList.compactMap { $0["field"]?.stringValue }.filter(Self.isFieldName)
        // `INVALID_FIELD` (and a unique violation) name their one field in a singular `field`.
        if fields.isEmpty, let single = (body?["field"] ?? body?["error"]?["field"])?.stringValue,
            Self.isFieldName(single)
        {
            fields = [single]
        }
        retryAfterSeconds = Self.retryAfterSeconds(response)
        requestID = response.header("X-Request-Id").map { String($0.prefix(64)) }
        currentVersion = body?["currentVersion"]?.stringValue
        currentRecord = body?["currentRecord"]
        if let code, !code.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }) {
            self.code = nil
        }
    }

    /// An identifier, or a dotted path of at most four (`address.city`).
    static func isFieldName(_ text: String) -> Bool {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count <= 4 && parts.allSatisfy { ObjectSchema.isIdentifier(String($0)) }
    }

    /// Seconds from `Retry-After` / `X-Retry-After` (delta-seconds form only), at most a day.
    public static func retryAfterSeconds(_ response: TransportResponse) -> Int? {
        guard let retry = (response.header("Retry-After") ?? response.header("X-Retry-After"))?.trimmingWhitespace()
        else { return nil }
        if let seconds = Int(retry) { return max(0, min(seconds, 86_400)) }
        // The HTTP-date form: seconds from the answer's own `Date` (or from now) to that date.
        guard let when = HTTPDate.parse(retry) else { return nil }
        let now = response.header("Date").flatMap(HTTPDate.parse) ?? Date()
        let seconds = when.timeIntervalSince(now)
        return seconds.isFinite ? Int(max(0, min(seconds.rounded(.up), 86_400))) : nil
    }

    /// Maps to the core error for a call on behalf of `account` (an alias) at `host`.
    public func asOStackError(account: String?, host: String?) -> OStackError {
        var context = OStackError.Context(
            account: account, host: host, fields: fields, retryAfterSeconds: retryAfterSeconds, httpStatus: status,
            requestID: requestID)
        let detail = "HTTP \(status) \(code ?? "-")"
        switch status {
        case 401: return OStackError(.sessionExpired, context: context, detail: detail)
        case 403 where code == "PASSWORD_EXPIRED":
            return OStackError(.passwordExpired, context: context, detail: detail)
        case 403 where code == "MFA_REQUIRED": return OStackError(.mfaRequired, context: context, detail: detail)
        case 403: return OStackError(.forbidden, context: context, detail: detail)
        case 404:
            return OStackError(
                code == "OBJECT_NOT_FOUND" ? .unknownObject : .notFound, context: context, detail: detail)
        case 409: return OStackError(.conflict, context: context, detail: detail)
        case 429: return OStackError(.rateLimited, context: context, detail: detail)
        case 414, 431:  // URI too long (nginx), request header fields too large (Node): a long filter
            context.fields = []
            return OStackError(.requestTooLong, context: context, detail: detail)
        case 400, 422:
            if code == "INVALID_FILTER" || code == "INVALID_FIELD" || code == "INVALID_SORT" {
                return OStackError(.invalidFilter, context: context, detail: detail)
            }
            return OStackError(.validation, context: context, detail: detail)
        case 500...599: return OStackError(.serverError, context: context, detail: detail)
        default:
            context.fields = []
            return OStackError(.unexpectedResponse, context: context, detail: detail)
        }
    }
}

extension TransportFailure {
    /// Maps a transport failure to the core error (exit 5 in docs/errors.md).
    public func asOStackError(account: String?, host: String?) -> OStackError {
        var error = mapped(account: account, host: host)
        switch self {
        case .connectionRefused, .dnsFailure, .tls, .invalidURL: error.requestNotSent = true
        default: break
        }
        return error
    }

    func mapped(account: String?, host: String?) -> OStackError {
        let context = OStackError.Context(account: account, host: host)
        switch self {
        case .connectionRefused, .dnsFailure, .connectionDropped:
            return OStackError(.offline, context: context, detail: "transport: \(self)")
        case .timeout: return OStackError(.timeout, context: context, detail: "transport: timeout")
        case .tls: return OStackError(.tls, context: context, detail: "transport: tls")
        case .tooLarge, .tooManyRedirects:
            return OStackError(.unexpectedResponse, context: context, detail: "transport: \(self)")
        case .invalidURL: return OStackError(.invalidServerURL, context: context, detail: "transport: invalid url")
        case .other(let code): return OStackError(.internal, context: context, detail: "transport: curl \(code)")
        }
    }
}
