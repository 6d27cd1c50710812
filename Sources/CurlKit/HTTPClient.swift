internal import CCurl
internal import CCurlShims
import Synchronization
import Glibc

/// An HTTP/1.1 client over one reused libcurl easy handle (keep-alive across requests).
///
/// - TLS verification is always on; only `http` and `https` are allowed; no cookie engine.
/// - Every request is bounded by the connect and total timeouts.
/// - The response body is capped while it is received (`HTTPError.tooLarge`).
/// - Redirects are followed by this class, not by libcurl, so credential headers are dropped when
///   the scheme, host or port changes, and an https → http downgrade is refused.
/// - Requests on one client are serialised (one handle); use several clients for parallelism.
public final class HTTPClient: @unchecked Sendable {
    // @unchecked Sendable: the easy handle is only touched while `lock` is held.
    public struct Configuration: Sendable {
        public var connectTimeout: Double = 10
        public var totalTimeout: Double = 60
        public var maxResponseBytes: Int = 64 << 20
        public var userAgent: String = "ostack"
        public var maxRedirects: Int = 5
        /// A PEM bundle of certificate authorities to verify servers with instead of the system's
        /// (a private CA; like curl's `--cacert`). Nil: the system's.
        public var caFile: String?

        public init() {}
    }

    public let configuration: Configuration
    private let handle: UnsafeMutableRawPointer
    private let lock = Mutex(())

    private static let globalInit: Bool = {
        curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK
    }()

    public init(configuration: Configuration = Configuration()) {
        precondition(Self.globalInit, "curl_global_init failed")
        guard let handle = curl_easy_init() else { fatalError("curl_easy_init failed: out of memory") }
        self.handle = handle
        self.configuration = configuration
    }

    deinit {
        curl_easy_cleanup(handle)
    }

    /// Sends a request and returns the final response (after redirects this class follows).
    public func send(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        try lock.withLock { _ throws(HTTPError) -> HTTPResponse in
            var current = request
            for hop in 0...configuration.maxRedirects {
                let response: HTTPResponse
                do throws(HTTPError) {
                    response = try perform(current)
                } catch  where hop > 0 && error.meansNotSent {
                    // The first request went out and was answered (with a redirect): whatever it
                    // carried may have been carried out, so this is no "never sent".
                    throw .connectionDropped
                }
                guard [301, 302, 303, 307, 308].contains(response.status), let location = response.header("Location")
                else { return response }
                current = try Self.redirect(current, status: response.status, location: location)
            }
            throw HTTPError.tooManyRedirects
        }
    }

    // MARK: Redirects

    /// The request to send for a redirect response (exposed for tests through `HTTPClientRedirectProbe`).
    static func redirect(_ request: HTTPRequest, status: Int, location: String) throws(HTTPError) -> HTTPRequest {
        guard let from = URLParts(request.url) else { throw .invalidURL }
        let target: String
        if location.hasPrefix("http://") || location.hasPrefix("https://") {
            target = location
        } else if location.hasPrefix("//") {
            target = from.scheme + ":" + location
        } else if location.hasPrefix("/") {
            target = from.origin + location
        } else {
            throw .tooManyRedirects  // relative-path redirects are not used by ObjectStack
        }
        guard let to = URLParts(target) else { throw .tooManyRedirects }
        if from.scheme == "https" && to.scheme == "http" { throw .tooManyRedirects }
        var next = request
        next.url = target
        // Never to another origin: ostack talks to one server, a credential-less request there would
        // only be refused (and read as a signed-out session), and a body (a password, a write) must
        // not leave the origin it was meant for.
        if to.origin != from.origin { throw .tooManyRedirects }
        // A redirect that would turn a write into a GET (303, or 301/302 after a POST) is not
        // followed: the GET's answer says nothing of whether the write was carried out, yet read
        // as the write's answer it could look like proof (the record, with our id). The write's
        // outcome stays unknown instead (`tooManyRedirects`: possibly delivered). A 303 to a GET
        // stays a GET; 307/308 repeat the same request.
        if request.method != .get && request.method != .head
            && (status == 303 || ((status == 301 || status == 302) && request.method == .post))
        {
            throw .tooManyRedirects
        }
        return next
    }

