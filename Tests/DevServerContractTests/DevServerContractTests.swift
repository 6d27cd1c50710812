import CurlKit
import Glibc
import FoundationEssentials
import OStackTestSupport
import Testing

/// The built `ostack-devserver`, over real HTTP on loopback, with ostack's own HTTP client: status
/// codes and body shapes as docs/protocol.md describes them.
@Suite struct DevServerContractTests {
    let server: DevServerProcess
    let client = HTTPClient()

    init() throws {
        server = try DevServerProcess(arguments: ["--rotation-grace", "1"])
    }

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

    func signIn(_ email: String = "alice@example.com", _ password: String = "alice-pass") throws -> String {
        let result = try call(
            .post, "/api/v1/auth/sign-in/email", body: #"{"email":"\#(email)","password":"\#(password)"}"#)
        try #require(result.status == 200)
        #expect(result.response.header("set-auth-token") != nil)
        return try #require(result.json["token"] as? String)
    }

    @Test func discoveryBareAndWrapped() throws {
        let bare = try call(.get, "/api/v1/discovery")
        #expect(bare.status == 200)
        #expect((bare.json["routes"] as? [String: Any])?["data"] as? String == "/api/v1/data")
        let wrapped = try call(.get, "/.well-known/objectstack")
        #expect(wrapped.json["success"] as? Bool == true)
        #expect(
            ((wrapped.json["data"] as? [String: Any])?["routes"] as? [String: Any])?["metadata"] as? String
                == "/api/v1/meta")
        // Capabilities are `{enabled}` objects, each key once; no invented `conditionalBatch`.
        let text = String(decoding: bare.response.body, as: UTF8.self)
        #expect(text.components(separatedBy: "\"capabilities\"").count == 2)
        let capabilities = try #require(bare.json["capabilities"] as? [String: Any])
        #expect(capabilities["conditionalBatch"] == nil)
        #expect((capabilities["transactionalBatch"] as? [String: Any])?["enabled"] as? Bool == true)
        #expect(capabilities.values.allSatisfy { ($0 as? [String: Any])?["enabled"] is Bool })
        #expect((bare.json["scoping"] as? [String: Any])?["enabled"] as? Bool == false)
    }

