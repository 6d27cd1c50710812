import DevServerCore

/// Auth under `{api}/auth` with better-auth's shapes (bearer, two-factor and organization plugins).
extension DevServerApp {
    static func betterAuthError(_ status: Int, _ code: String, _ message: String, headers: [(String, String)] = [])
        -> CoreResponse
    {
        CoreResponse(
            status: status, headers: headers, body: .object([("code", .string(code)), ("message", .string(message))]))
    }

    static let invalidBody = betterAuthError(400, "VALIDATION_ERROR", "Invalid body")

    static func expiredCookie(_ name: String) -> (String, String) {
        ("Set-Cookie", "\(name)=; Max-Age=0; Path=/; HttpOnly; SameSite=Lax")
    }

    func jsonBody(_ request: AppRequest) -> JSONValue? {
        guard request.header("Content-Type")?.lowercased().hasPrefix("application/json") == true else { return nil }
        return try? JSONValue.parse(request.body)
    }

    /// A signed-in answer (`{token, user}` with `set-auth-token`), as the bearer plugin adds it whenever a
    /// session cookie is set.
    func signedIn(_ session: AuthStore.Session, extra: [(String, JSONValue)] = [], headers: [(String, String)] = [])
        -> CoreResponse
    {
        let user = auth.user(id: session.userID)!
        return CoreResponse(
            status: 200, headers: [("set-auth-token", session.token + "." + AuthStore.randomToken())] + headers,
            body: .object(extra + [("token", .string(session.token)), ("user", userJSON(user))]))
    }

    func authRoute(_ request: AppRequest, _ parts: [String]) -> CoreResponse {
        switch (request.method, parts) {
        case ("POST", ["sign-in", "email"]):
            guard let body = jsonBody(request), let email = body["email"]?.stringValue,
                let password = body["password"]?.stringValue
            else { return Self.invalidBody }
            guard let user = auth.user(email: email, password: password) else {
                return Self.betterAuthError(401, "INVALID_EMAIL_OR_PASSWORD", "Invalid email or password")
            }
            if auth.hasTwoFactor(user) {
                // better-auth twoFactor after-hook: the session is deleted, the pending state rides on a
                // signed `two_factor` cookie (10 min); no token, no user, no set-auth-token.
                let cookie = auth.beginTwoFactor(userID: user.id)
                return CoreResponse(
                    status: 200,
                    headers: [
                        (
                            "Set-Cookie",
                            "\(AuthStore.twoFactorCookie)=\(cookie); Max-Age=600; Path=/; HttpOnly; SameSite=Lax"
                        )
                    ],
                    body: .object([
                        ("twoFactorRedirect", .bool(true)), ("twoFactorMethods", .array([.string("totp")])),
                    ]))
            }
            return signedIn(
                auth.createSession(userID: user.id), extra: [("redirect", .bool(false))] + [("url", .null)])
        case ("POST", ["two-factor", "verify-totp"]), ("POST", ["two-factor", "verify-backup-code"]):
            guard let body = jsonBody(request), let code = body["code"]?.stringValue else { return Self.invalidBody }
            return verifyTwoFactor(request, code: code, backup: parts[1] == "verify-backup-code")
        case ("GET", ["get-session"]):
            guard let (session, rotated) = auth.getSession(request.sessionToken),
                let user = auth.user(id: session.userID)
            else {
                return CoreResponse(status: 200, body: .null)
            }
            var headers: [(String, String)] = []
            if rotated { headers.append(("set-auth-token", session.token)) }
            let expiresAt: JSONValue = session.expiresAt > 0 ? .string(Self.iso(session.expiresAt)) : .null
            var userMembers = userJSON(user).objectValue ?? []
            if let code = auth.gate(userID: user.id) {
                // customSession surfaces the auth-policy posture as `user.authGate`.
                userMembers.append(
                    (
                        "authGate",
                        .object([("code", .string(code)), ("message", .string(Self.gateMessages[code] ?? ""))])
                    ))
            }
            return CoreResponse(
                status: 200, headers: headers,
                body: .object([
                    (
                        "session",
                        .object([
                            ("id", .string("ses_" + String(session.token.prefix(6)))),
                            ("token", .string(session.token)),
                            ("userId", .string(user.id)), ("expiresAt", expiresAt),
                            ("createdAt", .string(Self.iso(session.createdAt))),
                            ("updatedAt", .string(Self.iso(session.updatedAt))),
                            ("activeOrganizationId", session.activeOrganizationID.map { .string($0) } ?? .null),
                        ])
                    ),
                    ("user", .object(userMembers)),
                ]))
        case ("POST", ["sign-out"]):
            auth.signOut(request.sessionToken)
            return CoreResponse(status: 200, body: .object([("success", .bool(true))]))
        case ("GET", ["config"]):
            return Self.wrapped(
                .object([
                    ("emailPassword", .object([("enabled", .bool(true))])), ("socialProviders", .array([])),
                    (
                        "features",
                        .object([
                            ("twoFactor", .bool(!configuration.totpSecrets.isEmpty)),
                            ("organization", .bool(!configuration.organizations.isEmpty)),
                        ])
                    ),
                ]))
        case ("GET", ["organization", "list"]):
            guard auth.getSession(request.sessionToken) != nil else {
                return Self.betterAuthError(401, "UNAUTHORIZED", "Unauthorized")
            }
            return CoreResponse(status: 200, body: .array(configuration.organizations.map(organizationJSON)))
        case ("POST", ["organization", "set-active"]):
            return setActiveOrganization(request)
        default:
            return Self.betterAuthError(404, "NOT_FOUND", "Not found")
        }
    }

