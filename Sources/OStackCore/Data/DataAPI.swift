import FoundationEssentials
import Synchronization

/// The data and metadata routes (`Endpoint`) for one account, through its `SessionKeeper`
/// (refresh before use, one refresh-and-retry on 401). Non-2xx answers become `ServerError`s that
/// keep the status, code and field names only — never the server's text. Paths come from the
/// account's discovery document (`ServerDirectory`), loaded on first use.
public struct DataAPI: Sendable {
    public let account: Account
    public let keeper: SessionKeeper
    public let directory: ServerDirectory
    /// Sent as `Accept-Language` (labels in metadata come translated).
    public let locale: String?

    public init(
        account: Account, keeper: SessionKeeper, directory: ServerDirectory = ServerDirectory(), locale: String? = nil
    ) {
        self.account = account
        self.keeper = keeper
        self.directory = directory
        self.locale = locale
    }

    /// A response the caller must classify (sync) rather than throw on.
    public struct Outcome: Sendable {
        public var response: TransportResponse
        /// The body parsed (on each access: a pull reads its big pages without ever building this).
        public var json: JSONValue? { response.status == 304 ? nil : JSONValue.parse(response.body) }
        public var ok: Bool { (200..<300).contains(response.status) }
        public var error: ServerError { ServerError(response: response) }
    }

    public func url(_ endpoint: Endpoint, query: [(String, String)] = []) -> String {
        var url = account.server.url(endpoint.path(directory.discovery.routes))
        if !query.isEmpty {
            url += "?" + query.map { "\(Self.percentEncode($0.0))=\(Self.percentEncode($0.1))" }.joined(separator: "&")
        }
        return url
    }

    /// The longest address ostack sends: nginx's default buffer for a request line is 8 KiB (more is
    /// 414), Node's limit for the request line and headers together 16 KiB (more is 431).
    public static let maxURLBytes = 8 << 10

    /// Sends and returns the outcome whatever the status; transport failures and an expired session
    /// throw (`offline`/`timeout`/`tls`, `session-expired`). An address over `maxURLBytes` is not
    /// sent: `request-too-long`.
    public func exchange(
        _ endpoint: Endpoint, query: [(String, String)] = [], body: JSONValue? = nil, headers: [(String, String)] = []
    ) throws(OStackError) -> Outcome {
        let target = url(endpoint, query: query)
        guard target.utf8.count <= Self.maxURLBytes else {
            var error = OStackError(
                .requestTooLong, context: .init(host: account.server.authority),
                detail: "address of \(target.utf8.count) bytes")
            error.requestNotSent = true
            throw error
        }
        let bytes = body?.serialized()
        let method = endpoint.method
        let response = try keeper.send(account) { authorization in
            var all = [authorization, ("Accept", "application/json")] + headers
            if let locale { all.append(("Accept-Language", locale)) }
            if bytes != nil { all.append(("Content-Type", "application/json")) }
            return TransportRequest(method: method, url: target, headers: all, body: bytes)
        }
        return Outcome(response: response)
    }

    /// `ostack api`: any request to the account's own server with its credentials (refreshed and
    /// retried once on a 401 like every other request). `path` is an absolute path on the server,
    /// query included, already checked by the caller (`APIPath`).
    public func raw(
        method: String, path: String, headers: [(String, String)], body: [UInt8]?
    ) throws(OStackError) -> Outcome {
        let target = account.server.url(path)
        let response = try keeper.send(account) { authorization in
            var all = [authorization, ("Accept", "application/json")] + headers
            if let locale { all.append(("Accept-Language", locale)) }
            if body != nil && !headers.contains(where: { $0.0.lowercased() == "content-type" }) {
                all.append(("Content-Type", "application/json"))
            }
            return TransportRequest(method: method, url: target, headers: all, body: body)
        }
        return Outcome(response: response)
    }

    /// Like `exchange`, but a non-2xx status throws the mapped user-safe error.
    public func call(
        _ endpoint: Endpoint, query: [(String, String)] = [], body: JSONValue? = nil, headers: [(String, String)] = []
    ) throws(OStackError) -> JSONValue {
        let outcome = try exchange(endpoint, query: query, body: body, headers: headers)
        guard outcome.ok else {
            throw outcome.error.asOStackError(account: account.alias, host: account.server.authority)
        }
        guard let json = JSONValue.parse(outcome.response.body) else {
            throw OStackError(
                .unexpectedResponse, context: .init(host: account.server.authority), detail: "\(endpoint): not JSON")
        }
        return json
    }

    /// RFC 3986 unreserved characters stay; everything else is %-encoded (also in query values).
    public static func percentEncode(_ text: String) -> String {
        var result = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                result.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".unicodeScalars)
                result.unicodeScalars.append("%")
                result.unicodeScalars.append(hex[Int(byte >> 4)])
                result.unicodeScalars.append(hex[Int(byte & 0xF)])
            }
        }
        return result
    }
}

/// An account's discovery document, loaded once per process on first use (`load` reads the
/// account's cache or asks the server, and falls back to ObjectStack's default routes).
public final class ServerDirectory: Sendable {
    let load: @Sendable () -> Discovery
    let loaded = Mutex<Discovery?>(nil)

    public init(_ load: @escaping @Sendable () -> Discovery = { Discovery() }) {
        self.load = load
    }

    public var discovery: Discovery {
        loaded.withLock { loaded in
            if let loaded { return loaded }
            let value = load()
            loaded = value
            return value
        }
    }
}
