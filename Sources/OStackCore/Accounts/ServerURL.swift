import FoundationEssentials

/// A normalised ObjectStack server URL (docs/storage.md, "Accounts and the registry").
///
/// - `crm.example.com` → `https://crm.example.com`
/// - `localhost:8080`, `127.0.0.1`, `*.local`, `[::1]` and private LAN addresses without a scheme
///   get `http://`
/// - a path prefix is kept, trailing slashes are dropped, the host is lower-cased and the scheme's
///   default port is removed
/// - credentials, queries and fragments are refused (a secret must never sit in a URL)
/// - plain `http://` to a non-local host is refused unless explicitly allowed.
public struct ServerURL: Sendable, Hashable, Codable, CustomStringConvertible {
    public enum Scheme: String, Sendable, Codable { case http, https }

    public let scheme: Scheme
    /// Lower-case host name or IP literal (IPv6 without brackets).
    public let host: String
    /// Explicit non-default port, if any.
    public let port: Int?
    /// Path prefix without a trailing slash ("" or "/crm").
    public let pathPrefix: String

    /// Parses and normalises user input.
    public init(parsing input: String, allowInsecureHTTP: Bool = false) throws(OStackError) {
        var rest = input.trimmingWhitespace()
        guard !rest.isEmpty else { throw OStackError(.invalidServerURL, detail: "empty server URL") }
        var scheme: Scheme?
        if let range = rest.firstRange(of: "://") {
            switch rest[..<range.lowerBound].lowercased() {
            case "https": scheme = .https
            case "http": scheme = .http
            default: throw OStackError(.invalidServerURL, detail: "unsupported scheme")
            }
            rest = String(rest[range.upperBound...])
        }
        if rest.contains("?") || rest.contains("#") {
            throw OStackError(.invalidServerURL, detail: "query or fragment in server URL")
        }
        let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = String(rest[..<authorityEnd])
        var path = String(rest[authorityEnd...])
        if authority.contains("@") {
            throw OStackError(.invalidServerURL, detail: "credentials in server URL")
        }
        let (host, port) = try Self.splitAuthority(authority)
        guard Self.isValidHost(host) else { throw OStackError(.invalidServerURL, detail: "invalid host") }
        while path.hasSuffix("/") { path.removeLast() }
        guard path.allSatisfy({ $0.isASCII && !$0.isWhitespace && $0 != "\\" }) else {
            throw OStackError(.invalidServerURL, detail: "invalid path")
        }

        let local = Self.isLocal(host)
        let resolvedScheme = scheme ?? (local ? .http : .https)
        if resolvedScheme == .http && !local && !allowInsecureHTTP {
            throw OStackError(.insecureServerURL, context: .init(host: host), detail: "plain http to a non-local host")
        }
        let defaultPort = resolvedScheme == .https ? 443 : 80
        self.scheme = resolvedScheme
        self.host = host
        self.port = port == defaultPort ? nil : port
        self.pathPrefix = path
    }

    /// `host` or `host:port` (IPv6 literals in brackets), as used in account ids.
    public var authority: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        if let port { return "\(shownHost):\(port)" }
        return shownHost
    }

    /// The base URL string, e.g. `https://crm.example.com/prefix`.
    public var absoluteString: String { "\(scheme.rawValue)://\(authority)\(pathPrefix)" }

    public var description: String { absoluteString }

    /// `absoluteString` + `path` (which starts with "/").
    public func url(_ path: String) -> String { absoluteString + path }

    /// Whether the host is loopback, `.local`, or a private LAN address.
    public var isLocal: Bool { Self.isLocal(host) }

    // MARK: Parsing helpers

    private static func splitAuthority(_ authority: String) throws(OStackError) -> (String, Int?) {
        var hostPart = authority
        var portPart: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else {
                throw OStackError(.invalidServerURL, detail: "unterminated IPv6 literal")
            }
            hostPart = String(authority[authority.index(after: authority.startIndex)..<close])
            let after = authority[authority.index(after: close)...]
            if after.hasPrefix(":") {
                portPart = after.dropFirst()
            } else if !after.isEmpty {
                throw OStackError(.invalidServerURL, detail: "invalid authority")
            }
        } else if let colon = authority.lastIndex(of: ":") {
            hostPart = String(authority[..<colon])
            portPart = authority[authority.index(after: colon)...]
        }
        var port: Int?
        if let portPart {
            guard let value = Int(portPart), (1...65535).contains(value) else {
                throw OStackError(.invalidServerURL, detail: "invalid port")
            }
            port = value
        }
        return (hostPart.lowercased(), port)
    }

    private static func isValidHost(_ host: String) -> Bool {
        guard !host.isEmpty, host.count <= 253 else { return false }
        if host.contains(":") {  // IPv6 literal
            return host.allSatisfy { $0.isHexDigit || $0 == ":" || $0 == "." }
        }
        return host.allSatisfy { ($0.isASCII && ($0.isLetter || $0.isNumber)) || $0 == "-" || $0 == "." }
            && !host.hasPrefix(".") && !host.hasPrefix("-")
    }

    /// The host of an authority (`host:port`, `[v6]:port`), lowercased, brackets removed.
    public static func host(ofAuthority authority: String) -> String {
        (try? splitAuthority(authority).0) ?? authority.lowercased()
    }

    public static func isLocal(_ host: String) -> Bool {
        if host == "localhost" || host.hasSuffix(".localhost") || host.hasSuffix(".local") { return true }
        if host == "::1" { return true }
        let lower = host.lowercased()
        if lower.hasPrefix("fe80:") || lower.hasPrefix("fc") || lower.hasPrefix("fd") { return host.contains(":") }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false).compactMap { UInt8($0) }
        guard octets.count == 4, host.split(separator: ".").count == 4 else { return false }
        switch (octets[0], octets[1]) {
        case (127, _), (10, _), (192, 168), (169, 254): return true
        case (172, let second): return (16...31).contains(second)
        default: return false
        }
    }
}

extension String {
    public func trimmingWhitespace() -> String {
        var scalars = Substring(self)
        while let first = scalars.first, first.isWhitespace { scalars.removeFirst() }
        while let last = scalars.last, last.isWhitespace { scalars.removeLast() }
        return String(scalars)
    }
}
