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

    var credential: Credential {
        Credential(authorization: header("Authorization"), apiKeyHeader: header("X-API-Key"))
    }

    /// The session token of `Authorization: Bearer …` (not an API key).
    var sessionToken: String? { credential.sessionToken }

    /// A cookie sent in `Cookie:` (a CLI sends the two-factor cookie back this way).
    func cookie(_ name: String) -> String? {
        for header in headers where header.0.lowercased() == "cookie" {
            for pair in header.1.split(separator: ";") {
                let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).trimmed() }
                if parts.count == 2 && parts[0] == name { return parts[1] }
            }
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

/// Routing, authentication, idempotency and faults on top of `DataStore` (docs/protocol.md, docs/devserver.md).
final class DevServerApp: @unchecked Sendable {
    // @unchecked Sendable: every mutable part is internally synchronised.
    let configuration: DevServerConfiguration
    /// One data store per (environment, organization) scope; see `store(environment:organization:)`.
    let stores: [String: DataStore]
    let auth: AuthStore
    let faults = FaultInjector()
    let idempotency = Mutex<[String: CoreResponse]>([:])
    let counters = Mutex<[String: Int]>([:])
    let apiSegments: [String]

    init(configuration: DevServerConfiguration) {
        self.configuration = configuration
        var stores: [String: DataStore] = [:]
        let objects = ObjectDefinition.seeded + (configuration.conformanceObjects ? ObjectDefinition.conformance : [])
        for environment in configuration.environments.isEmpty ? [""] : configuration.environments {
            for organization in configuration.organizations.isEmpty ? [""] : configuration.organizations.map(\.id) {
                stores[Self.scopeKey(environment, organization)] = DataStore(
                    objects: objects, batchCap: configuration.batchCap, assignsIDs: configuration.assignIDs,
                    microsecondStamps: configuration.microsecondStamps)
            }
        }
        self.stores = stores
        auth = AuthStore(configuration: configuration)
        apiSegments = configuration.apiPath.split(separator: "/").map(String.init)
    }

    static func scopeKey(_ environment: String?, _ organization: String?) -> String {
        (environment ?? "") + "|" + (organization ?? "")
    }

    /// The data of one environment and organization (the defaults when nil or unknown).
    func store(environment: String?, organization: String?) -> DataStore {
        let environment =
            configuration.environments.contains(environment ?? "")
            ? environment : configuration.environments.first
        let organization =
            configuration.organizations.contains { $0.id == organization }
            ? organization : configuration.organizations.first?.id
        return stores[Self.scopeKey(environment, organization)]!
    }

    var defaultStore: DataStore { store(environment: nil, organization: nil) }

    /// docs/protocol.md#authentication: `{"error":"UNAUTHENTICATED","code":"UNAUTHENTICATED","message":…}`.
    static let unauthenticated = CoreResponse(
        status: 401,
        body: .object([
            ("error", .string("UNAUTHENTICATED")), ("code", .string("UNAUTHENTICATED")),
            ("message", .string("Authentication is required to access this endpoint.")),
        ]))

    /// The auth-policy gates and their messages (`computeAuthGate`, plugin-auth `auth-manager.ts`).
    static let gateMessages = [
        "PASSWORD_EXPIRED": "Your password has expired. Please change it to continue.",
        "MFA_REQUIRED":
            "Multi-factor authentication is required. Please set up an authenticator app to continue.",
    ]

    /// The response for a request, and whether the connection must be dropped before or after it.
    func handle(_ request: AppRequest) -> (action: AppAction, delayMilliseconds: Int) {
        let family = Self.family(request.path)
        counters.withLock { $0["\(request.method) \(family)", default: 0] += 1 }
        if request.path.hasPrefix("/__control__/") {
            return (.respond(control(request)), 0)
        }
        var delay = configuration.latencyMilliseconds
        if let fault = faults.take(method: request.method, path: request.path, query: request.query) {
            switch fault.action {
            case .dropBefore: return (.drop(commit: false), delay)
            case .dropAfter:
                _ = route(request)  // commits (and records an idempotent response, if honoured) first
                return (.drop(commit: true), delay)
            case .delay: delay += fault.delayMilliseconds
            case .answerAfter:
                _ = route(request)
                return (.respond(Self.injected(fault)), delay)
            case .status where fault.text != nil:
                return (.respond(Self.injected(fault)), delay)
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
                response.headers += fault.headers
                return (.respond(response), delay)
            }
        }
        return (.respond(route(request)), delay)
    }

