import FoundationEssentials
import SodiumKit

/// The user as the server reports it (docs/protocol.md, "Authentication").
public struct RemoteUser: Sendable, Equatable {
    public var id: String
    public var email: String
    public var name: String
}

/// A better-auth session as `get-session` reports it.
public struct RemoteSession: Sendable {
    public var user: RemoteUser
    public var expiresAt: Date?
    /// A new token when the server rotated it (`set-auth-token` header or `session.token`).
    public var rotatedToken: SessionCredential?
}

/// The result of `sign-in/email`.
public struct SignInResult: Sendable {
    public var token: SessionCredential
    public var user: RemoteUser
}

/// Discovery, sign-in, session and sign-out calls of the ObjectStack protocol (docs/protocol.md).
/// Every failure is mapped to `OStackError`; server text never passes through.
public struct AuthAPI: Sendable {
    public let server: ServerURL
    public let transport: any HTTPTransport

    public init(server: ServerURL, transport: any HTTPTransport) {
        self.server = server
        self.transport = transport
    }

    /// Checks that the URL serves ObjectStack: bare `/api/v1/discovery`, or the wrapped
    /// `/.well-known/objectstack` at the origin. Both need `routes.data` and `routes.metadata`.
    @discardableResult
    public func discover() throws(OStackError) -> (discovery: Discovery, document: JSONValue) {
        let first = try send(TransportRequest(method: "GET", url: server.url(ServerRoutes().discovery)))
        if first.status == 200, let json = JSONValue.parse(first.body), let discovery = Discovery(document: json) {
            return (discovery, json)
        }
        let origin = "\(server.scheme.rawValue)://\(server.authority)"
        let second = try send(TransportRequest(method: "GET", url: origin + "/.well-known/objectstack"))
        if second.status == 200, let json = JSONValue.parse(second.body), let discovery = Discovery(document: json) {
            return (discovery, json)
        }
        throw OStackError(.notObjectStack, context: .init(host: server.authority), detail: "no discovery document")
    }

    /// The server's clock, from the `Date` header of its discovery route (nil: no answer or no date).
    public func serverDate() -> Date? {
        guard let response = try? send(TransportRequest(method: "GET", url: server.url(ServerRoutes().discovery))),
            let date = response.header("Date")
        else { return nil }
        return HTTPDate.parse(date)
    }

    /// `POST /api/v1/auth/sign-in/email`. Wrong credentials → `wrong-credentials`.
    public func signIn(email: String, password: SecretBytes) throws(OStackError) -> SignInResult {
        var body = Self.signInBody(email: email, password: password)
        defer { SecretBytes.wipe(&body) }
        let response = try send(
            TransportRequest(
                method: "POST", url: server.url("/api/v1/auth/sign-in/email"),
                headers: [("Content-Type", "application/json"), ("Accept", "application/json")], body: body))
        switch response.status {
        case 200, 201: break
        case 401, 400:
            throw OStackError(.wrongCredentials, context: .init(host: server.authority), detail: "sign-in refused")
        default:
            throw ServerError(response: response).asOStackError(account: nil, host: server.authority)
        }
        guard let json = JSONValue.parse(response.body), let user = Self.user(json["user"]) else {
            throw OStackError(.unexpectedResponse, context: .init(host: server.authority), detail: "sign-in body")
        }
        let tokenText = response.header("set-auth-token") ?? json["token"]?.stringValue
        guard let tokenText, Self.isPlausibleToken(tokenText) else {
            throw OStackError(.unexpectedResponse, context: .init(host: server.authority), detail: "no token")
        }
        return SignInResult(token: SessionCredential(SecretBytes(copying: Array(tokenText.utf8))), user: user)
    }

