import CurlKit
import OStackTestSupport

/// The dev server must never be the bottleneck of the client's benchmarks (issue: paging through
/// 100 000 records in pages of 1 000 well under 2 s on loopback, release build).
enum DevServerBench {
    static func run() throws -> [BenchResult] {
        let server = try DevServerProcess()
        try server.control("POST", "seed", #"{"object":"task","count":100000}"#)
        let client = HTTPClient()
        let signIn = try client.send(
            HTTPRequest(
                method: .post, url: server.url + "/api/v1/auth/sign-in/email",
                headers: [("Content-Type", "application/json")],
                body: Array(#"{"email":"alice@example.com","password":"alice-pass"}"#.utf8)))
        let token =
            String(decoding: signIn.body, as: UTF8.self).split(separator: "\"").drop { $0 != "token" }.dropFirst(2)
            .first
            .map(String.init) ?? ""
        var received = 0
        let seconds = try Measure.time {
            for page in 0..<100 {
                let response = try client.send(
                    HTTPRequest(
                        url: server.url
                            + "/api/v1/data/task?top=1000&skip=\(page * 1000)&count=false&sort=updated_at,id",
                        headers: [("Authorization", "Bearer \(token)")]))
                precondition(response.status == 200, "paging failed with \(response.status)")
                received += response.body.count
            }
        }
        precondition(received > 1_000_000, "paging returned too little data")
        return [
            BenchResult(
                name: "devserver-paging", value: seconds * 1000, unit: "ms", baseline: nil, ratio: nil,
                target: "< 2000 ms for 100 × 1000 records", ok: seconds < 2)
        ]
    }
}
