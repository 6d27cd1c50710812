import FoundationEssentials
import PlatformKit
import SodiumKit

/// Who signs in: the second factor of a password sign-in, and the identity of an API key.
extension LoginService {
    /// A second factor for a password sign-in: a backup code when one was given, else TOTP — the code
    /// given (`--totp`) or asked for on a terminal. A method ostack cannot complete (an e-mailed or
    /// texted code) is `two-factor-required`, naming the methods the server offers.
    func completeTwoFactor(methods: [String], challenge: SecretBytes, request: Request, api: AuthAPI)
        throws(OStackError) -> SignInResult
    {
        if let code = request.twoFactor.backupCode {
            return try api.verifyTwoFactor(.backupCode, code: code, challenge: challenge)
        }
        guard methods.isEmpty || methods.contains("totp") else {
            throw OStackError(
                .twoFactorRequired, context: .init(host: request.server.authority, fields: methods),
                detail: "unsupported two-factor methods")
        }
        guard let code = request.twoFactor.totp ?? request.twoFactor.prompt?(methods) else {
            throw OStackError(.twoFactorRequired, context: .init(host: request.server.authority), detail: "no code")
        }
        return try api.verifyTwoFactor(.totp, code: code, challenge: challenge)
    }

    /// The signed-in identity: the session's user; for an API key the key's owner when `get-session`
    /// names one (some servers do), else — the key accepted by a metadata call — an identity of its
    /// own: the e-mail the user gave, and an id made from the key's visible prefix (never the secret).
    func identify(
        _ token: SessionCredential, kind: Account.CredentialKind, request: Request, api: AuthAPI, routes: ServerRoutes
    ) throws(OStackError) -> RemoteSession? {
        if let session = try api.getSession(token: token) { return session }
        guard kind == .apiKey, try api.acceptsAPIKey(token, metadataRoute: routes.metadata) else { return nil }
        let user = RemoteUser(id: Self.apiKeyIdentity(token), email: request.email, name: "")
        return RemoteSession(user: user, expiresAt: nil, rotatedToken: nil)
    }

    /// `apikey-` and up to six characters of the key after its `osk_` prefix: the part a server shows
    /// to identify a key, stable across logins, not enough to use it.
    static func apiKeyIdentity(_ key: SessionCredential) -> String {
        let text = key.bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        let body = text.hasPrefix("osk_") ? text.dropFirst(4) : Substring(text)
        let visible = body.prefix(6).filter { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }
        return "apikey-" + (visible.isEmpty ? "key" : String(visible))
    }
}

/// The second factor of a sign-in: a TOTP code, a backup code, or a way to ask the user for a code.
public struct TwoFactorInput: Sendable {
    public var totp: SecretBytes?
    public var backupCode: SecretBytes?
    /// Asks for a TOTP code (given the methods the server offers); nil when nobody can be asked.
    public var prompt: (@Sendable (_ methods: [String]) -> SecretBytes?)?

    public init(
        totp: SecretBytes? = nil, backupCode: SecretBytes? = nil,
        prompt: (@Sendable (_ methods: [String]) -> SecretBytes?)? = nil
    ) {
        self.totp = totp
        self.backupCode = backupCode
        self.prompt = prompt
    }
}