    /// `GET /api/v1/auth/get-session`. Returns nil when the server says the token is not signed in
    /// (JSON `null` or 401). Extends the session's sliding expiry on the server as a side effect.
    public func getSession(token: SessionCredential) throws(OStackError) -> RemoteSession? {
        let response = try send(
            TransportRequest(
                method: "GET", url: server.url("/api/v1/auth/get-session"),
                headers: [Self.authorization(token), ("Accept", "application/json")]))
        if response.status == 401 { return nil }
        guard response.status == 200 else {
            throw ServerError(response: response).asOStackError(account: nil, host: server.authority)
        }
        guard let json = JSONValue.parse(response.body) else {
            throw OStackError(.unexpectedResponse, context: .init(host: server.authority), detail: "session body")
        }
        if json.isNull { return nil }
        guard let user = Self.user(json["user"]) else {
            throw OStackError(.unexpectedResponse, context: .init(host: server.authority), detail: "session user")
        }
        let expiresAt = json["session"]?["expiresAt"]?.stringValue.flatMap(Self.parseDate)
        var rotated: SessionCredential?
        let candidate = response.header("set-auth-token") ?? json["session"]?["token"]?.stringValue
        if let candidate, Self.isPlausibleToken(candidate) {
            let bytes = SessionCredential(SecretBytes(copying: Array(candidate.utf8)))
            if !(bytes == token) && !Self.isSameSessionInSignedForm(candidate, token: token) { rotated = bytes }
        }
        return RemoteSession(user: user, expiresAt: expiresAt, rotatedToken: rotated)
    }

    /// Whether an API key is accepted. ObjectStack resolves keys on data and metadata routes only
    /// (`get-session` answers `null` for them), so the key reads the metadata route given
    /// (`{metadata}/object`): 2xx → valid; 401/403 → not a valid key; anything else is an error.
    public func acceptsAPIKey(_ key: SessionCredential, metadataRoute: String) throws(OStackError) -> Bool {
        let response = try send(
            TransportRequest(
                method: "GET", url: server.url(metadataRoute + "/object"),
                headers: [Self.authorization(key), ("Accept", "application/json")]))
        switch response.status {
        case 200..<300: return true
        case 401, 403: return false
        default: throw ServerError(response: response).asOStackError(account: nil, host: server.authority)
        }
    }

    /// `POST /api/v1/auth/sign-out`, best effort: errors are returned, never fatal to the caller.
    public func signOut(token: SessionCredential) throws(OStackError) {
        let response = try send(
            TransportRequest(
                method: "POST", url: server.url("/api/v1/auth/sign-out"),
                headers: [Self.authorization(token), ("Content-Type", "application/json")], body: Array("{}".utf8)))
        if response.status >= 400 && response.status != 401 {
            throw ServerError(response: response).asOStackError(account: nil, host: server.authority)
        }
    }

    // MARK: Helpers

    func send(_ request: TransportRequest) throws(OStackError) -> TransportResponse {
        do {
            return try transport.send(request)
        } catch {
            throw error.asOStackError(account: nil, host: server.authority)
        }
    }

    /// `Authorization: Bearer <token>`; the header value exists only for the duration of a request.
    static func authorization(_ token: SessionCredential) -> (String, String) {
        ("Authorization", "Bearer " + token.bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) })
    }

    /// A signed `set-auth-token` value is `<token>.<signature>`: the same session, not a rotation.
    static func isSameSessionInSignedForm(_ candidate: String, token: SessionCredential) -> Bool {
        func base<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> Bytes.SubSequence {
            bytes.firstIndex(of: UInt8(ascii: ".")).map { bytes[..<$0] } ?? bytes[...]
        }
        let candidateBase = base(Array(candidate.utf8))
        return token.bytes.withUnsafeBytes { base($0).elementsEqual(candidateBase) }
    }

    static func isPlausibleToken(_ text: String) -> Bool {
        (8...4096).contains(text.utf8.count) && text.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }

    static func user(_ json: JSONValue?) -> RemoteUser? {
        guard let json, let id = json["id"]?.stringValue else { return nil }
        return RemoteUser(
            id: id, email: json["email"]?.stringValue ?? "", name: json["name"]?.stringValue ?? "")
    }

    /// JSON-encodes `{"email":…,"password":…}` without the password ever becoming a `String`.
    static func signInBody(email: String, password: SecretBytes) -> [UInt8] {
        var body = Array("{\"email\":".utf8)
        body += Self.jsonString(Array(email.utf8))
        body += Array(",\"password\":".utf8)
        password.withUnsafeBytes { body += Self.jsonString(Array($0)) }
        body += Array("}".utf8)
        return body
    }

    static func jsonString(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [UInt8(ascii: "\"")]
        let hex = Array("0123456789abcdef".utf8)
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\""): out += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
            case UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case 0..<0x20: out += Array("\\u00".utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
        return out
    }

    /// ISO-8601 with or without fractional seconds.
    public static func parseDate(_ text: String) -> Date? {
        if let date = try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)) {
            return date
        }
        return try? Date(text, strategy: Date.ISO8601FormatStyle())
    }
}
