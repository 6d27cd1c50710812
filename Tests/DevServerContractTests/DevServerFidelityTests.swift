import CurlKit
import FoundationEssentials
import Glibc
import OStackTestSupport
import Testing

/// A dev server started with extra flags, and plain HTTP calls against it.
struct DevServerHarness {
    let server: DevServerProcess
    let client = HTTPClient()

    init(_ arguments: [String] = []) throws {
        server = try DevServerProcess(arguments: arguments)
    }

    @discardableResult
    func call(
        _ method: HTTPRequest.Method, _ path: String, token: String? = nil, body: String? = nil,
        headers: [(String, String)] = []
    ) throws -> (status: Int, json: JSONObject, response: HTTPResponse) {
        var all = headers
        if let token { all.append(("Authorization", "Bearer \(token)")) }
        if body != nil { all.append(("Content-Type", "application/json")) }
        let response = try client.send(
            HTTPRequest(method: method, url: server.url + path, headers: all, body: body.map { Array($0.utf8) }))
        return (response.status, JSONObject(response.body), response)
    }

    func text(_ response: HTTPResponse) -> String { String(decoding: response.body, as: UTF8.self) }

    func signIn(_ email: String = "alice@example.com", _ password: String = "alice-pass", base: String = "/api/v1")
        throws -> String
    {
        let result = try call(
            .post, base + "/auth/sign-in/email", body: #"{"email":"\#(email)","password":"\#(password)"}"#)
        try #require(result.status == 200)
        return try #require(result.json["token"] as? String)
    }
}

@Suite struct DevServerFidelityTests {
    let harness: DevServerHarness

    init() throws {
        harness = try DevServerHarness(["--api-key", "bob@example.com:osk_fixed_key_0123456789"])
    }

