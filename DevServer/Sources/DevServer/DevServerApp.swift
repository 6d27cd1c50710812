import DevServerCore
import Synchronization

/// One HTTP request as the app sees it.
struct AppRequest {
    var method: String
    var path: String
    var query: [(String, String)]
    var headers: [(String, String)]
    var body: [UInt8]

    func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.0.lowercased() == lowered }?.1
    }

    var bearer: String? {
        if let key = header("X-API-Key") { return key }
        guard let value = header("Authorization") else { return nil }
        for scheme in ["Bearer ", "bearer ", "ApiKey "] where value.hasPrefix(scheme) {
            return String(value.dropFirst(scheme.count)).trimmed()
        }
        return nil
    }
}

/// What to do with a request.
enum AppAction {
    case respond(CoreResponse)
    /// Close the connection without answering; `commit` runs the handler first (drop-after).
    case drop(commit: Bool)
}

/// Routing, authentication, idempotency and faults on top of `DataStore` (PROTOCOL §1–§6, SPEC §11).
final class DevServerApp: @unchecked Sendable {
    // @unchecked Sendable: every mutable part is internally synchronised.
    let configuration: DevServerConfiguration
    let store: DataStore
    let auth: AuthStore
    let faults = FaultInjector()
    let idempotency = Mutex<[String: CoreResponse]>([:])
    let counters = Mutex<[String: Int]>([:])

    init(configuration: DevServerConfiguration) {
        self.configuration = configuration
        store = DataStore(batchCap: configuration.batchCap)
        auth = AuthStore(configuration: configuration)
    }

    /// PROTOCOL §2.4: `{"error":"UNAUTHENTICATED","code":"UNAUTHENTICATED","message":…}`.
    static let unauthenticated = CoreResponse(
        status: 401,
        body: .object([
            ("error", .string("UNAUTHENTICATED")), ("code", .string("UNAUTHENTICATED")),
            ("message", .string("Authentication is required to access this endpoint.")),
        ]))

    /// The response for a request, and whether the connection must be dropped before or after it.
    func handle(_ request: AppRequest) -> (action: AppAction, delayMilliseconds: Int) {
        let family = Self.family(request.path)
        counters.withLock { $0["\(request.method) \(family)", default: 0] += 1 }
        if request.path.hasPrefix("/__control__/") {
            return (.respond(control(request)), 0)
        }
        var delay = configuration.latencyMilliseconds
        if let fault = faults.take(method: request.method, path: request.path) {
            switch fault.action {
            case .dropBefore: return (.drop(commit: false), delay)
            case .dropAfter:
                _ = route(request)  // commits (and records the idempotent response) first
                return (.drop(commit: true), delay)
            case .delay: delay += fault.delayMilliseconds
            case .status:
                var response =
                    fault.body.map { CoreResponse(status: fault.status, body: $0) }
                    ?? (fault.status >= 500
                        ? CoreResponse.error(
                            status: fault.status, code: fault.status == 503 ? "SERVICE_UNAVAILABLE" : "INTERNAL_ERROR",
                            message: "Internal server error")
                        : CoreResponse.error(
                            status: fault.status, code: fault.status == 429 ? "RATE_LIMIT_EXCEEDED" : "ERROR",
                            message: "Injected failure"))
                if let retry = fault.retryAfter { response.headers.append(("Retry-After", String(retry))) }
                return (.respond(response), delay)
            }
        }
        return (.respond(route(request)), delay)
    }

    /// The dispatcher's wrapped success envelope (PROTOCOL §6.1).
    static func wrapped(_ data: JSONValue) -> CoreResponse {
        CoreResponse(status: 200, body: .object([("success", .bool(true)), ("data", data)]))
    }

    static func family(_ path: String) -> String {
        let parts = path.split(separator: "/").prefix(4)
        return "/" + parts.joined(separator: "/")
    }

    // MARK: Routing

    func route(_ request: AppRequest) -> CoreResponse {
        var response = routeWithoutIdempotency(request)
        if let requestID = request.header("X-Request-Id") { response.headers.append(("X-Request-Id", requestID)) }
        return response
    }