    // MARK: One transfer

    private func perform(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        guard let parts = URLParts(request.url), parts.scheme == "http" || parts.scheme == "https" else {
            throw .invalidURL
        }
        curl_easy_reset(handle)  // keeps live connections, DNS and TLS session caches
        let collector = ResponseCollector(limit: configuration.maxResponseBytes)
        let context = Unmanaged.passRetained(collector)
        defer { context.release() }

        var headerList: UnsafeMutablePointer<curl_slist>?
        for (name, value) in request.headers {
            headerList = curl_slist_append(headerList, "\(name): \(value)")
        }
        headerList = curl_slist_append(headerList, "Expect:")  // never wait for 100-continue
        defer { curl_slist_free_all(headerList) }

        var failed = false
        func set(_ rc: CURLcode) { if rc != CURLE_OK { failed = true } }
        set(ccurl_setopt_string(handle, CURLOPT_URL, request.url))
        // Proxies come from the environment as curl reads them (`https_proxy`, `HTTPS_PROXY`,
        // `ALL_PROXY`, `NO_PROXY`), for `https` only: a plain `http` request through a proxy hands it
        // the credentials in clear text (and a proxy cannot reach this machine's loopback, which is
        // where such servers usually are).
        // One rule for the request and for the hint that names a proxy (`ProxyUse`).
        if !ProxyUse.applies(scheme: parts.scheme, host: parts.host) {
            set(ccurl_setopt_string(handle, CURLOPT_NOPROXY, "*"))
        }
        set(ccurl_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https"))
        set(ccurl_setopt_long(handle, CURLOPT_NOSIGNAL, 1))
        set(ccurl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, Int(configuration.connectTimeout * 1000)))
        set(ccurl_setopt_long(handle, CURLOPT_TIMEOUT_MS, Int(configuration.totalTimeout * 1000)))
        set(ccurl_setopt_long(handle, CURLOPT_SSL_VERIFYPEER, 1))
        set(ccurl_setopt_long(handle, CURLOPT_SSL_VERIFYHOST, 2))
        if let caFile = configuration.caFile {
            // Instead of the system's, not in addition: the built-in CA directory is switched off too.
            set(ccurl_setopt_string(handle, CURLOPT_CAINFO, caFile))
            set(ccurl_setopt_pointer(handle, CURLOPT_CAPATH, nil))
        }
        set(ccurl_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 0))
        set(ccurl_setopt_long(handle, CURLOPT_TCP_NODELAY, 1))
        set(ccurl_setopt_offset(handle, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(configuration.maxResponseBytes)))
        set(ccurl_setopt_string(handle, CURLOPT_USERAGENT, configuration.userAgent))
        set(ccurl_setopt_pointer(handle, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(headerList)))
        set(ccurl_setopt_callback(handle, CURLOPT_WRITEFUNCTION, curlWriteBody))
        set(ccurl_setopt_pointer(handle, CURLOPT_WRITEDATA, context.toOpaque()))
        set(ccurl_setopt_callback(handle, CURLOPT_HEADERFUNCTION, curlWriteHeader))
        set(ccurl_setopt_pointer(handle, CURLOPT_HEADERDATA, context.toOpaque()))

        // libcurl re-sends a request once, on a new connection, when a reused keep-alive connection
        // closes before any response byte. For a write that is a second write the server may carry
        // out (ObjectStack reads no Idempotency-Key), so a POST or PATCH always gets a fresh
        // connection and is never re-sent; the sync core decides what to send again.
        if request.method == .post || request.method == .patch {
            set(ccurl_setopt_long(handle, CURLOPT_FRESH_CONNECT, 1))
        }
        switch request.method {
        case .get: break
        case .head: set(ccurl_setopt_long(handle, CURLOPT_NOBODY, 1))
        case .post: set(ccurl_setopt_long(handle, CURLOPT_POST, 1))
        case .put, .patch, .delete: set(ccurl_setopt_string(handle, CURLOPT_CUSTOMREQUEST, request.method.rawValue))
        }
        if failed { throw .other(Int(CURLE_BAD_FUNCTION_ARGUMENT.rawValue)) }