    /// The answer a fault rule gives: its status with its JSON body, raw text, or nothing.
    static func injected(_ fault: FaultInjector.Rule) -> CoreResponse {
        var response = CoreResponse(status: fault.status, headers: fault.headers, body: fault.body)
        if let text = fault.text {
            response.rawBody = Array(text.utf8)
            response.headers.append(("Content-Type", fault.contentType ?? "text/html"))
        }
        return response
    }

    /// The dispatcher's wrapped success envelope (docs/protocol.md#errors).
    static func wrapped(_ data: JSONValue) -> CoreResponse {
        CoreResponse(status: 200, body: .object([("success", .bool(true)), ("data", data)]))
    }

    static func family(_ path: String) -> String {
        let parts = path.split(separator: "/").prefix(4)
        return "/" + parts.joined(separator: "/")
    }

    func routeNotFound(_ request: AppRequest) -> CoreResponse {
        .error(status: 404, code: "ROUTE_NOT_FOUND", message: "No route for \(request.method) \(request.path)")
    }

    // MARK: Routing

    func route(_ request: AppRequest) -> CoreResponse {
        var response = routeWithoutIdempotency(request)
        if let requestID = request.header("X-Request-Id") { response.headers.append(("X-Request-Id", requestID)) }
        return response
    }

    func routeWithoutIdempotency(_ request: AppRequest) -> CoreResponse {
        let segments = request.path.split(separator: "/").map(String.init)
        if request.method == "GET" && segments == [".well-known", "objectstack"] {
            var response = Self.wrapped(discovery(scopedEnvironment: nil))
            response.headers.append(("Cache-Control", "no-store"))
            return response
        }
        guard segments.starts(with: apiSegments) else { return routeNotFound(request) }
        var rest = Array(segments.dropFirst(apiSegments.count))
        // Environment: the scoped route `{api}/environments/:id/…` or the `X-Environment-Id` header; an
        // unknown header value falls back to the default environment, as the real resolution chain does.
        var environment = configuration.environments.first
        var scoped: String?
        if !configuration.environments.isEmpty && rest.count >= 2 && rest[0] == "environments" {
            guard configuration.environments.contains(rest[1]) else {
                return .error(
                    status: 404, code: "PROJECT_NOT_FOUND",
                    message: "[EnvironmentKernelFactory] Environment '\(rest[1])' not found")
            }
            scoped = rest[1]
            environment = rest[1]
            rest = Array(rest.dropFirst(2))
        } else if let header = request.header("X-Environment-Id")?.trimmed(),
            configuration.environments.contains(header)
        {
            environment = header
        }
        switch (request.method, rest) {
        case ("GET", []), ("GET", ["discovery"]):
            return CoreResponse(status: 200, body: discovery(scopedEnvironment: scoped))
        case ("GET", ["health"]) where scoped == nil:
            return Self.wrapped(.object([("status", .string("ok")), ("version", .string("1.0.0"))]))
        case ("GET", ["ready"]) where scoped == nil:
            return Self.wrapped(.object([("status", .string("ready")), ("state", .string("running"))]))
        case (_, let parts) where scoped == nil && parts.first == "auth":
            return authRoute(request, Array(parts.dropFirst()))
        default: break
        }
        let principal = auth.authenticate(request.credential)
        if request.method == "GET" && rest == ["me", "apps"] && scoped == nil {
            // Resolved from the session alone (`current-user-endpoints.ts`): an API key is anonymous here.
            guard let principal, principal.viaSession else {
                return CoreResponse(status: 200, body: .object([("apps", .array([]))]))
            }
            return store(environment: environment, organization: principal.organizationID).apps()
        }
        // The auth-policy gate runs before the anonymous check; it rides on the session only.
        if let principal, principal.viaSession, let code = auth.gate(userID: principal.userID) {
            return CoreResponse(
                status: 403,
                body: .object([
                    (
                        "error",
                        .object([
                            ("code", .string(code)),
                            (
                                "message",
                                .string(Self.gateMessages[code] ?? "Access is blocked by an authentication policy.")
                            ),
                        ])
                    )
                ]))
        }
        guard let principal else { return Self.unauthenticated }
        let store = store(environment: environment, organization: principal.organizationID)
        let locale = DataStore.preferredLocale(request.header("Accept-Language"))
        switch (request.method, rest) {
        case ("POST", ["keys"]) where scoped == nil:
            return CoreResponse(status: 201, body: .object([("key", .string(auth.mintAPIKey(for: principal)))]))
        case ("GET", ["meta"]):
            return store.metaTypes()
        case ("GET", let parts) where parts.count == 2 && parts[0] == "meta":
            return store.metaItems(type: parts[1], locale: locale)
        case ("GET", let parts) where parts.count == 3 && parts[0] == "meta":
            return store.metaItem(
                type: parts[1], name: parts[2], ifNoneMatch: request.header("If-None-Match"), locale: locale)
        case (_, let parts) where parts.count >= 2 && parts[0] == "data":
            let scope = Self.scopeKey(environment, principal.organizationID)
            return idempotent(request, scope: scope, userID: principal.userID) {
                Self.normalizeInvalidField(
                    self.dataRoute(request, Array(parts.dropFirst()), userID: principal.userID, store: store),
                    object: parts[1])
            }
        default:
            return routeNotFound(request)
        }
    }