    func routeWithoutIdempotency(_ request: AppRequest) -> CoreResponse {
        let segments = request.path.split(separator: "/").map(String.init)
        switch (request.method, segments) {
        case ("GET", ["api", "v1", "discovery"]), ("GET", ["api", "v1"]):
            return CoreResponse(status: 200, body: Self.discovery)
        case ("GET", [".well-known", "objectstack"]):
            var response = Self.wrapped(Self.discovery)
            response.headers.append(("Cache-Control", "no-store"))
            return response
        case ("GET", ["api", "v1", "health"]):
            return Self.wrapped(.object([("status", .string("ok")), ("version", .string("1.0.0"))]))
        case ("GET", ["api", "v1", "ready"]):
            return Self.wrapped(.object([("status", .string("ready")), ("state", .string("running"))]))
        case (_, let parts) where parts.starts(with: ["api", "v1", "auth"]):
            return authRoute(request, Array(parts.dropFirst(3)))
        default: break
        }
        guard let userID = auth.authenticate(request.bearer) else {
            if segments == ["api", "v1", "me", "apps"] {
                return CoreResponse(status: 200, body: .object([("apps", .array([]))]))
            }
            return Self.unauthenticated
        }
        switch (request.method, segments) {
        case ("POST", ["api", "v1", "keys"]):
            return CoreResponse(status: 201, body: .object([("key", .string(auth.mintAPIKey(for: userID)))]))
        case ("GET", ["api", "v1", "me", "apps"]): return store.apps()
        case ("GET", ["api", "v1", "meta"]): return store.metaTypes()
        case ("GET", let parts) where parts.count == 4 && parts.starts(with: ["api", "v1", "meta"]):
            return store.metaItems(type: parts[3])
        case ("GET", let parts) where parts.count == 5 && parts.starts(with: ["api", "v1", "meta"]):
            return store.metaItem(type: parts[3], name: parts[4], ifNoneMatch: request.header("If-None-Match"))
        case (_, let parts) where parts.count >= 4 && parts.starts(with: ["api", "v1", "data"]):
            return idempotent(request, userID: userID) {
                self.dataRoute(request, Array(parts.dropFirst(3)), userID: userID)
            }
        default:
            return .error(
                status: 404, code: "ROUTE_NOT_FOUND", message: "No route for \(request.method) \(request.path)")
        }
    }

    func dataRoute(_ request: AppRequest, _ parts: [String], userID: String) -> CoreResponse {
        let object = parts[0]
        switch (request.method, parts.count > 1 ? parts[1] : nil) {
        case ("GET", nil): return store.list(object: object, query: request.query)
        case ("POST", nil): return store.create(object: object, body: request.body, userId: userID)
        case ("POST", "query"?): return store.query(object: object, body: request.body)
        case ("POST", "createMany"?): return store.createMany(object: object, body: request.body, userId: userID)
        case ("POST", "updateMany"?): return store.updateMany(object: object, body: request.body, userId: userID)
        case ("POST", "deleteMany"?): return store.deleteMany(object: object, body: request.body, userId: userID)
        case ("POST", "batch"?): return store.batch(object: object, body: request.body, userId: userID)
        case ("GET", let id?): return store.get(object: object, id: id, query: request.query)
        case ("PATCH", let id?):
            return store.update(
                object: object, id: id, body: request.body, ifMatch: request.header("If-Match"), userId: userID)
        case ("DELETE", let id?):
            return store.delete(
                object: object, id: id, ifMatch: request.header("If-Match"), query: request.query, userId: userID)
        default:
            return .error(status: 405, code: "METHOD_NOT_ALLOWED", message: "\(request.method) is not allowed here")
        }
    }

    /// `Idempotency-Key` on POST/PATCH/DELETE: the first response is stored and replayed for a repeat
    /// from the same user on the same method and path (header `Idempotent-Replayed: true`).
    func idempotent(_ request: AppRequest, userID: String, _ body: () -> CoreResponse) -> CoreResponse {
        guard ["POST", "PATCH", "DELETE"].contains(request.method), let key = request.header("Idempotency-Key") else {
            return body()
        }
        let cacheKey = "\(userID)|\(request.method)|\(request.path)|\(key)"
        if var replay = idempotency.withLock({ $0[cacheKey] }) {
            replay.headers.append(("Idempotent-Replayed", "true"))
            return replay
        }
        let response = body()
        if response.status < 500 { idempotency.withLock { $0[cacheKey] = response } }
        return response
    }

    // MARK: Auth (better-auth shapes)

