/// An HTTP request. Header values may carry credentials, so `description` redacts them.
public struct HTTPRequest: Sendable, CustomStringConvertible {
    public enum Method: String, Sendable {
        case get = "GET", head = "HEAD", post = "POST", put = "PUT", patch = "PATCH", delete = "DELETE"
    }

    public var method: Method
    /// An absolute `http://` or `https://` URL.
    public var url: String
    /// Ordered header fields (name, value).
    public var headers: [(String, String)]
    public var body: [UInt8]?

    public init(method: Method = .get, url: String, headers: [(String, String)] = [], body: [UInt8]? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }

    /// Header names whose values are credentials: never printed, dropped on cross-origin redirects.
    public static let credentialHeaders: Set<String> = ["authorization", "x-api-key", "cookie", "proxy-authorization"]

    public var description: String {
        let shown = headers.map { name, value in
            Self.credentialHeaders.contains(name.lowercased()) ? "\(name): <redacted>" : "\(name): \(value)"
        }
        return "\(method.rawValue) \(HTTPRequest.redactedURL(url)) [\(shown.joined(separator: ", "))]"
            + (body.map { " body=\($0.count)B" } ?? "")
    }

    /// The URL without its query string (queries can carry filters with user data).
    static func redactedURL(_ url: String) -> String {
        url.firstIndex(of: "?").map { String(url[..<$0]) + "?…" } ?? url
    }
}