    @Test func conditionalBatchRowsAreIgnoredByDefault() throws {
        let token = try harness.signIn()
        let created = try harness.call(.post, "/api/v1/data/task", token: token, body: #"{"title":"a"}"#)
        let id = try #require(created.json["id"] as? String)
        let stale = "2000-01-01T00:00:00.000Z"
        let update = try harness.call(
            .post, "/api/v1/data/task/updateMany", token: token,
            body: #"{"records":[{"id":"\#(id)","data":{"title":"b"},"expectedVersion":"\#(stale)"}]}"#)
        #expect(update.status == 200)
        #expect(update.json["succeeded"] as? Int == 1)  // silently unconditional
        let delete = try harness.call(
            .post, "/api/v1/data/task/deleteMany", token: token,
            body: #"{"ids":["\#(id)"],"versions":{"\#(id)":"\#(stale)"}}"#)
        #expect(delete.json["succeeded"] as? Int == 1)
    }

    @Test func createManyIsAllOrAbortAndNamesNoRow() throws {
        let token = try harness.signIn()
        let invalid = try harness.call(
            .post, "/api/v1/data/task/createMany", token: token, body: #"[{"title":"ok"},{"notes":"no title"}]"#)
        #expect(invalid.status == 400)
        #expect(invalid.json["code"] as? String == "VALIDATION_FAILED")
        #expect(invalid.json["error"] as? String == "title is required")
        #expect(invalid.json["object"] as? String == "task")
        #expect(invalid.json["index"] == nil)
        #expect(((invalid.json["fields"] as? [[String: Any]])?.first)?["field"] as? String == "title")
        #expect(try harness.server.control("GET", "record?object=task&id=x").contains("\"count\":0"))
        let duplicate = try harness.call(
            .post, "/api/v1/data/contact/createMany", token: token,
            body: #"[{"name":"A","email":"a@example.com"},{"name":"B","email":"a@example.com"}]"#)
        #expect(duplicate.status == 409)
        #expect(duplicate.json["code"] as? String == "UNIQUE_VIOLATION")
        #expect(duplicate.json["field"] as? String == "email")
        #expect(duplicate.json["index"] == nil)
        #expect(try harness.server.control("GET", "record?object=contact&id=x").contains("\"count\":0"))
    }

    @Test func uniqueViolationsNameTheFieldOnlyForOneColumn() throws {
        let token = try harness.signIn()
        #expect(
            try harness.call(
                .post, "/api/v1/data/contact", token: token, body: #"{"name":"A","email":"x@example.com"}"#
            )
            .status == 201)
        let single = try harness.call(
            .post, "/api/v1/data/contact", token: token, body: #"{"name":"B","email":"x@example.com"}"#)
        #expect(single.status == 409)
        #expect(single.json["error"] as? String == "A record with this email already exists")
        #expect(single.json["field"] as? String == "email")
        #expect(single.json["object"] as? String == "contact")
        #expect(single.json["declaredCode"] == nil)
        let note = #"{"title":"Same","task_id":"tsk_1"}"#
        #expect(try harness.call(.post, "/api/v1/data/note", token: token, body: note).status == 201)
        let composite = try harness.call(.post, "/api/v1/data/note", token: token, body: note)
        #expect(composite.status == 409)
        #expect(composite.json["code"] as? String == "UNIQUE_VIOLATION")
        #expect(composite.json["error"] as? String == "A record with this value already exists")
        #expect(composite.json["field"] == nil)
        // NULLs never collide; a PATCH into a taken value is refused too.
        #expect(try harness.call(.post, "/api/v1/data/contact", token: token, body: #"{"name":"C"}"#).status == 201)
        let other = try harness.call(.post, "/api/v1/data/contact", token: token, body: #"{"name":"D"}"#)
        let id = try #require(other.json["id"] as? String)
        let patch = try harness.call(
            .patch, "/api/v1/data/contact/\(id)", token: token, body: #"{"email":"x@example.com"}"#)
        #expect(patch.status == 409)
        #expect(patch.json["field"] as? String == "email")
        let metadata = try harness.call(.get, "/api/v1/meta/object/contact", token: token)
        let email = ((metadata.json["item"] as? [String: Any])?["fields"] as? [String: Any])?["email"] as? [String: Any]
        #expect(email?["unique"] as? Bool == true)
    }

    @Test func invalidFieldAlwaysCarriesField() throws {
        let token = try harness.signIn()
        for (method, path, body) in [
            (HTTPRequest.Method.get, "/api/v1/data/task?nope=1", nil),
            (.get, "/api/v1/data/task?select=title,nope", nil),
            (.post, "/api/v1/data/task/query", #"{"fields":["nope"]}"#),
            (.get, "/api/v1/data/task/tsk_1?select=nope", nil),
        ] as [(HTTPRequest.Method, String, String?)] {
            let result = try harness.call(method, path, token: token, body: body)
            #expect(result.status == 400, "\(path)")
            #expect(result.json["code"] as? String == "INVALID_FIELD", "\(path)")
            #expect(result.json["field"] as? String == "nope", "\(path)")
            #expect(result.json["object"] as? String == "task", "\(path)")
        }
    }

    @Test func bulkDisabledObjectAnswers405OnEveryBulkRoute() throws {
        let token = try harness.signIn()
        let metadata = try harness.call(.get, "/api/v1/meta/object/note", token: token)
        let enable = (metadata.json["item"] as? [String: Any])?["enable"] as? [String: Any]
        #expect((enable?["apiMethods"] as? [String]) == ["get", "list", "create", "update", "delete"])
        for (route, body) in [
            ("createMany", #"[{"title":"a"}]"#), ("updateMany", #"{"records":[]}"#), ("deleteMany", #"{"ids":[]}"#),
            ("batch", #"{"operation":"create","records":[]}"#),
        ] {
            let result = try harness.call(.post, "/api/v1/data/note/\(route)", token: token, body: body)
            #expect(result.status == 405, "\(route)")
            #expect(result.json["code"] as? String == "OBJECT_API_METHOD_NOT_ALLOWED")
            #expect(result.json["error"] as? String == "API operation 'bulk' is not allowed on object 'note'")
            #expect(result.json["object"] as? String == "note")
            #expect(
                (result.json["allowed"] as? [String])
                    == [
                        "get", "list", "create", "update", "delete", "upsert", "aggregate", "search", "import",
                        "export",
                    ])
        }
        #expect(try harness.call(.post, "/api/v1/data/note", token: token, body: #"{"title":"one"}"#).status == 201)
        #expect(try harness.server.control("GET", "record?object=note&id=x").contains("\"count\":1"))
    }

    @Test func apiKeysResolveOnlyOnDataAndMetaRoutes() throws {
        let key = "osk_fixed_key_0123456789"
        for header in [("Authorization", "Bearer \(key)"), ("X-API-Key", key), ("Authorization", "ApiKey \(key)")] {
            let session = try harness.call(.get, "/api/v1/auth/get-session", headers: [header])
            #expect(session.status == 200)
            #expect(harness.text(session.response) == "null")
            let apps = try harness.call(.get, "/api/v1/me/apps", headers: [header])
            #expect(apps.status == 200)
            #expect((apps.json["apps"] as? [Any])?.isEmpty == true)
            #expect(try harness.call(.get, "/api/v1/data/task", headers: [header]).status == 200)
            #expect(try harness.call(.get, "/api/v1/meta/object/task", headers: [header]).status == 200)
        }
    }

    @Test func authGateBlocksDataAndMetaForAGatedSession() throws {
        let token = try harness.signIn("bob@example.com", "bob-pass")
        try harness.server.control("POST", "auth-gate", #"{"email":"bob@example.com","gate":"PASSWORD_EXPIRED"}"#)
        for path in ["/api/v1/data/task", "/api/v1/meta/object/task", "/api/v1/meta"] {
            let blocked = try harness.call(.get, path, token: token)
            #expect(blocked.status == 403, "\(path)")
            #expect(
                harness.text(blocked.response)
                    == #"{"error":{"code":"PASSWORD_EXPIRED","message":"Your password has expired. Please change it to continue."}}"#
            )
        }
        let write = try harness.call(.post, "/api/v1/data/task", token: token, body: #"{"title":"x"}"#)
        #expect(write.status == 403)
        // Remediation paths stay open; the session shows the gate; an API key carries none.
        let session = try harness.call(.get, "/api/v1/auth/get-session", token: token)
        #expect(
            ((session.json["user"] as? [String: Any])?["authGate"] as? [String: Any])?["code"] as? String
                == "PASSWORD_EXPIRED")
        #expect(try harness.call(.get, "/api/v1/me/apps", token: token).status == 200)
        #expect(try harness.call(.get, "/api/v1/discovery", token: token).status == 200)
        #expect(
            try harness.call(.get, "/api/v1/data/task", headers: [("X-API-Key", "osk_fixed_key_0123456789")]).status
                == 200)
        try harness.server.control("POST", "auth-gate", #"{"email":"bob@example.com","gate":"MFA_REQUIRED"}"#)
        let mfa = try harness.call(.get, "/api/v1/data/task", token: token)
        #expect(((mfa.json["error"] as? [String: Any])?["code"]) as? String == "MFA_REQUIRED")
        #expect(mfa.json["success"] == nil)
        try harness.server.control("POST", "auth-gate", #"{"email":"bob@example.com","gate":null}"#)
        #expect(try harness.call(.get, "/api/v1/data/task", token: token).status == 200)
        // An anonymous caller still gets 401, not 403.
        #expect(try harness.call(.get, "/api/v1/data/task").status == 401)
    }

    @Test func labelsFollowAcceptLanguage() throws {
        let token = try harness.signIn()
        let english = try harness.call(.get, "/api/v1/meta/object/task", token: token)
        let german = try harness.call(
            .get, "/api/v1/meta/object/task", token: token, headers: [("Accept-Language", "de-DE,de;q=0.9,en;q=0.5")])
        let item = try #require(german.json["item"] as? [String: Any])
        #expect(item["label"] as? String == "Aufgabe")
        #expect(item["pluralLabel"] as? String == "Aufgaben")
        let fields = try #require(item["fields"] as? [String: Any])
        #expect((fields["title"] as? [String: Any])?["label"] as? String == "Titel")
        let options = (fields["status"] as? [String: Any])?["options"] as? [[String: Any]]
        #expect(options?.first?["label"] as? String == "Offen")
        #expect(((english.json["item"] as? [String: Any])?["label"]) as? String == "Task")
        #expect(german.response.header("Vary") == "Accept-Language")
        #expect(german.response.header("ETag") != english.response.header("ETag"))
        let list = try harness.call(.get, "/api/v1/meta/object", token: token, headers: [("Accept-Language", "de")])
        #expect(((list.json["items"] as? [[String: Any]])?.first)?["label"] as? String == "Aufgabe")
        let french = try harness.call(
            .get, "/api/v1/meta/object/task", token: token, headers: [("Accept-Language", "fr")])
        #expect(((french.json["item"] as? [String: Any])?["label"]) as? String == "Task")
        let discovery = try harness.call(.get, "/api/v1/discovery")
        #expect(((discovery.json["locale"] as? [String: Any])?["supported"] as? [String]) == ["en", "de"])
    }
}

@Suite struct DevServerLenientFlagTests {
    @Test func honourIdempotencyKeyReplaysTheFirstResponse() throws {
        let harness = try DevServerHarness(["--honour-idempotency-key"])
        let token = try harness.signIn()
        let headers = [("Idempotency-Key", "key-1")]
        let first = try harness.call(
            .post, "/api/v1/data/task", token: token, body: #"{"title":"Once"}"#, headers: headers)
        let second = try harness.call(
            .post, "/api/v1/data/task", token: token, body: #"{"title":"Once"}"#, headers: headers)
        #expect(first.json["id"] as? String == second.json["id"] as? String)
        #expect(second.response.header("Idempotent-Replayed") == "true")
        #expect(try harness.server.control("GET", "record?object=task&id=x").contains("\"count\":1"))
    }

    @Test func conditionalBatchHonoursRowVersionsAndIsAdvertised() throws {
        let harness = try DevServerHarness(["--conditional-batch"])
        let capabilities = try harness.call(.get, "/api/v1/discovery").json["capabilities"] as? [String: Any]
        #expect((capabilities?["conditionalBatch"] as? [String: Any])?["enabled"] as? Bool == true)
        let token = try harness.signIn()
        let id = try #require(
            try harness.call(.post, "/api/v1/data/task", token: token, body: #"{"title":"a"}"#).json["id"] as? String)
        let stale = "2000-01-01T00:00:00.000Z"
        let update = try harness.call(
            .post, "/api/v1/data/task/updateMany", token: token,
            body: #"{"records":[{"id":"\#(id)","data":{"title":"b"},"expectedVersion":"\#(stale)"}]}"#)
        let error = ((update.json["results"] as? [[String: Any]])?.first?["errors"] as? [[String: Any]])?.first
        #expect(error?["code"] as? String == "CONCURRENT_UPDATE")
        let delete = try harness.call(
            .post, "/api/v1/data/task/deleteMany", token: token,
            body: #"{"ids":["\#(id)"],"versions":{"\#(id)":"\#(stale)"}}"#)
        #expect(delete.json["failed"] as? Int == 1)
    }
}

@Suite struct DevServerTwoFactorTests {
    let harness: DevServerHarness

    init() throws {
        harness = try DevServerHarness([
            "--user-totp", "alice@example.com:GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ",
            "--user-backup-codes", "alice@example.com:backup-one,backup-two",
        ])
    }

    /// Signs alice in with her password; returns the `two_factor` cookie pair.
    func startSignIn() throws -> String {
        let result = try harness.call(
            .post, "/api/v1/auth/sign-in/email", body: #"{"email":"alice@example.com","password":"alice-pass"}"#)
        #expect(result.status == 200)
        #expect(harness.text(result.response) == #"{"twoFactorRedirect":true,"twoFactorMethods":["totp"]}"#)
        #expect(result.response.header("set-auth-token") == nil)
        let cookie = try #require(result.response.header("Set-Cookie"))
        #expect(cookie.hasPrefix("better-auth.two_factor=") && cookie.contains("Max-Age=600"))
        return String(cookie.prefix { $0 != ";" })
    }

    func currentCode() throws -> String {
        let body = try harness.server.control("GET", "totp?email=alice@example.com")
        return try #require(JSONObject(Array(body.utf8))["code"] as? String)
    }

    @Test func totpCompletesTheSignIn() throws {
        let cookie = try startSignIn()
        let noCookie = try harness.call(.post, "/api/v1/auth/two-factor/verify-totp", body: #"{"code":"000000"}"#)
        #expect(noCookie.status == 401)
        #expect(noCookie.json["code"] as? String == "INVALID_TWO_FACTOR_COOKIE")
        let wrong = try harness.call(
            .post, "/api/v1/auth/two-factor/verify-totp", body: #"{"code":"000000"}"#, headers: [("Cookie", cookie)])
        #expect(wrong.status == 401)
        #expect(harness.text(wrong.response) == #"{"code":"INVALID_CODE","message":"Invalid code"}"#)
        let right = try harness.call(
            .post, "/api/v1/auth/two-factor/verify-totp",
            body: #"{"code":"\#(try currentCode())","trustDevice":false}"#,
            headers: [("Cookie", cookie)])
        #expect(right.status == 200)
        let token = try #require(right.json["token"] as? String)
        #expect(right.response.header("set-auth-token")?.hasPrefix(token) == true)
        #expect((right.json["user"] as? [String: Any])?["twoFactorEnabled"] as? Bool == true)
        #expect(try harness.call(.get, "/api/v1/data/task", token: token).status == 200)
        // The challenge is single-use.
        let again = try harness.call(
            .post, "/api/v1/auth/two-factor/verify-totp", body: #"{"code":"\#(try currentCode())"}"#,
            headers: [("Cookie", cookie)])
        #expect(again.json["code"] as? String == "INVALID_TWO_FACTOR_COOKIE")
        // A user without TOTP signs in in one step.
        let bob = try harness.call(
            .post, "/api/v1/auth/sign-in/email", body: #"{"email":"bob@example.com","password":"bob-pass"}"#)
        #expect(bob.json["token"] is String)
    }

    @Test func backupCodesAreSingleUseAndAttemptsAreCapped() throws {
        let first = try startSignIn()
        let used = try harness.call(
            .post, "/api/v1/auth/two-factor/verify-backup-code", body: #"{"code":"backup-one"}"#,
            headers: [("Cookie", first)])
        #expect(used.status == 200)
        #expect(used.json["token"] is String)
        let second = try startSignIn()
        let reused = try harness.call(
            .post, "/api/v1/auth/two-factor/verify-backup-code", body: #"{"code":"backup-one"}"#,
            headers: [("Cookie", second)])
        #expect(reused.status == 401)
        #expect(reused.json["code"] as? String == "INVALID_BACKUP_CODE")
        for _ in 0..<4 {
            _ = try harness.call(
                .post, "/api/v1/auth/two-factor/verify-totp", body: #"{"code":"000000"}"#, headers: [("Cookie", second)]
            )
        }
        let capped = try harness.call(
            .post, "/api/v1/auth/two-factor/verify-totp", body: #"{"code":"000000"}"#, headers: [("Cookie", second)])
        #expect(capped.status == 400)
        #expect(capped.json["code"] as? String == "TOO_MANY_ATTEMPTS_REQUEST_NEW_CODE")
    }
}

@Suite struct DevServerScopingTests {
    @Test func apiPathMovesEveryRoute() throws {
        let harness = try DevServerHarness(["--api-path", "/custom/v2"])
        let discovery = try harness.call(.get, "/custom/v2/discovery")
        let routes = try #require(discovery.json["routes"] as? [String: Any])
        #expect(routes["data"] as? String == "/custom/v2/data")
        #expect(routes["metadata"] as? String == "/custom/v2/meta")
        #expect(routes["auth"] as? String == "/custom/v2/auth")
        let wellKnown = try harness.call(.get, "/.well-known/objectstack")
        #expect(
            ((wellKnown.json["data"] as? [String: Any])?["routes"] as? [String: Any])?["data"] as? String
                == "/custom/v2/data")
        #expect(try harness.call(.get, "/api/v1/discovery").status == 404)
        let token = try harness.signIn(base: "/custom/v2")
        #expect(try harness.call(.get, "/custom/v2/data/task", token: token).status == 200)
        #expect(try harness.call(.get, "/custom/v2/meta/object/task", token: token).status == 200)
        #expect(try harness.call(.get, "/api/v1/data/task", token: token).status == 404)
    }

    @Test func environmentsKeepTheirDataApart() throws {
        let harness = try DevServerHarness(["--environment", "prod", "--environment", "staging"])
        let token = try harness.signIn()
        let scoped = try harness.call(.get, "/api/v1/environments/staging/discovery")
        #expect(((scoped.json["routes"] as? [String: Any])?["data"]) as? String == "/api/v1/environments/staging/data")
        #expect(((scoped.json["scoping"] as? [String: Any])?["environmentId"]) as? String == "staging")
        #expect(
            ((try harness.call(.get, "/api/v1/discovery").json["scoping"] as? [String: Any])?["enabled"]) as? Bool
                == true)
        #expect(
            try harness.call(.post, "/api/v1/data/task", token: token, body: #"{"title":"prod"}"#).status == 201)
        #expect(
            try harness.call(
                .post, "/api/v1/data/task", token: token, body: #"{"title":"staging"}"#,
                headers: [("X-Environment-Id", "staging")]
            ).status == 201)
        func titles(_ path: String, _ headers: [(String, String)] = []) throws -> [String] {
            let list = try harness.call(.get, path, token: token, headers: headers)
            return (list.json["records"] as? [[String: Any]] ?? []).compactMap { $0["title"] as? String }
        }
        #expect(try titles("/api/v1/data/task") == ["prod"])
        #expect(try titles("/api/v1/environments/prod/data/task") == ["prod"])
        #expect(try titles("/api/v1/environments/staging/data/task") == ["staging"])
        #expect(try titles("/api/v1/data/task", [("X-Environment-Id", "staging")]) == ["staging"])
        #expect(try titles("/api/v1/data/task", [("X-Environment-Id", "unknown")]) == ["prod"])
        let missing = try harness.call(.get, "/api/v1/environments/nope/data/task", token: token)
        #expect(missing.status == 404)
        #expect(missing.json["code"] as? String == "PROJECT_NOT_FOUND")
    }

    @Test func organizationsKeepTheirDataApart() throws {
        let harness = try DevServerHarness(["--organization", "acme:Acme", "--organization", "beta:Beta"])
        let token = try harness.signIn()
        let list = try harness.call(.get, "/api/v1/auth/organization/list", token: token)
        #expect(list.status == 200)
        let session = try harness.call(.get, "/api/v1/auth/get-session", token: token)
        #expect(((session.json["session"] as? [String: Any])?["activeOrganizationId"]) as? String == "acme")
        #expect(try harness.call(.post, "/api/v1/data/task", token: token, body: #"{"title":"acme"}"#).status == 201)
        let active = try harness.call(
            .post, "/api/v1/auth/organization/set-active", token: token, body: #"{"organizationId":"beta"}"#)
        #expect(active.json["id"] as? String == "beta")
        #expect(active.json["name"] as? String == "Beta")
        #expect(try harness.call(.get, "/api/v1/data/task", token: token).json["total"] as? Int == 0)
        let foreign = try harness.call(
            .post, "/api/v1/auth/organization/set-active", token: token, body: #"{"organizationId":"nope"}"#)
        #expect(foreign.status == 403)
        #expect(foreign.json["code"] as? String == "USER_IS_NOT_A_MEMBER_OF_THE_ORGANIZATION")
        _ = try harness.call(
            .post, "/api/v1/auth/organization/set-active", token: token, body: #"{"organizationId":"acme"}"#)
        #expect(try harness.call(.get, "/api/v1/data/task", token: token).json["total"] as? Int == 1)
        #expect(try harness.call(.get, "/api/v1/auth/organization/list").status == 401)
    }
}
