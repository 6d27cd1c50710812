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
    /// The session's active organization (`session.activeOrganizationId`), when it names one.
    public var activeOrganizationID: String? = nil
    /// Whether the body names `rotatedToken` as its session's token (`session.token`, or the
    /// header's signed form of it): then the answer that names the user names the new token too.
    public var rotatedTokenInBody = false
}

/// The result of `sign-in/email`.
public struct SignInResult: Sendable {
    public var token: SessionCredential
    public var user: RemoteUser
}

/// A password sign-in: done, or waiting for a second factor.
public enum SignInOutcome: Sendable {
    case signedIn(SignInResult)
    /// The methods the server offers, and the challenge (the `better-auth.two_factor` cookie).
    case twoFactor(methods: [String], challenge: SecretBytes)
}

/// The second factors ostack can complete (the route under `{auth}/two-factor/`).
public enum TwoFactorMethod: String, Sendable {
    case totp = "verify-totp"
    case backupCode = "verify-backup-code"
}

/// Discovery, sign-in, session and sign-out calls of the ObjectStack protocol (docs/protocol.md).
/// Every failure is mapped to `OStackError`; server text never passes through.
public struct AuthAPI: Sendable {
    public let server: ServerURL
    public let transport: any HTTPTransport
    /// The server's routes (its discovery document's); ObjectStack's defaults until discovered.
    public let routes: ServerRoutes

    public init(server: ServerURL, transport: any HTTPTransport, routes: ServerRoutes = ServerRoutes()) {
        self.server = server
        self.transport = transport
        self.routes = routes
    }

    /// For a registered account: its server and the routes recorded at sign-in.
    public init(account: Account, transport: any HTTPTransport) {
        self.init(server: account.server, transport: transport, routes: account.routes ?? ServerRoutes())
    }

