import DevServerCore

/// The control API (`/__control__/`, loopback only, no auth). Data calls take an optional
/// `environment` and `organization` (defaults: the first of each).
extension DevServerApp {
    func control(_ request: AppRequest) -> CoreResponse {
        let ok = CoreResponse(status: 200, body: .object([("ok", .bool(true))]))
        let body = (try? JSONValue.parse(request.body)) ?? .object([])
        let queryValue = { (name: String) in request.query.first { $0.0 == name }?.1 }
        let scoped = store(
            environment: body["environment"]?.stringValue ?? queryValue("environment"),
            organization: body["organization"]?.stringValue ?? queryValue("organization"))
        let path = request.path.split(separator: "?").first.map(String.init) ?? request.path
        switch (request.method, path) {
        case ("POST", "/__control__/reset"):
            for store in stores.values { store.reset() }
            auth.reset()
            faults.clear()
            idempotency.withLock { $0.removeAll() }
            counters.withLock { $0.removeAll() }
            return ok
        case ("POST", "/__control__/seed"):
            guard let object = body["object"]?.stringValue, let count = body["count"]?.numberValue else {
                return .error(status: 400, code: "VALIDATION_ERROR", message: "seed takes {object, count, ids?}")
            }
            let ids: DataStore.SeedIDs
            switch body["ids"] {
            case nil, .null?: ids = .random
            case .string(let mode)? where DataStore.SeedIDs(rawValue: mode) != nil:
                ids = DataStore.SeedIDs(rawValue: mode)!
            default: return .error(status: 400, code: "VALIDATION_ERROR", message: "ids is random or sequential")
            }
            let user = configuration.users.first?.id ?? "usr_seed"
            let seeded = scoped.seed(
                object: object, count: Int(count), userId: user, ids: ids,
                oneTransaction: body["oneTransaction"] == .bool(true))
            return CoreResponse(status: 200, body: .object([("seeded", .number(Double(seeded)))]))
        case ("POST", "/__control__/faults"):
            return faults.add(body) ? ok : .error(status: 400, code: "VALIDATION_ERROR", message: "bad fault")
        case ("DELETE", "/__control__/faults"):
            faults.clear()
            return ok
        case ("POST", "/__control__/expire-sessions"):
            auth.expireAll()
            return ok
        case ("POST", "/__control__/auth-gate"):
            guard let email = body["email"]?.stringValue,
                let user = configuration.users.first(where: { $0.email.lowercased() == email.lowercased() })
            else {
                return .error(status: 404, code: "RESOURCE_NOT_FOUND", message: "auth-gate takes the e-mail of a user")
            }
            switch body["gate"] {
            case .string(let code)? where Self.gateMessages[code] != nil:
                auth.setGate(userID: user.id, code: code)
            case nil, .null?:
                auth.setGate(userID: user.id, code: nil)
            default:
                return .error(
                    status: 400, code: "VALIDATION_ERROR", message: "gate is PASSWORD_EXPIRED, MFA_REQUIRED or null")
            }
            return ok
        case ("GET", "/__control__/totp"):
            // What the user's authenticator app shows now (for tests of the two-factor sign-in).
            guard let email = queryValue("email"), let secret = configuration.totpSecrets[email],
                let key = OneTimePassword.base32Decode(secret)
            else {
                return .error(status: 404, code: "RESOURCE_NOT_FOUND", message: "no TOTP secret for this user")
            }
            return CoreResponse(
                status: 200, body: .object([("code", .string(OneTimePassword.totp(key: key, time: AuthStore.now())))]))
        case ("POST", "/__control__/modify"):
            guard let object = body["object"]?.stringValue, let id = body["id"]?.stringValue else {
                return .error(status: 400, code: "VALIDATION_ERROR", message: "modify takes {object, id, fields}")
            }
            // An explicit `updated_at` (ISO 8601): the stamp a real server may give (see modifyAsOtherUser).
            var stamp: Int64?
            if let text = body["updated_at"]?.stringValue {
                guard let millis = VersionClockFormat.millis(text) else {
                    return .error(status: 400, code: "VALIDATION_ERROR", message: "updated_at must be ISO 8601")
                }
                stamp = millis
            }
            return scoped.modifyAsOtherUser(
                object: object, id: id, fields: body["fields"] ?? .object([]), stampedAt: stamp)
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
                    ("liveSessions", .number(Double(auth.liveSessions))),
                ]))
        case ("GET", "/__control__/record"):
            let object = queryValue("object") ?? ""
            let id = queryValue("id") ?? ""
            return CoreResponse(
                status: 200,
                body: .object([
                    ("count", .number(Double(scoped.count(object: object)))),
                    ("record", scoped.record(object: object, id: id) ?? .null),
                ]))
        default:
            return .error(status: 404, code: "ROUTE_NOT_FOUND", message: "No control route")
        }
    }
}
