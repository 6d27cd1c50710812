/// One stored record: ordered members (id first, system columns last).
public struct Record: Sendable {
    public var members: [(String, JSONValue)]
    /// The microseconds of `updated_at` beyond the milliseconds the wire shows (0 unless the server
    /// stores microseconds, `--microsecond-stamps`); filters and sorts on `updated_at` see them.
    public var micros: Int32 = 0

    public subscript(key: String) -> JSONValue? {
        get { members.first { $0.0 == key }?.1 }
        set {
            if let index = members.firstIndex(where: { $0.0 == key }) {
                if let newValue { members[index].1 = newValue } else { members.remove(at: index) }
            } else if let newValue {
                members.append((key, newValue))
            }
        }
    }

    public var id: String { self["id"]?.stringValue ?? "" }
    public var version: String { self["updated_at"]?.stringValue ?? "" }
    public var json: JSONValue { .object(members) }

    /// Only the selected fields (id always).
    func selecting(_ fields: [String]?) -> JSONValue {
        guard let fields else { return json }
        return .object(members.filter { $0.0 == "id" || fields.contains($0.0) })
    }
}

/// The HTTP-independent result of a data or metadata call.
public struct CoreResponse: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    /// nil: empty body (304).
    public var body: JSONValue?
    /// Bytes sent instead of `body` (fault injection: HTML, truncated or empty bodies).
    public var rawBody: [UInt8]?

    public init(status: Int, headers: [(String, String)] = [], body: JSONValue?) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The flat REST error envelope (docs/protocol.md#errors).
    public static func error(status: Int, code: String, message: String, extra: [(String, JSONValue)] = [])
        -> CoreResponse
    {
        CoreResponse(status: status, body: .object([("error", .string(message)), ("code", .string(code))] + extra))
    }

    /// The nested envelope used for query-parameter errors.
    public static func nestedError(status: Int, code: String, message: String) -> CoreResponse {
        CoreResponse(
            status: status,
            body: .object([("error", .object([("code", .string(code)), ("message", .string(message))]))]))
    }
}