    /// Checks that the URL serves ObjectStack: its discovery route (`/api/v1/discovery` by default),
    /// or the wrapped `/.well-known/objectstack` at the origin (which a server with another API path
    /// also serves). Both need `routes.data` and `routes.metadata`.
    /// With `wellKnown: false` only the discovery route is asked (an environment's scoped document:
    /// the origin's would name another environment's routes).
    @discardableResult
    public func discover(wellKnown: Bool = true) throws(OStackError) -> (discovery: Discovery, document: JSONValue) {
        let first = try send(TransportRequest(method: "GET", url: server.url(routes.discovery)))
        if first.status == 200, let json = JSONValue.parse(first.body), let discovery = Discovery(document: json) {
            return (discovery, json)
        }
        guard wellKnown else {
            throw OStackError(.notObjectStack, context: .init(host: server.authority), detail: "no scoped discovery")
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
        guard let response = try? send(TransportRequest(method: "GET", url: server.url(routes.discovery))),
            let date = response.header("Date")
        else { return nil }
        return HTTPDate.parse(date)
    }

    /// `POST {auth}/sign-in/email`. Wrong credentials → `wrong-credentials`. A user with two-factor
    /// sign-in gets no session yet: the answer names the methods, and the pending challenge is the
    /// `better-auth.two_factor` cookie, which `verifyTwoFactor` sends back.
    public func signIn(email: String, password: SecretBytes) throws(OStackError) -> SignInOutcome {
        var body = Self.signInBody(email: email, password: password)
        defer { SecretBytes.wipe(&body) }
        let response = try send(
            TransportRequest(
                method: "POST", url: server.url(routes.auth + "/sign-in/email"),
                headers: [("Content-Type", "application/json"), ("Accept", "application/json")], body: body))
        switch response.status {
        case 200, 201: break
        case 401, 400:
            throw OStackError(.wrongCredentials, context: .init(host: server.authority), detail: "sign-in refused")
        default:
            throw ServerError(response: response).asOStackError(account: nil, host: server.authority)
        }
        guard let json = JSONValue.parse(response.body) else {
            throw OStackError(.unexpectedResponse, context: .init(host: server.authority), detail: "sign-in body")
        }
        if json["twoFactorRedirect"]?.boolValue == true {
            // No session is due before the second factor: one the answer carries anyway is ended.
            if let stray = Self.token(response, json: json) { try? signOut(token: stray) }
            let methods = (json["twoFactorMethods"]?.arrayValue ?? []).compactMap(\.stringValue).filter(
                Self.isMethodName)
            guard let challenge = Self.twoFactorCookie(response) else {
                throw OStackError(
                    .unexpectedResponse, context: .init(host: server.authority), detail: "two-factor without a cookie")
            }
            return .twoFactor(methods: methods, challenge: challenge)
        }
        return .signedIn(try session(response, json: json))
    }

    /// Completes a two-factor sign-in: `POST {auth}/two-factor/verify-totp` (or `verify-backup-code`)
    /// with the code and the challenge cookie. A wrong or expired code → `wrong-two-factor-code`.
    public func verifyTwoFactor(_ method: TwoFactorMethod, code: SecretBytes, challenge: SecretBytes)
        throws(OStackError) -> SignInResult
    {
        var body = Array("{\"code\":".utf8)
        code.withUnsafeBytes { body += Self.jsonString(Array($0)) }
        body += Array("}".utf8)
        defer { SecretBytes.wipe(&body) }
        let cookie = challenge.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        let response = try send(
            TransportRequest(
                method: "POST", url: server.url(routes.auth + "/two-factor/" + method.rawValue),
                headers: [
                    ("Content-Type", "application/json"), ("Accept", "application/json"), ("Cookie", cookie),
                ], body: body))
        switch response.status {
        case 200, 201: break
        case 400, 401, 403:
            throw OStackError(.wrongTwoFactorCode, context: .init(host: server.authority), detail: "two-factor refused")
        default:
            throw ServerError(response: response).asOStackError(account: nil, host: server.authority)
        }
        guard let json = JSONValue.parse(response.body) else {
            throw OStackError(.unexpectedResponse, context: .init(host: server.authority), detail: "two-factor body")
        }
        return try session(response, json: json)
    }

    /// The token and user of a completed sign-in. An answer with a token but no usable user has
    /// opened a session ostack cannot register: the server is told to end it (best effort).
    func session(_ response: TransportResponse, json: JSONValue) throws(OStackError) -> SignInResult {
        let token = Self.token(response, json: json)
        guard let user = Self.user(json["user"]) else {
            if let token { try? signOut(token: token) }
            throw OStackError(.unexpectedResponse, context: .init(host: server.authority), detail: "sign-in body")
        }
        guard let token else {
            throw OStackError(.unexpectedResponse, context: .init(host: server.authority), detail: "no token")
        }
        return SignInResult(token: token, user: user)
    }

    /// The session token an answer carries (`set-auth-token`, else `token`), when plausible.
    static func token(_ response: TransportResponse, json: JSONValue) -> SessionCredential? {
        let text = response.header("set-auth-token") ?? json["token"]?.stringValue
        guard let text, Self.isPlausibleToken(text) else { return nil }
        return SessionCredential(SecretBytes(copying: Array(text.utf8)))
    }

    /// `name=value` of the `better-auth.two_factor` cookie (any cookie-name prefix), from Set-Cookie.
    static func twoFactorCookie(_ response: TransportResponse) -> SecretBytes? {
        for (name, value) in response.headers where name.lowercased() == "set-cookie" {
            let pair = value.split(separator: ";", maxSplits: 1).first.map(String.init) ?? ""
            guard let equals = pair.firstIndex(of: "="), pair[..<equals].hasSuffix("two_factor"),
                pair.count <= 4096
            else { continue }
            return SecretBytes(copying: Array(pair.utf8))
        }
        return nil
    }

    /// A method name the server may list (`totp`, `otp`, `backup-code`, …): a short lower-case token.
    static func isMethodName(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 32
            && name.unicodeScalars.allSatisfy {
                ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "-" || $0 == "_"
            }
    }

    /// `GET /api/v1/auth/get-session`. Returns nil when the server says the token is not signed in
    /// (JSON `null` or 401). Extends the session's sliding expiry on the server as a side effect.
    public func getSession(token: SessionCredential) throws(OStackError) -> RemoteSession? {
        let response = try send(
            TransportRequest(
                method: "GET", url: server.url(routes.auth + "/get-session"),
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
        let expiresAt = json["session"]?["expiresAt"]?.stringValue.flatMap(Self.parseDate).map {
            Self.localTime($0, response: response)
        }
        var rotated: SessionCredential?
        var inBody = false
        let bodyToken = json["session"]?["token"]?.stringValue
        let candidate = response.header("set-auth-token") ?? bodyToken
        if let candidate, Self.isPlausibleToken(candidate) {
            let bytes = SessionCredential(SecretBytes(copying: Array(candidate.utf8)))
            if !(bytes == token) && !Self.isSameSessionInSignedForm(candidate, token: token) {
                rotated = bytes
                inBody =
                    bodyToken.map {
                        $0 == candidate
                            || Self.isSameSessionInSignedForm(
                                candidate, token: SessionCredential(SecretBytes(copying: Array($0.utf8))))
                    } ?? false
            }
        }
        return RemoteSession(
            user: user, expiresAt: expiresAt, rotatedToken: rotated,
            activeOrganizationID: json["session"]?["activeOrganizationId"]?.stringValue, rotatedTokenInBody: inBody)
    }

    /// The token to keep after the server rotated to `rotated`: the newest token of the rotation's
    /// chain that showed, asked of the server with that token itself, to be `userID`'s session (in
    /// `organization`, when one is given); nil when any token of the chain is someone else's or names
    /// no session. The check of a rotated token may rotate again (a server that rotates on every
    /// `get-session`): a new token the check's body names as its session's (the body that names
    /// our user) is kept; one only in a `set-auth-token` header, which the body does not cover (a
    /// header mixed up from another answer), is checked in turn, at most three in all. A fourth the
    /// last check handed out only in a header is not kept unchecked: the third is, though such a
    /// server may have replaced it already (the next request then finds the session expired).
    func verifiedRotation(_ rotated: SessionCredential, userID: String, organization: String?)
        throws(OStackError) -> SessionCredential?
    {
        var candidate = rotated
        var verified: SessionCredential?
        for _ in 0..<3 {
            guard let check = try getSession(token: candidate), check.user.id == userID,
                organization == nil || check.activeOrganizationID == organization
            else { return nil }
            verified = candidate
            guard let next = check.rotatedToken else { break }
            if check.rotatedTokenInBody { return next }
            candidate = next
        }
        return verified
    }

    /// A time the server gave, in this machine's clock: shifted by how far the answer's `Date` header
    /// is from now. A server whose clock is days off would otherwise make a valid session look
    /// expired (or an expired one valid) in `status` and `doctor`. Unchanged within a minute, without
    /// a usable `Date`, or for an implausible difference (a year or more).
    static func localTime(_ serverTime: Date, response: TransportResponse, now: Date = Date()) -> Date {
        guard let header = response.header("Date"), let serverNow = HTTPDate.parse(header) else { return serverTime }
        let skew = now.timeIntervalSince(serverNow)
        guard skew.isFinite, abs(skew) > 60, abs(skew) < 366 * 86_400 else { return serverTime }
        return serverTime.addingTimeInterval(skew)
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
                method: "POST", url: server.url(routes.auth + "/sign-out"),
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