    func authRoute(_ request: AppRequest, _ parts: [String]) -> CoreResponse {
        switch (request.method, parts) {
        case ("POST", ["sign-in", "email"]):
            guard request.header("Content-Type")?.lowercased().hasPrefix("application/json") == true,
                let body = try? JSONValue.parse(request.body), let email = body["email"]?.stringValue,
                let password = body["password"]?.stringValue
            else {
                return CoreResponse(
                    status: 400,
                    body: .object([("code", .string("VALIDATION_ERROR")), ("message", .string("Invalid body"))]))
            }
            guard let session = auth.signIn(email: email, password: password), let user = auth.user(id: session.userID)
            else {
                return CoreResponse(
                    status: 401,
                    body: .object([
                        ("code", .string("INVALID_EMAIL_OR_PASSWORD")),
                        ("message", .string("Invalid email or password")),
                    ]))
            }
            return CoreResponse(
                status: 200, headers: [("set-auth-token", session.token + "." + AuthStore.randomToken())],
                body: .object([
                    ("redirect", .bool(false)), ("token", .string(session.token)), ("url", .null),
                    ("user", userJSON(user)),
                ]))
        case ("GET", ["get-session"]):
            guard let (session, rotated) = auth.getSession(request.bearer), let user = auth.user(id: session.userID)
            else {
                return CoreResponse(status: 200, body: .null)
            }
            var headers: [(String, String)] = []
            if rotated { headers.append(("set-auth-token", session.token)) }
            let expiresAt: JSONValue = session.expiresAt > 0 ? .string(Self.iso(session.expiresAt)) : .null
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
                        ])
                    ),
                    ("user", userJSON(user)),
                ]))
        case ("POST", ["sign-out"]):
            auth.signOut(request.bearer)
            return CoreResponse(status: 200, body: .object([("success", .bool(true))]))
        case ("GET", ["config"]):
            return CoreResponse(
                status: 200,
                body: .object([
                    ("success", .bool(true)),
                    (
                        "data",
                        .object([
                            ("emailPassword", .object([("enabled", .bool(true))])), ("socialProviders", .array([])),
                        ])
                    ),
                ]))
        default:
            return CoreResponse(
                status: 404, body: .object([("code", .string("NOT_FOUND")), ("message", .string("Not found"))]))
        }
    }

    func userJSON(_ user: DevServerConfiguration.User) -> JSONValue {
        .object([
            ("id", .string(user.id)), ("email", .string(user.email)), ("name", .string(user.name)), ("image", .null),
            ("emailVerified", .bool(true)),
        ])
    }

    static func iso(_ seconds: Double) -> String {
        VersionClockFormat.format(millis: Int64(seconds * 1000))
    }

    // MARK: Control API (loopback only, no auth)

    func control(_ request: AppRequest) -> CoreResponse {
        let ok = CoreResponse(status: 200, body: .object([("ok", .bool(true))]))
        let body = (try? JSONValue.parse(request.body)) ?? .object([])
        switch (request.method, request.path) {
        case ("POST", "/__control__/reset"):
            store.reset()
            auth.reset()
            faults.clear()
            idempotency.withLock { $0.removeAll() }
            counters.withLock { $0.removeAll() }
            return ok
        case ("POST", "/__control__/seed"):
            guard let object = body["object"]?.stringValue, let count = body["count"]?.numberValue else {
                return .error(status: 400, code: "VALIDATION_ERROR", message: "seed takes {object, count}")
            }
            let user = configuration.users.first?.id ?? "usr_seed"
            return CoreResponse(
                status: 200,
                body: .object([("seeded", .number(Double(store.seed(object: object, count: Int(count), userId: user))))]
                ))
        case ("POST", "/__control__/faults"):
            return faults.add(body) ? ok : .error(status: 400, code: "VALIDATION_ERROR", message: "bad fault")
        case ("DELETE", "/__control__/faults"):
            faults.clear()
            return ok
        case ("POST", "/__control__/expire-sessions"):
            auth.expireAll()
            return ok
        case ("POST", "/__control__/modify"):
            guard let object = body["object"]?.stringValue, let id = body["id"]?.stringValue else {
                return .error(status: 400, code: "VALIDATION_ERROR", message: "modify takes {object, id, fields}")
            }
            return store.modifyAsOtherUser(object: object, id: id, fields: body["fields"] ?? .object([]))
        case ("GET", "/__control__/counters"):
            let (signIns, refreshes, rotations) = auth.counters
            let requests = counters.withLock { $0 }.sorted { $0.key < $1.key }.map {
                ($0.key, JSONValue.number(Double($0.value)))
            }
            return CoreResponse(
                status: 200,
                body: .object([
                    ("signIns", .number(Double(signIns))), ("refreshes", .number(Double(refreshes))),
                    ("rotations", .number(Double(rotations))), ("requests", .object(requests)),
                ]))
        case ("GET", "/__control__/record"):
            let object = request.query.first { $0.0 == "object" }?.1 ?? ""
            let id = request.query.first { $0.0 == "id" }?.1 ?? ""
            return CoreResponse(
                status: 200,
                body: .object([
                    ("count", .number(Double(store.count(object: object)))),
                    ("record", store.record(object: object, id: id) ?? .null),
                ]))
        default:
            return .error(status: 404, code: "ROUTE_NOT_FOUND", message: "No control route")
        }
    }

    static let discovery: JSONValue = .object([
        ("name", .string("ObjectStack API")), ("apiName", .string("ObjectStack API")), ("version", .string("1.0")),
        ("environment", .string("development")),
        // `conditionalBatch` is this server's extension: updateMany/deleteMany honour a per-row
        // expected version, so clients may batch conditional writes.
        ("capabilities", .object([("transactionalBatch", .bool(false)), ("conditionalBatch", .bool(true))])),
        (
            "routes",
            .object([
                ("data", .string("/api/v1/data")), ("metadata", .string("/api/v1/meta")),
                ("discovery", .string("/api/v1/discovery")),
                ("auth", .string("/api/v1/auth")),
            ])
        ),
        (
            "locale",
            .object([("default", .string("en")), ("supported", .array([.string("en")])), ("timezone", .string("UTC"))])
        ),
        (
            "services",
            .object([
                (
                    "data",
                    .object([
                        ("enabled", .bool(true)), ("status", .string("available")), ("route", .string("/api/v1/data")),
                    ])
                ),
                (
                    "auth",
                    .object([
                        ("enabled", .bool(true)), ("status", .string("available")), ("route", .string("/api/v1/auth")),
                    ])
                ),
            ])
        ),
        (
            "capabilities",
            .object([
                ("transactionalBatch", .object([("enabled", .bool(true))])),
                ("export", .object([("enabled", .bool(false))])),
            ])
        ),
    ])
}
