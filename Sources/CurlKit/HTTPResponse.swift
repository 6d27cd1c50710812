/// An HTTP response: status, headers (in order, names as sent) and the body.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]
    /// The URL that produced this response (after redirects).
    public var url: String

    public init(status: Int, headers: [(String, String)], body: [UInt8], url: String) {
        self.status = status
        self.headers = headers
        self.body = body
        self.url = url
    }

    /// The first value of a header, case-insensitively.
    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.0.lowercased() == lowered }?.1
    }

    /// Every value of a header, case-insensitively, in order.
    public func headers(named name: String) -> [String] {
        let lowered = name.lowercased()
        return headers.filter { $0.0.lowercased() == lowered }.map(\.1)
    }
}
