/// Why a request got no usable HTTP response. Values carry no URL, header or body.
public enum HTTPError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Nothing listens at the address.
    case connectionRefused
    /// The host name does not resolve.
    case dnsFailure
    /// Connect or total timeout.
    case timeout
    /// TLS handshake or certificate verification failed.
    case tls
    /// The response body exceeded the configured cap; receiving stopped.
    case tooLarge
    /// The connection closed or reset before a complete response arrived.
    case connectionDropped
    /// Not an absolute http(s) URL.
    case invalidURL
    /// More redirects than allowed, or a redirect ostack refuses (https → http, other schemes).
    case tooManyRedirects
    /// Any other libcurl failure (its CURLcode number).
    case other(Int)

    /// Whether the request certainly never reached a server (nothing it carries can have been
    /// carried out) — as long as no earlier hop of the same send was answered.
    public var meansNotSent: Bool {
        switch self {
        case .connectionRefused, .dnsFailure, .tls, .invalidURL: true
        default: false
        }
    }

    public var description: String {
        switch self {
        case .connectionRefused: "connection refused"
        case .dnsFailure: "host not found"
        case .timeout: "timed out"
        case .tls: "TLS failure"
        case .tooLarge: "response too large"
        case .connectionDropped: "connection dropped"
        case .invalidURL: "invalid URL"
        case .tooManyRedirects: "too many or refused redirects"
        case .other(let code): "libcurl error \(code)"
        }
    }
}
