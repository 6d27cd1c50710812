import CurlKit
import FoundationEssentials
import OStackTestSupport
import Testing

/// ObjectStack's filter and pagination conformance tables (`Tests/Conformance/`) against the built
/// `ostack-devserver` over HTTP, on its faithful default (only `--conformance-objects`, which adds
/// objects shaped like the tables' fixtures). The same cases run against ostack's local evaluator
/// and query path in `OStackCoreTests.ConformanceTests`.
@Suite(.serialized) struct ConformanceContractTests {
    let server: DevServerProcess
    let client = HTTPClient()
    let token: String

    init() throws {
        server = try DevServerProcess(arguments: ["--conformance-objects"])
        let response = try client.send(
            HTTPRequest(
                method: .post, url: server.url + "/api/v1/auth/sign-in/email",
                headers: [("Content-Type", "application/json")],
                body: Array(#"{"email":"alice@example.com","password":"alice-pass"}"#.utf8)))
        token = try #require(JSONObject(response.body)["token"] as? String)
    }

    func send(_ method: HTTPRequest.Method, _ path: String, body: String? = nil) throws -> (Int, JSONObject) {
        var headers = [("Authorization", "Bearer \(token)")]
        if body != nil { headers.append(("Content-Type", "application/json")) }
        let response = try client.send(
            HTTPRequest(method: method, url: server.url + path, headers: headers, body: body.map { Array($0.utf8) }))
        return (response.status, JSONObject(response.body))
    }

    func seed(_ table: Conformance.Table) throws {
        for row in table.rows {
            let (status, _) = try send(.post, "/api/v1/data/\(table.object)", body: row)
            try #require(status == 201, "\(table.object): \(row)")
        }
    }

    static func encode(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."):
                out.append(Character(Unicode.Scalar(byte)))
            default:
                let hex = Array("0123456789ABCDEF")
                out += "%" + String(hex[Int(byte >> 4)]) + String(hex[Int(byte & 15)])
            }
        }
        return out
    }

    func ids(_ json: JSONObject) -> [String] {
        (json["records"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
    }

    @Test func everyFilterCaseOverHTTP() throws {
        let tables = try Conformance.filterTables()
        var checked = 0
        for table in tables {
            try seed(table)
            for testCase in table.cases {
                let (status, json) = try send(
                    .get, "/api/v1/data/\(table.object)?top=1000&filter=" + Self.encode(testCase.filter))
                switch testCase.verdict {
                case .rows(let expected):
                    #expect(status == 200, "\(table.name): \(testCase.name)")
                    #expect(ids(json).sorted() == expected, "\(table.name): \(testCase.name)")
                case .compiles:
                    #expect(status == 200, "\(table.name): \(testCase.name)")
                case .refused(let mentions):
                    #expect(status == 400, "\(table.name): \(testCase.name)")
                    #expect(json["code"] as? String == "INVALID_FILTER", "\(table.name): \(testCase.name)")
                    let message = json["error"] as? String ?? ""
                    for mention in mentions {
                        #expect(message.contains(mention), "\(testCase.name): '\(message)' does not name \(mention)")
                    }
                }
                checked += 1
            }
        }
        #expect(checked >= 120)
    }

    @Test func pagesPartitionTheRows() throws {
        let pagination = try Conformance.pagination()
        try seed(pagination.table)
        let all = pagination.table.ids.sorted()
        for page in pagination.pages {
            let sort = page.orderBy.map { ($0.descending ? "-" : "") + $0.field }.joined(separator: ",")
            var seen: [String] = []
            var skip = 0
            while skip < all.count + page.pageSize {
                var path = "/api/v1/data/conf_page?top=\(page.pageSize)&skip=\(skip)"
                if !sort.isEmpty { path += "&sort=" + Self.encode(sort) }
                let (status, json) = try send(.get, path)
                #expect(status == 200)
                seen += ids(json)
                skip += page.pageSize
            }
            #expect(seen.count == all.count, "\(page.name)")
            #expect(seen.sorted() == all, "\(page.name)")
        }
        for limit in pagination.limits {
            var query: [String] = []
            if let top = limit.limit { query.append("top=\(top)") }
            if let skip = limit.offset { query.append("skip=\(skip)") }
            let (status, json) = try send(.get, "/api/v1/data/conf_page?" + query.joined(separator: "&"))
            #expect(status == 200)
            #expect(ids(json).count == limit.expectedRowCount, "\(limit.name)")
        }
    }
}
