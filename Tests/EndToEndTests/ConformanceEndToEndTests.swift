import OStackTestSupport
import Testing

/// Every case of ObjectStack's filter conformance tables through the `ostack` binary, against the dev
/// server's faithful default: `records list --filter-json … --local` (the tracked mirror) and
/// `--remote` (the server) must both give exactly the table's rows — the same filter never answers
/// differently offline and online.
@Suite(.serialized) struct ConformanceEndToEndTests {
    /// The ids in `records list --json` output.
    static func ids(_ json: String) -> [String] {
        var ids: [String] = []
        var rest = Substring(json)
        while let range = rest.firstRange(of: "\"id\":\"") {
            let tail = rest[range.upperBound...]
            ids.append(String(tail.prefix { $0 != "\"" }))
            rest = tail
        }
        return ids.sorted()
    }

    @Test func localAndRemoteAgreeWithTheTables() throws {
        let server = try DevServerProcess(arguments: ["--conformance-objects"])
        let ostack = OStackRunner()
        let login = try ostack.login(server.url, "alice@example.com", "alice-pass", extra: ["--alias", "conf"])
        try #require(login.status == 0, "\(login.stderr)")
        var checked = 0
        for table in try Conformance.filterTables() {
            let created = try ostack.run(
                ["records", "create", table.object, "--data", "[" + table.rows.joined(separator: ",") + "]", "--json"])
            try #require(created.status == 0, "\(table.name): \(created.stderr)")
            let track = try ostack.run(["sync", "track", table.object])
            try #require(track.status == 0, "\(track.stderr)")
            try #require(try ostack.run(["sync"]).status == 0)
            for testCase in table.cases {
                for source in ["--local", "--remote"] {
                    let result = try ostack.run([
                        "records", "list", table.object, "--filter-json", testCase.filter, source, "--limit", "1000",
                        "--json",
                    ])
                    let label = "\(table.name) \(source): \(testCase.name)"
                    switch testCase.verdict {
                    case .rows(let expected):
                        #expect(result.status == 0, "\(label): \(result.stderr)")
                        #expect(Self.ids(result.stdout) == expected, "\(label)")
                    case .compiles:
                        #expect(result.status == 0, "\(label): \(result.stderr)")
                    case .refused(let mentions):
                        #expect(result.status == 9, "\(label): exit \(result.status)")
                        for mention in mentions {
                            #expect(result.stderr.contains(mention), "\(label): \(result.stderr)")
                        }
                    }
                    checked += 1
                }
            }
        }
        #expect(checked >= 240)
    }
}
