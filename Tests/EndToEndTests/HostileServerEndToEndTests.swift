import OStackTestSupport
import Testing

/// A server that says "yes" without proof (issue 14, defect 1): the dev server carries the write
/// out (or not), then answers with an empty, HTML or list body. The change must stay queued, be
/// reported as unconfirmed, and after the fault one sync must leave exactly one copy on the server.
@Suite(.serialized) struct HostileServerEndToEndTests {
    func signedIn() throws -> (DevServerProcess, OStackRunner) {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        let login = try ostack.login(server.url, "alice@example.com", "alice-pass", extra: ["--alias", "work"])
        try #require(login.status == 0, "\(login.stderr)")
        #expect(try ostack.run(["sync", "track", "task"]).status == 0)
        return (server, ostack)
    }

    /// How many tasks the server holds, and the one with `id` (JSON, `null` when absent).
    func server(_ server: DevServerProcess, id: String = "") throws -> (count: Int, record: String) {
        let body = try server.control("GET", "record?object=task&id=\(id)")
        guard let range = body.firstRange(of: "\"count\":") else { return (-1, body) }
        let record = body.firstRange(of: "\"record\":").map { String(body[$0.upperBound...]) } ?? ""
        return (Int(body[range.upperBound...].prefix { $0.isNumber }) ?? -1, record)
    }

    func recordID(in json: String) -> String? {
        guard let range = json.firstRange(of: "\"id\":\"") else { return nil }
        return String(json[range.upperBound...].prefix { $0 != "\"" })
    }

    /// The fault for the next matching request: `commit` carries the write out first.
    func fault(_ server: DevServerProcess, method: String, path: String, status: Int, text: String?, commit: Bool)
        throws
    {
        let action = commit ? "answer-after" : "status"
        let body = text.map { #""text":"\#($0)","contentType":"text/html""# } ?? #""body":{"records":[]}"#
        _ = try server.control(
            "POST", "faults",
            #"{"action":"\#(action)","status":\#(status),\#(body),"count":1,"match":{"method":"\#(method)","pathPrefix":"\#(path)"}}"#
        )
    }

    /// After `queue retry` and one sync, nothing is queued and the server holds `expected` tasks.
    func settles(_ ostack: OStackRunner, _ devServer: DevServerProcess, expected: Int) throws {
        #expect(try ostack.run(["queue", "retry"]).status == 0)
        let sync = try ostack.run(["sync", "--reconcile"])
        #expect(sync.status == 0, "\(sync.stderr)")
        #expect(try ostack.run(["queue", "list", "--json"]).stdout == "{\"entries\":[]}\n")
        #expect(try server(devServer).count == expected)
    }

    struct Mode: Sendable, CustomTestStringConvertible {
        var status: Int
        var text: String?
        var commit: Bool
        var testDescription: String {
            "\(status) \(text ?? "{\"records\":[]}") \(commit ? "after commit" : "nothing done")"
        }
    }

    static let modes: [Mode] = [
        Mode(status: 201, text: "", commit: true),
        Mode(status: 200, text: "<html><body>OK</body></html>", commit: true),
        Mode(status: 200, text: nil, commit: true),  // a redirect answered by a list
        Mode(status: 200, text: "<html><body>OK</body></html>", commit: false),  // a proxy that never forwarded
        Mode(status: 201, text: "", commit: false),
    ]

    @Test(arguments: modes)
    func aCreateWithoutProofStaysQueuedAndArrivesOnce(_ mode: Mode) throws {
        let (server, ostack) = try signedIn()
        let before = try self.server(server).count
        try fault(
            server, method: "POST", path: "/api/v1/data/task", status: mode.status, text: mode.text, commit: mode.commit
        )
        let created = try ostack.run(["records", "create", "task", "--set", "title=Proof", "--json"])
        #expect(created.status == 11, "\(created.stderr)")
        #expect(created.stdout.contains("\"queued\":true"))
        #expect(created.stderr.contains("without confirming the change. It is saved and queued"))
        let queue = try ostack.run(["queue", "list", "--json"])
        #expect(queue.stdout.contains("unconfirmed"), "\(queue.stdout)")
        #expect(try self.server(server).count == before + (mode.commit ? 1 : 0))
        try settles(ostack, server, expected: before + 1)
        let id = try #require(recordID(in: created.stdout))
        #expect(try self.server(server, id: id).record.contains("\"title\":\"Proof\""))
        #expect(try ostack.run(["records", "get", "task", id, "--local"]).status == 0)
    }

    @Test func anUpdateAndADeleteWithoutProofStayQueued() throws {
        let (server, ostack) = try signedIn()
        let created = try ostack.run(["records", "create", "task", "--set", "title=Before", "--json"])
        let id = try #require(recordID(in: created.stdout))
        let count = try self.server(server).count
        try fault(server, method: "PATCH", path: "/api/v1/data/task", status: 200, text: "", commit: true)
        let updated = try ostack.run(["records", "update", "task", id, "--set", "title=After"])
        #expect(updated.status == 11, "\(updated.stderr)")
        try settles(ostack, server, expected: count)
        #expect(try self.server(server, id: id).record.contains("\"title\":\"After\""))
        #expect(try ostack.run(["conflicts", "list", "--json"]).stdout == "{\"conflicts\":[]}\n")

        try fault(server, method: "DELETE", path: "/api/v1/data/task", status: 204, text: "", commit: true)
        let deleted = try ostack.run(["records", "delete", "task", id])
        #expect(deleted.status == 11, "\(deleted.stderr)")
        try settles(ostack, server, expected: count - 1)
        #expect(try self.server(server, id: id).record.hasPrefix("null"))
    }

    @Test func aBatchWithoutProofStaysQueuedAndArrivesOnce() throws {
        let (server, ostack) = try signedIn()
        let before = try self.server(server).count
        for _ in 1...3 {
            #expect(try ostack.run(["records", "create", "task", "--set", "title=Batch", "--offline"]).status == 0)
        }
        try fault(server, method: "POST", path: "/api/v1/data/task/createMany", status: 200, text: nil, commit: true)
        let sync = try ostack.run(["sync", "--json"])
        #expect(sync.status == 11, "\(sync.stderr)")
        #expect(try self.server(server).count == before + 3)
        try settles(ostack, server, expected: before + 3)
    }
}
