import FoundationEssentials
import OStackCore
import Synchronization

/// A scripted in-process ObjectStack auth server for unit tests of the core (the end-to-end tests use
/// the real `ostack-devserver`). It issues opaque tokens, rotates them on `get-session` when asked,
/// and counts requests.
final class FakeObjectStack: HTTPTransport, @unchecked Sendable {
    struct State {
        var tokens: [String: String] = [:]  // token → user id
        var rotate = false
        /// The user `get-session` names instead of the token's (a lying or mixed-up server).
        var sessionUser: String?
        /// Whose token a rotation hands out (another user's: a mixed-up or hostile server).
        var rotatedOwner: String?
        /// Tokens a rotation handed out. Like better-auth (a session is refreshed once per
        /// `updateAge`), a rotated token is not rotated again on its own `get-session`, unless
        /// `rotateAgainTo` says to whom the next one belongs: the check of the new token then hands
        /// out one more in a `set-auth-token` header only, its body naming the token checked (a
        /// header mixed up from another user's answer, when hostile). Used once.
        var rotatedTokens: Set<String> = []
        var rotateAgainTo: String?
        var getSessionCount = 0
        var signInCount = 0
        var signOutCount = 0
        var failure: TransportFailure?
        var expiresAt = "2030-01-01T00:00:00.000Z"
        /// The `task` metadata item served at /api/v1/meta/object/task (ETag = its hash).
        var taskItem =
            #"{"name":"task","label":"Task","nameField":"title","fields":{"title":{"type":"text","label":"Title","required":true,"maxLength":20}}}"#
        var metaRequests = 0
        var notModified = 0
        /// The status of every `GET /api/v1/data/task`, in order.
        var dataStatuses: [Int] = []
        /// `GET /api/v1/data/task` answers one new record at a time, with a `total` it never
        /// reaches and no `hasMore` (a server whose list never ends).
        var endlessPages = false
    }

    let state = Mutex(State())
    let users: [String: (password: String, id: String, name: String)] = [
        "alice@example.com": ("alice-pass", "usr_alice", "Alice"),
        "bob@example.com": ("bob-pass", "usr_bob", "Bob"),
    ]

    func send(_ request: TransportRequest) throws(TransportFailure) -> TransportResponse {
        if let failure = state.withLock({ $0.failure }) { throw failure }
        let afterScheme = request.url.firstRange(of: "://").map { request.url[$0.upperBound...] } ?? request.url[...]
        let target = afterScheme.firstIndex(of: "/").map { String(afterScheme[$0...]) } ?? "/"
        let path = String(target.prefix { $0 != "?" })
        let bearer = request.headers.first { $0.0 == "Authorization" }?.1.replacing("Bearer ", with: "")
        switch (request.method, path) {
        case ("GET", "/api/v1/discovery"):
            return json(
                200,
                #"{"name":"ObjectStack API","version":"1.0","routes":{"data":"/api/v1/data","metadata":"/api/v1/meta"}}"#
            )
        case ("POST", "/api/v1/auth/sign-in/email"):
            let body = (try? JSONDecoder().decode([String: String].self, from: Data(request.body ?? []))) ?? [:]
            guard let email = body["email"], let user = users[email], body["password"] == user.password else {
                return json(401, #"{"code":"INVALID_EMAIL_OR_PASSWORD","message":"Invalid email or password"}"#)
            }
            let token = "tok_" + String(UInt64.random(in: 1...UInt64.max), radix: 16)
            state.withLock {
                $0.tokens[token] = user.id; $0.signInCount += 1
            }
            return json(
                200, #"{"token":"\#(token)","user":{"id":"\#(user.id)","email":"\#(email)","name":"\#(user.name)"}}"#)
        case ("GET", "/api/v1/auth/get-session"):
            return state.withLock { state -> TransportResponse in
                state.getSessionCount += 1
                guard let bearer, let owner = state.tokens[bearer] else { return json(200, "null") }
                let userID = state.sessionUser ?? owner
                let (email, user) = users.first { $0.value.id == userID }!
                var token = bearer
                var header: String?
                let again = state.rotatedTokens.contains(bearer)
                if state.rotate && (!again || state.rotateAgainTo != nil) {
                    state.tokens[bearer] = nil
                    let next = "tok_" + String(UInt64.random(in: 1...UInt64.max), radix: 16)
                    state.tokens[next] = again ? state.rotateAgainTo : (state.rotatedOwner ?? owner)
                    state.rotatedTokens.insert(next)
                    if again {
                        state.rotateAgainTo = nil
                        header = next
                    } else {
                        token = next
                    }
                }
                var response = json(
                    200,
                    #"{"session":{"token":"\#(token)","expiresAt":"\#(state.expiresAt)"},"user":{"id":"\#(userID)","email":"\#(email)","name":"\#(user.name)"}}"#
                )
                if let header { response.headers.append(("set-auth-token", header)) }
                return response
            }
        case ("POST", "/api/v1/auth/sign-out"):
            state.withLock {
                $0.signOutCount += 1
                if let bearer { $0.tokens[bearer] = nil }
            }
            return json(200, #"{"success":true}"#)
        case ("GET", "/api/v1/meta/object/task"):
            return state.withLock { state -> TransportResponse in
                state.metaRequests += 1
                let etag = "\"\(String(UInt32(truncatingIfNeeded: state.taskItem.hashValue), radix: 16))\""
                if request.headers.contains(where: { $0.0 == "If-None-Match" && $0.1 == etag }) {
                    state.notModified += 1
                    return TransportResponse(status: 304, headers: [("ETag", etag)])
                }
                var response = json(200, #"{"type":"object","name":"task","item":\#(state.taskItem)}"#)
                response.headers.append(("ETag", etag))
                return response
            }
        case ("GET", "/api/v1/data/task"):
            let known = state.withLock { state in
                let known = bearer.map { state.tokens[$0] != nil } ?? false
                state.dataStatuses.append(known ? 200 : 401)
                return known
            }
            if !known {
                return json(
                    401,
                    #"{"error":"UNAUTHENTICATED","code":"UNAUTHENTICATED","message":"Authentication is required to access this endpoint."}"#
                )
            }
            if state.withLock({ $0.endlessPages }) {
                let page = state.withLock { $0.dataStatuses.count }
                return json(200, #"{"object":"task","records":[{"id":"r\#(page)","title":"Again"}],"total":1000000000000000}"#)
            }
            return json(200, #"{"object":"task","records":[],"total":0,"hasMore":false}"#)
        default:
            return json(404, #"{"error":"not found","code":"ROUTE_NOT_FOUND"}"#)
        }
    }

    func json(_ status: Int, _ text: String) -> TransportResponse {
        TransportResponse(status: status, headers: [("Content-Type", "application/json")], body: Array(text.utf8))
    }
}