    /// The REST surface's operation for a data call, and the child write kind of a bulk call
    /// (`enforceApiAccess` in `packages/rest/src/rest-server.ts`).
    static func apiOperation(_ request: AppRequest, _ parts: [String]) -> (String, String?)? {
        switch (request.method, parts.count > 1 ? parts[1] : nil) {
        case ("GET", nil), ("POST", "query"?): return ("list", nil)
        case ("POST", nil): return ("create", nil)
        case ("POST", "createMany"?): return ("bulk", "create")
        case ("POST", "updateMany"?): return ("bulk", "update")
        case ("POST", "deleteMany"?): return ("bulk", "delete")
        case ("POST", "batch"?):
            return ("bulk", (try? JSONValue.parse(request.body))?["operation"]?.stringValue ?? "")
        case ("GET", _?): return ("get", nil)
        case ("PATCH", _?): return ("update", nil)
        case ("DELETE", _?): return ("delete", nil)
        default: return nil
        }
    }

    func dataRoute(_ request: AppRequest, _ parts: [String], userID: String, store: DataStore) -> CoreResponse {
        let object = parts[0]
        if let definition = store.objects.first(where: { $0.name == object }),
            let (operation, child) = Self.apiOperation(request, parts),
            !definition.allows(operation, bulkChild: child)
        {
            return .error(
                status: 405, code: "OBJECT_API_METHOD_NOT_ALLOWED",
                message: "API operation '\(operation)' is not allowed on object '\(object)'",
                extra: [
                    ("object", .string(object)),
                    ("allowed", .array(definition.allowedOperations.map { .string($0) })),
                ])
        }
        let conditional = configuration.conditionalBatch
        switch (request.method, parts.count > 1 ? parts[1] : nil) {
        case ("GET", nil): return store.list(object: object, query: request.query)
        case ("POST", nil): return store.create(object: object, body: request.body, userId: userID)
        case ("POST", "query"?): return store.query(object: object, body: request.body)
        case ("POST", "createMany"?): return store.createMany(object: object, body: request.body, userId: userID)
        case ("POST", "updateMany"?):
            return store.updateMany(object: object, body: request.body, userId: userID, conditional: conditional)
        case ("POST", "deleteMany"?):
            return store.deleteMany(object: object, body: request.body, userId: userID, conditional: conditional)
        case ("POST", "batch"?):
            return store.batch(object: object, body: request.body, userId: userID, conditional: conditional)
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

    /// Every `INVALID_FIELD` carries the singular `field` and the `object`, as the real
    /// `mapDataError` emits it (`packages/rest/src/error-response.ts`).
    static func normalizeInvalidField(_ response: CoreResponse, object: String) -> CoreResponse {
        guard response.body?["code"] == .string("INVALID_FIELD"), case .object(var members)? = response.body else {
            return response
        }
        if response.body?["field"] == nil, let message = response.body?["error"]?.stringValue,
            let range = message.firstRange(of: "Unknown field ")
        {
            let name = message[range.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "." }
            if !name.isEmpty { members.append(("field", .string(String(name)))) }
        }
        if response.body?["object"] == nil { members.append(("object", .string(object))) }
        var copy = response
        copy.body = .object(members)
        return copy
    }

    /// `--honour-idempotency-key` only (the real server reads no `Idempotency-Key`): the first response
    /// to POST/PATCH/DELETE is stored and replayed for a repeat from the same user on the same method,
    /// path and data scope (header `Idempotent-Replayed: true`).
    func idempotent(_ request: AppRequest, scope: String, userID: String, _ body: () -> CoreResponse) -> CoreResponse {
        guard configuration.honourIdempotencyKey, ["POST", "PATCH", "DELETE"].contains(request.method),
            let key = request.header("Idempotency-Key")
        else {
            return body()
        }
        let cacheKey = "\(userID)|\(scope)|\(request.method)|\(request.path)|\(key)"
        if var replay = idempotency.withLock({ $0[cacheKey] }) {
            replay.headers.append(("Idempotent-Replayed", "true"))
            return replay
        }
        let response = body()
        if response.status < 500 { idempotency.withLock { $0[cacheKey] = response } }
        return response
    }

    // MARK: Discovery

    /// The bare discovery document (`getDiscovery` + the REST overrides in `rest-server.ts`):
    /// capabilities are `{enabled}` objects over the closed well-known vocabulary; routes follow the
    /// API path and, on a scoped route, the environment.
    func discovery(scopedEnvironment: String?) -> JSONValue {
        let api = configuration.apiPath
        let base = api + (scopedEnvironment.map { "/environments/\($0)" } ?? "")
        let locales = Set(defaultStore.objects.flatMap { $0.translations.keys }).subtracting(["en"]).sorted()
        var capabilities: [(String, JSONValue)] = [
            "comments", "automation", "cron", "search", "export", "chunkedUpload",
        ].map { ($0, .object([("enabled", .bool(false))])) }
        capabilities.append(
            (
                "transactionalBatch",
                .object([
                    ("enabled", .bool(true)),
                    (
                        "description",
                        .string(
                            "Atomic batches: options.atomic rolls back every write of the batch on the first failure.")
                    ),
                ])
            ))
        capabilities += ["websockets", "files", "analytics", "ai", "notifications", "i18n"].map {
            ($0, .object([("enabled", .bool(false))]))
        }
        if configuration.conditionalBatch {
            // This server's extension: updateMany/deleteMany/batch honour per-row expected versions.
            capabilities.append(("conditionalBatch", .object([("enabled", .bool(true))])))
        }
        var scoping: [(String, JSONValue)] = [
            ("enabled", .bool(!configuration.environments.isEmpty)), ("resolution", .string("auto")),
            ("scoped", .bool(scopedEnvironment != nil)),
        ]
        if let scopedEnvironment { scoping.append(("environmentId", .string(scopedEnvironment))) }
        return .object([
            ("version", .string("1.0")), ("name", .string("ObjectStack API")), ("apiName", .string("ObjectStack API")),
            ("environment", .string("development")),
            (
                "routes",
                .object([
                    ("data", .string(base + "/data")), ("metadata", .string(base + "/meta")),
                    ("discovery", .string(base + "/discovery")), ("auth", .string(api + "/auth")),
                ])
            ),
            (
                "locale",
                .object([
                    ("default", .string("en")), ("supported", .array((["en"] + locales).map { .string($0) })),
                    ("timezone", .string("UTC")),
                ])
            ),
            (
                "services",
                .object([
                    (
                        "data",
                        .object([
                            ("enabled", .bool(true)), ("status", .string("available")),
                            ("route", .string(base + "/data")),
                        ])
                    ),
                    (
                        "auth",
                        .object([
                            ("enabled", .bool(true)), ("status", .string("available")),
                            ("route", .string(api + "/auth")),
                        ])
                    ),
                ])
            ),
            ("capabilities", .object(capabilities)),
            ("scoping", .object(scoping)),
        ])
    }
}