        let body = request.body ?? (request.method == .post ? [] : nil)
        let code: CURLcode
        if let body, body.isEmpty {
            _ = ccurl_setopt_offset(handle, CURLOPT_POSTFIELDSIZE_LARGE, 0)
            _ = ccurl_setopt_string(handle, CURLOPT_COPYPOSTFIELDS, "")
            code = curl_easy_perform(handle)
        } else if let body {
            code = body.withUnsafeBytes { bytes -> CURLcode in
                // libcurl reads the body from our buffer during perform (no copy); it stays valid here.
                _ = ccurl_setopt_offset(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(bytes.count))
                _ = ccurl_setopt_pointer(
                    handle, CURLOPT_POSTFIELDS, UnsafeMutableRawPointer(mutating: bytes.baseAddress!))
                return curl_easy_perform(handle)
            }
        } else {
            code = curl_easy_perform(handle)
        }
        if code != CURLE_OK {
            throw Self.map(code, overflowed: collector.overflowed)
        }
        var status = 0
        _ = ccurl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        return HTTPResponse(status: status, headers: collector.headers, body: collector.body, url: request.url)
    }

    static func map(_ code: CURLcode, overflowed: Bool) -> HTTPError {
        switch code {
        case CURLE_COULDNT_CONNECT: return .connectionRefused
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY: return .dnsFailure
        case CURLE_OPERATION_TIMEDOUT: return .timeout
        case CURLE_WRITE_ERROR where overflowed, CURLE_FILESIZE_EXCEEDED: return .tooLarge
        case CURLE_GOT_NOTHING, CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_PARTIAL_FILE: return .connectionDropped
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
            CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_ENGINE_NOTFOUND:
            return .tls
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL: return .invalidURL
        default: return .other(Int(code.rawValue))
        }
    }

    /// Connections opened by this client so far (for keep-alive checks and benchmarks).
    public func connectionsOpenedByLastRequest() -> Int {
        lock.withLock { _ in
            var count = 0
            _ = ccurl_getinfo_long(handle, CURLINFO_NUM_CONNECTS, &count)
            return count
        }
    }
}

/// Collects one response; its address is the callbacks' user data.
final class ResponseCollector {
    /// Header bytes one transfer may bring, redirects and interim answers included: far above any
    /// honest server's, far below what would strain memory.
    static let maxHeaderBytes = 256 * 1024

    let limit: Int
    var body: [UInt8] = []
    var headers: [(String, String)] = []
    var headerBytes = 0
    var overflowed = false

    init(limit: Int) {
        self.limit = limit
    }
}

/// CURLOPT_WRITEFUNCTION: append body bytes, or stop the transfer when the cap would be exceeded.
private func curlWriteBody(
    _ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?
)
    -> Int
{
    guard let data, let context else { return 0 }
    let collector = Unmanaged<ResponseCollector>.fromOpaque(context).takeUnretainedValue()
    let length = size * count
    if collector.body.count + length > collector.limit {
        collector.overflowed = true
        return 0  // libcurl aborts with CURLE_WRITE_ERROR
    }
    data.withMemoryRebound(to: UInt8.self, capacity: length) {
        collector.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: length))
    }
    return length
}

/// CURLOPT_HEADERFUNCTION: one header line per call; a new status line starts a new header set.
private func curlWriteHeader(
    _ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?
) -> Int {
    guard let data, let context else { return 0 }
    let collector = Unmanaged<ResponseCollector>.fromOpaque(context).takeUnretainedValue()
    let length = size * count
    collector.headerBytes += length
    if collector.headerBytes > ResponseCollector.maxHeaderBytes {
        collector.overflowed = true
        return 0  // libcurl aborts with CURLE_WRITE_ERROR
    }
    let line = data.withMemoryRebound(to: UInt8.self, capacity: length) {
        String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
    }
    if line.hasPrefix("HTTP/") {
        collector.headers.removeAll()
    } else if let colon = line.firstIndex(of: ":") {
        let name = String(line[..<colon]).trimmingCharacters()
        let value = String(line[line.index(after: colon)...]).trimmingCharacters()
        collector.headers.append((name, value))
    }
    return length
}

