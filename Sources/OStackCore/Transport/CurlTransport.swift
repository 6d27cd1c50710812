import CurlKit

/// `HTTPTransport` over CurlKit (one reused libcurl handle: keep-alive across a command's requests).
public final class CurlTransport: HTTPTransport, @unchecked Sendable {
    // @unchecked Sendable: HTTPClient serialises its own access.
    let client: HTTPClient

    /// `caFile`: a PEM bundle of certificate authorities to trust instead of the system's
    /// (`CurlTransport.caFile(setting:environment:)` chooses it).
    public init(connectTimeout: Double = 10, totalTimeout: Double = 60, caFile: String? = nil) {
        var configuration = HTTPClient.Configuration()
        configuration.connectTimeout = connectTimeout
        configuration.totalTimeout = totalTimeout
        configuration.caFile = caFile
        configuration.userAgent = "ostack"
        client = HTTPClient(configuration: configuration)
    }

    /// The CA bundle to use, as curl users expect: the `tls.ca-file` setting, else `CURL_CA_BUNDLE`,
    /// else `SSL_CERT_FILE`; nil (the system's) when none is set or the value is empty.
    public static func caFile(setting: String?, environment: [String: String]) -> String? {
        for candidate in [setting, environment["CURL_CA_BUNDLE"], environment["SSL_CERT_FILE"]] {
            if let candidate, !candidate.isEmpty { return candidate }
        }
        return nil
    }

    public func send(_ request: TransportRequest) throws(TransportFailure) -> TransportResponse {
        guard let method = HTTPRequest.Method(rawValue: request.method) else { throw .invalidURL }
        do {
            let response = try client.send(
                HTTPRequest(method: method, url: request.url, headers: request.headers, body: request.body))
            return TransportResponse(status: response.status, headers: response.headers, body: response.body)
        } catch {
            switch error {
            case .connectionRefused: throw .connectionRefused
            case .dnsFailure: throw .dnsFailure
            case .timeout: throw .timeout
            case .tls: throw .tls
            case .tooLarge: throw .tooLarge
            case .connectionDropped: throw .connectionDropped
            case .invalidURL: throw .invalidURL
            case .tooManyRedirects: throw .tooManyRedirects
            case .other(let code): throw .other(code)
            }
        }
    }
}
