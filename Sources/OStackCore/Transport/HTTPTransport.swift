/// The core's view of HTTP (docs/architecture.md: side effects through protocols). The live implementation
/// adapts CurlKit's `HTTPClient`; tests use the real dev server or a scripted transport.
public protocol HTTPTransport: Sendable {
    func send(_ request: TransportRequest) throws(TransportFailure) -> TransportResponse
}

public struct TransportRequest: Sendable {
    public var method: String
    public var url: String
    public var headers: [(String, String)]
    public var body: [UInt8]?

    public init(method: String, url: String, headers: [(String, String)] = [], body: [UInt8]? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }
}

public struct TransportResponse: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first value of a header, compared case-insensitively.
    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.0.lowercased() == lowered }?.1
    }
}

/// Why a request got no HTTP response. Carries no URL, header or body.
public enum TransportFailure: Error, Sendable, Equatable {
    case connectionRefused
    case dnsFailure
    case timeout
    case tls
    case tooLarge
    /// The connection closed or reset before a full response arrived (the request may or may not
    /// have been processed by the server).
    case connectionDropped
    case invalidURL
    case tooManyRedirects
    case other(Int)
}