/// Whether a request goes through a proxy from the environment: `https` only (through a CONNECT
/// tunnel, so the proxy never sees the credentials), never to a loopback address.
public enum ProxyUse {
    public static func applies(scheme: String, host: String) -> Bool {
        scheme.lowercased() == "https" && !URLParts.isLoopback(host: host)
    }
}

/// Scheme, host and port of an absolute URL (enough to compare origins for redirects).
struct URLParts: Equatable {
    var scheme: String
    var host: String
    var port: Int

    init?(_ url: String) {
        guard let separator = url.firstRange(of: "://") else { return nil }
        scheme = url[..<separator.lowerBound].lowercased()
        let rest = url[separator.upperBound...]
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard !authority.isEmpty, !authority.contains("@") else { return nil }
        var hostPart = Substring(authority)
        var explicitPort: Int?
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
            hostPart = authority[authority.startIndex...close]
            let after = authority[authority.index(after: close)...]
            if after.hasPrefix(":") { explicitPort = Int(after.dropFirst()) }
        } else if let colon = authority.lastIndex(of: ":") {
            hostPart = authority[..<colon]
            explicitPort = Int(authority[authority.index(after: colon)...])
            if explicitPort == nil { return nil }
        }
        host = hostPart.lowercased()
        port = explicitPort ?? (scheme == "https" ? 443 : 80)
    }

    var origin: String { "\(scheme)://\(host):\(port)" }

    /// `localhost` (and `*.localhost`), `127.0.0.0/8` or `[::1]`.
    var isLoopback: Bool { URLParts.isLoopback(host: host) }

    /// Every spelling the resolver takes for a loopback address: `localhost` (and `*.localhost`, with
    /// or without the final dot), any IPv4 form `inet_aton` reads (`127.1`, `2130706433`,
    /// `0x7f000001`) in 127.0.0.0/8, and the IPv6 loopback however written (`[0::1]`), IPv4-mapped
    /// ones (`[::ffff:127.0.0.1]`) too. (Only the dotted quad and `[::1]` were known: an https request
    /// to `127.1` went to a proxy, and failed.)
    static func isLoopback(host raw: String) -> Bool {
        var host = raw.lowercased()
        if host.hasSuffix(".") && !host.hasPrefix("[") { host.removeLast() }
        if host == "localhost" || host.hasSuffix(".localhost") { return true }
        if host.hasPrefix("[") && host.hasSuffix("]") {
            var address = in6_addr()
            let inner = String(host.dropFirst().dropLast())
            guard inet_pton(AF_INET6, inner, &address) == 1 else { return false }
            let bytes = withUnsafeBytes(of: address) { Array($0) }
            if bytes[0..<15].allSatisfy({ $0 == 0 }) && bytes[15] == 1 { return true }  // ::1
            // ::ffff:a.b.c.d, an IPv4-mapped address
            return bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xff && bytes[11] == 0xff && bytes[12] == 127
        }
        guard let first = host.first, first.isNumber else { return false }
        var address = in_addr()
        guard inet_aton(host, &address) != 0 else { return false }
        return UInt32(bigEndian: address.s_addr) >> 24 == 127
    }
}

extension String {
    fileprivate func trimmingCharacters() -> String {
        var slice = Substring(self)
        while let first = slice.first, first.isWhitespace { slice.removeFirst() }
        while let last = slice.last, last.isWhitespace { slice.removeLast() }
        return String(slice)
    }
}

/// Test access to the redirect policy without a TLS server.
public enum HTTPClientRedirectProbe {
    public static func redirect(_ request: HTTPRequest, status: Int, location: String) throws(HTTPError) -> HTTPRequest
    {
        try HTTPClient.redirect(request, status: status, location: location)
    }
}