    /// better-auth `verifyTwoFactor`: the pending challenge comes from the `two_factor` cookie; with
    /// no cookie but a signed-in session it is a re-verification (answers that session).
    func verifyTwoFactor(_ request: AppRequest, code: String, backup: Bool) -> CoreResponse {
        let cookie = request.cookie(AuthStore.twoFactorCookie)
        if cookie == nil, let (session, _) = auth.getSession(request.sessionToken),
            let user = auth.user(id: session.userID), auth.hasTwoFactor(user)
        {
            let key = configuration.totpSecrets[user.email].flatMap(OneTimePassword.base32Decode) ?? []
            let valid =
                backup
                ? (configuration.backupCodes[user.email] ?? []).contains(code)
                : OneTimePassword.verifyTOTP(code, key: key, time: AuthStore.now())
            guard valid else {
                return backup
                    ? Self.betterAuthError(401, "INVALID_BACKUP_CODE", "Invalid backup code")
                    : Self.betterAuthError(401, "INVALID_CODE", "Invalid code")
            }
            return CoreResponse(
                status: 200, body: .object([("token", .string(session.token)), ("user", userJSON(user))]))
        }
        switch auth.completeTwoFactor(cookie: cookie, code: code, backup: backup) {
        case .session(let session):
            return signedIn(session, headers: [Self.expiredCookie(AuthStore.twoFactorCookie)])
        case .refused(let status, let code, let message, let clearCookie):
            return Self.betterAuthError(
                status, code, message, headers: clearCookie ? [Self.expiredCookie(AuthStore.twoFactorCookie)] : [])
        case .verified:
            return Self.betterAuthError(500, "INTERNAL_SERVER_ERROR", "unreachable")
        }
    }

    func organizationJSON(_ organization: (id: String, name: String)) -> JSONValue {
        .object([
            ("id", .string(organization.id)), ("name", .string(organization.name)),
            ("slug", .string(organization.id)), ("logo", .null), ("metadata", .null),
            ("createdAt", .string(Self.iso(0))),
        ])
    }

    /// better-auth `POST /organization/set-active {organizationId}`: the organization, or `null` when
    /// cleared; every user is a member of every configured organization.
    func setActiveOrganization(_ request: AppRequest) -> CoreResponse {
        guard let token = request.sessionToken, let (session, _) = auth.getSession(token) else {
            return Self.betterAuthError(401, "UNAUTHORIZED", "Unauthorized")
        }
        guard let body = jsonBody(request) else { return Self.invalidBody }
        var requested: String?
        switch body["organizationId"] {
        case .null?:
            _ = auth.setActiveOrganization(token: session.token, organizationID: nil)
            return CoreResponse(status: 200, body: .null)
        case .string(let id)?:
            requested = id
        default:
            if let slug = body["organizationSlug"]?.stringValue {
                guard let match = configuration.organizations.first(where: { $0.id == slug }) else {
                    return Self.betterAuthError(400, "ORGANIZATION_NOT_FOUND", "Organization not found")
                }
                requested = match.id
            } else {
                requested = session.activeOrganizationID
            }
        }
        guard let requested else { return CoreResponse(status: 200, body: .null) }
        guard let organization = configuration.organizations.first(where: { $0.id == requested }) else {
            // No membership in an unknown organization: better-auth clears the active one and refuses.
            _ = auth.setActiveOrganization(token: session.token, organizationID: nil)
            return Self.betterAuthError(
                403, "USER_IS_NOT_A_MEMBER_OF_THE_ORGANIZATION", "User is not a member of the organization")
        }
        _ = auth.setActiveOrganization(token: session.token, organizationID: organization.id)
        return CoreResponse(status: 200, body: organizationJSON(organization))
    }

    func userJSON(_ user: DevServerConfiguration.User) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("id", .string(user.id)), ("email", .string(user.email)), ("name", .string(user.name)), ("image", .null),
            ("emailVerified", .bool(true)),
        ]
        if !configuration.totpSecrets.isEmpty {
            members.append(("twoFactorEnabled", .bool(configuration.totpSecrets[user.email] != nil)))
        }
        return .object(members)
    }

    static func iso(_ seconds: Double) -> String {
        VersionClockFormat.format(millis: Int64(seconds * 1000))
    }
}