    @Test func signInSessionAndSignOut() throws {
        let wrong = try call(
            .post, "/api/v1/auth/sign-in/email", body: #"{"email":"alice@example.com","password":"nope"}"#)
        #expect(wrong.status == 401)
        #expect(wrong.json["code"] as? String == "INVALID_EMAIL_OR_PASSWORD")
        let token = try signIn()
        let session = try call(.get, "/api/v1/auth/get-session", token: token)
        #expect((session.json["user"] as? [String: Any])?["email"] as? String == "alice@example.com")
        #expect((session.json["session"] as? [String: Any])?["expiresAt"] is String)
        _ = try call(.post, "/api/v1/auth/sign-out", token: token, body: "{}")
        let after = try call(.get, "/api/v1/auth/get-session", token: token)
        #expect(after.status == 200)
        #expect(String(decoding: after.response.body, as: UTF8.self) == "null")
    }

    @Test func unauthenticatedBodiesMatchTheProtocol() throws {
        let anonymous = try call(.get, "/api/v1/data/task")
        #expect(anonymous.status == 401)
        #expect(anonymous.json["error"] as? String == "UNAUTHENTICATED")
        #expect(anonymous.json["code"] as? String == "UNAUTHENTICATED")
        let token = try signIn()
        try server.control("POST", "expire-sessions")
        #expect(try call(.get, "/api/v1/data/task", token: token).status == 401)
    }

    @Test func recordsLifecycleWith404And409() throws {
        let token = try signIn()
        let created = try call(.post, "/api/v1/data/task", token: token, body: #"{"title":"Write tests"}"#)
        #expect(created.status == 201)
        let id = try #require(created.json["id"] as? String)
        let version = try #require((created.json["record"] as? [String: Any])?["updated_at"] as? String)
        #expect(try call(.get, "/api/v1/data/task/\(id)", token: token).status == 200)
        #expect(try call(.get, "/api/v1/data/task/nope", token: token).json["code"] as? String == "RECORD_NOT_FOUND")
        #expect(try call(.get, "/api/v1/data/nope", token: token).json["code"] as? String == "OBJECT_NOT_FOUND")
        try server.control("POST", "modify", #"{"object":"task","id":"\#(id)","fields":{"title":"Theirs"}}"#)
        let stale = try call(
            .patch, "/api/v1/data/task/\(id)", token: token, body: #"{"title":"Mine"}"#,
            headers: [("If-Match", version)])
        #expect(stale.status == 409)
        #expect(stale.json["code"] as? String == "CONCURRENT_UPDATE")
        #expect((stale.json["currentRecord"] as? [String: Any])?["title"] as? String == "Theirs")
        let invalid = try call(.post, "/api/v1/data/task", token: token, body: #"{"notes":"no title"}"#)
        #expect(invalid.status == 400)
        #expect(invalid.json["code"] as? String == "VALIDATION_FAILED")
        let list = try call(
            .get, "/api/v1/data/task?filter=%5B%22title%22%2C%22%3D%22%2C%22Theirs%22%5D&select=title&top=5",
            token: token)
        #expect(list.json["total"] as? Int == 1)
    }

    @Test func batchCapAndMetadataETag() throws {
        let token = try signIn()
        let many = "[" + Array(repeating: #"{"title":"x"}"#, count: 201).joined(separator: ",") + "]"
        let tooLarge = try call(.post, "/api/v1/data/task/createMany", token: token, body: many)
        #expect(tooLarge.status == 400)
        #expect(tooLarge.json["code"] as? String == "BATCH_TOO_LARGE")
        let item = try call(.get, "/api/v1/meta/object/task", token: token)
        let etag = try #require(item.response.header("ETag"))
        let cached = try call(.get, "/api/v1/meta/object/task", token: token, headers: [("If-None-Match", etag)])
        #expect(cached.status == 304)
        #expect(cached.response.body.isEmpty)
    }

    @Test func healthMetadataListsAndApps() throws {
        #expect(try call(.get, "/api/v1/health").json["success"] as? Bool == true)
        let token = try signIn()
        #expect((try call(.get, "/api/v1/meta", token: token).json["types"] as? [Any])?.count == 2)
        let objects = try call(.get, "/api/v1/meta/object", token: token)
        #expect((objects.json["items"] as? [Any])?.count == 4)  // task, project, contact, note
        #expect(objects.response.header("ETag") == nil)  // lists carry no ETag
        #expect((try call(.get, "/api/v1/me/apps", token: token).json["apps"] as? [Any])?.isEmpty == false)
        #expect((try call(.get, "/api/v1/me/apps").json["apps"] as? [Any])?.isEmpty == true)  // anonymous
        #expect(try call(.get, "/api/v1/meta/object/nope", token: token).status == 404)
    }

    @Test func queryAndBulkOverHTTP() throws {
        let token = try signIn()
        let created = try call(
            .post, "/api/v1/data/task/createMany", token: token, body: #"[{"title":"a"},{"title":"b"}]"#)
        #expect(created.status == 201)
        let ids = (created.json["records"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
        try #require(ids.count == 2)
        let query = try call(
            .post, "/api/v1/data/task/query", token: token,
            body: #"{"where":{"title":{"$in":["a","b"]}},"orderBy":[{"field":"title","order":"desc"}],"limit":1}"#)
        #expect(((query.json["records"] as? [[String: Any]])?.first?["title"]) as? String == "b")
        #expect(query.json["total"] as? Int == 2)
        let update = try call(
            .post, "/api/v1/data/task/updateMany", token: token,
            body:
                #"{"records":[{"id":"\#(ids[0])","data":{"status":"done"}},{"id":"missing","data":{}}],"options":{"continueOnError":true}}"#
        )
        #expect(update.status == 200)
        #expect(update.json["succeeded"] as? Int == 1)
        #expect(update.json["failed"] as? Int == 1)
        let delete = try call(.post, "/api/v1/data/task/deleteMany", token: token, body: #"{"ids":["\#(ids[1])"]}"#)
        #expect(delete.json["succeeded"] as? Int == 1)
        let remaining = try call(.get, "/api/v1/data/task?status=done", token: token)
        #expect(remaining.json["total"] as? Int == 1)
    }

    @Test func idempotencyKeyIsNotReadByDefault() throws {
        let token = try signIn()
        let headers = [("Idempotency-Key", "key-1")]
        let first = try call(.post, "/api/v1/data/task", token: token, body: #"{"title":"Once"}"#, headers: headers)
        let second = try call(.post, "/api/v1/data/task", token: token, body: #"{"title":"Once"}"#, headers: headers)
        #expect(first.status == 201 && second.status == 201)
        #expect(first.json["id"] as? String != second.json["id"] as? String)
        #expect(second.response.header("Idempotent-Replayed") == nil)
        #expect(try server.control("GET", "record?object=task&id=x").contains("\"count\":2"))
    }

    /// A request on a fresh connection (libcurl re-sends once only on a *reused* one).
    func callFresh(_ path: String, token: String, body: String, key: String? = nil) throws -> HTTPResponse {
        var headers = [("Authorization", "Bearer \(token)"), ("Content-Type", "application/json")]
        if let key { headers.append(("Idempotency-Key", key)) }
        return try HTTPClient().send(
            HTTPRequest(method: .post, url: server.url + path, headers: headers, body: Array(body.utf8)))
    }

    @Test func dropAfterCommitLeavesAConnectionErrorAndTheRecord() throws {
        let token = try signIn()
        try server.control(
            "POST", "faults",
            #"{"match":{"method":"POST","pathPrefix":"/api/v1/data/task"},"count":1,"action":"drop-after"}"#)
        #expect(throws: HTTPError.connectionDropped) {
            try callFresh("/api/v1/data/task", token: token, body: #"{"title":"Committed","id":"tsk_mine"}"#, key: "k2")
        }
        #expect(try server.control("GET", "record?object=task&id=x").contains("\"count\":1"))
        // No replay by default: the retry with the same client-chosen id is the unique violation.
        let retry = try call(
            .post, "/api/v1/data/task", token: token, body: #"{"title":"Committed","id":"tsk_mine"}"#,
            headers: [("Idempotency-Key", "k2")])
        #expect(retry.status == 409)
        #expect(retry.json["code"] as? String == "UNIQUE_VIOLATION")
        #expect(retry.json["field"] as? String == "id")
        #expect(try server.control("GET", "record?object=task&id=x").contains("\"count\":1"))
    }

    @Test func dropBeforeCommitsNothingAndStatusFaultsCarryRetryAfter() throws {
        let token = try signIn()
        try server.control("POST", "faults", #"{"match":{"method":"POST"},"count":1,"action":"drop-before"}"#)
        #expect(throws: HTTPError.connectionDropped) {
            try callFresh("/api/v1/data/task", token: token, body: #"{"title":"Lost"}"#)
        }
        #expect(try server.control("GET", "record?object=task&id=x").contains("\"count\":0"))
        try server.control("POST", "faults", #"{"count":1,"action":"status","status":503,"retryAfter":7}"#)
        let unavailable = try call(.get, "/api/v1/data/task", token: token)
        #expect(unavailable.status == 503)
        #expect(unavailable.response.header("Retry-After") == "7")
        #expect(unavailable.json["error"] as? String == "Internal server error")
    }
}

@Suite struct DevServerRotationTests {
    @Test func rotationKeepsThePreviousTokenForTheGracePeriodOnly() throws {
        // The grace is counted from the rotation (the `get-session` answer): the check inside it is
        // made only when the request certainly ended inside it, the one after it certainly after it,
        // however long a loaded machine takes for a request (a fixed 1 s grace could run out first).
        let grace = 2.0
        let server = try DevServerProcess(arguments: ["--rotate-tokens", "--rotation-grace", "2"])
        let client = HTTPClient()
        func send(_ method: HTTPRequest.Method, _ path: String, token: String? = nil, body: String? = nil) throws
            -> HTTPResponse
        {
            var headers = [("Content-Type", "application/json")]
            if let token { headers.append(("Authorization", "Bearer \(token)")) }
            return try client.send(
                HTTPRequest(method: method, url: server.url + path, headers: headers, body: body.map { Array($0.utf8) })
            )
        }
        let signIn = try send(
            .post, "/api/v1/auth/sign-in/email", body: #"{"email":"bob@example.com","password":"bob-pass"}"#)
        let first = try #require(JSONObject(signIn.body)["token"] as? String)
        let rotatedFrom = ChildProcess.now()
        let session = try send(.get, "/api/v1/auth/get-session", token: first)
        let rotatedBy = ChildProcess.now()
        let second = try #require(session.header("set-auth-token"))
        #expect(second != first)
        let inside = try send(.get, "/api/v1/data/task", token: first).status
        if ChildProcess.now() < rotatedFrom + grace {
            #expect(inside == 200)  // inside the grace period
        }
        #expect(try send(.get, "/api/v1/data/task", token: second).status == 200)
        let wait = rotatedBy + grace + 0.3 - ChildProcess.now()
        if wait > 0 { usleep(UInt32(wait * 1_000_000)) }
        #expect(try send(.get, "/api/v1/data/task", token: first).status == 401)  // grace over
        #expect(try send(.get, "/api/v1/data/task", token: second).status == 200)
        #expect(try server.control("GET", "counters").contains("\"rotations\":1"))
    }

    @Test func refusesToBindAnythingButLoopback() throws {
        let result = try runProcess(
            executable: DevServerProcess.binary, arguments: ["--host", "0.0.0.0", "--port", "0"], timeout: 20)
        #expect(result.status != 0)
        #expect(result.stderr.contains("refusing"))
        #expect(result.stdout.isEmpty)
    }
}

/// Loosely typed JSON for assertions.
struct JSONObject {
    let value: [String: Any]

    init(_ bytes: [UInt8]) {
        value = (try? JSONAny.decode(bytes)) as? [String: Any] ?? [:]
    }

    subscript(key: String) -> Any? { value[key] }
}

enum JSONAny {
    struct Node: Decodable {
        let value: Any
        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if container.decodeNil() {
                value = NSNullLite()
            } else if let bool = try? container.decode(Bool.self) {
                value = bool
            } else if let int = try? container.decode(Int.self) {
                value = int
            } else if let double = try? container.decode(Double.self) {
                value = double
            } else if let string = try? container.decode(String.self) {
                value = string
            } else if let array = try? container.decode([Node].self) {
                value = array.map(\.value)
            } else {
                value = try container.decode([String: Node].self).mapValues(\.value)
            }
        }
    }

    static func decode(_ bytes: [UInt8]) throws -> Any { try JSONDecoder().decode(Node.self, from: Data(bytes)).value }
}

struct NSNullLite {}
