import FoundationEssentials
import OStackTestSupport
import Testing

/// Issue 17 (in part): `--jq`, `--template` and `--data @-` (docs/output.md, "Filtering").
@Suite struct PowerToolsEndToEndTests {
    @Test func jqAndTemplateFilterTheJSONDocument() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        try #require(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        _ = try server.control("POST", "seed", #"{"object":"task","count":5}"#)

        let titles = try ostack.run(["records", "list", "task", "--jq", ".records[].title"])
        #expect(titles.status == 0, "\(titles.stderr)")
        #expect(titles.stdout == "Seed 1\nSeed 2\nSeed 3\nSeed 4\nSeed 5\n", "\(titles.stdout)")
        let count = try ostack.run(["records", "list", "task", "--all", "--jq", ".records | length"])
        #expect(count.stdout == "5\n")

        let template = #"{{range .records}}{{.title}} ({{if .done}}done{{else}}open{{end}}){{"\n"}}{{end}}"#
        let rendered = try ostack.run(["records", "list", "task", "--limit", "3", "--template", template])
        #expect(rendered.status == 0, "\(rendered.stderr)")
        #expect(rendered.stdout == "Seed 1 (open)\nSeed 2 (open)\nSeed 3 (done)\n", "\(rendered.stdout)")

        let badJQ = try ostack.run(["records", "list", "task", "--jq", ".records["])
        #expect(badJQ.status == 9 && badJQ.stderr.contains("ostack: hint: The --jq expression failed"))
        #expect(badJQ.stdout.isEmpty)
        let badTemplate = try ostack.run(["records", "list", "task", "--template", "{{range .records}}"])
        #expect(badTemplate.status == 64 && badTemplate.stderr.contains("missing {{end}}"))
        #expect(try ostack.run(["records", "list", "task", "--jq", ".", "--format", "csv"]).status == 64)
        let failed = try ostack.run(["records", "get", "task", "nope", "--jq", ".id"])
        #expect(failed.status == 7 && failed.stdout.isEmpty && failed.stderr.hasPrefix("ostack: error:"))

        // Server text through jq -r is sanitised on a terminal: no escape sequence reaches it.
        let hostile = try ostack.run(["records", "create", "task", "--set", "title=x\u{1B}]0;pwned\u{07}y", "--json"])
        #expect(hostile.status == 0)
        let file = #filePath
        let fixture = String(file[..<file.lastIndex(of: "/")!]) + "/Fixtures/pty_run.py"
        let shown = try runProcess(
            executable: "/usr/bin/python3",
            arguments: [
                fixture, "--cols", "80", "--", OStackBinary.path, "records", "list", "task", "--all", "--jq",
                ".records[].title",
            ],
            environment: ostack.baseEnvironment)
        #expect(
            shown.status == 0 && shown.stdout.contains("xy") && !shown.stdout.contains("\u{1B}]"), "\(shown.stdout)")
    }

    @Test func dataFromStandardInput() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        try #require(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        let one = try ostack.run(
            ["records", "create", "task", "--data", "@-", "--jq", ".record.title"],
            stdin: #"{"title":"From stdin","amount":3}"#)
        #expect(one.status == 0 && one.stdout == "From stdin\n", "\(one.stderr)")
        let many = try ostack.run(
            ["records", "create", "task", "--data", "@-", "--json"], stdin: #"[{"title":"A"},{"title":"B"}]"#)
        #expect(many.status == 0 && many.stdout.contains("\"records\":["), "\(many.stderr)")
        let empty = try ostack.run(["records", "create", "task", "--data", "@-"], stdin: "")
        #expect(empty.status == 9)
    }

    /// `ostack api`: GET, POST, PATCH and DELETE with the account's credentials, `--paginate` over
    /// 1 000 records, another origin refused, the credential never printed.
    @Test func apiSendsAuthenticatedRequests() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        try #require(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        _ = try server.control("POST", "seed", #"{"object":"task","count":1000}"#)

        let listed = try ostack.run(["api", "/data/task?top=2", "--jq", ".records | length"])
        #expect(listed.status == 0 && listed.stdout == "2\n", "\(listed.stderr)")
        let created = try ostack.run([
            "api", "POST", "/data/task", "-f", "title=Via api", "-F", "amount=5", "--jq", ".record.id",
        ])
        #expect(created.status == 0, "\(created.stderr)")
        let id = created.stdout.trimmingCharacters(in: .newlines)
        #expect(!id.isEmpty)
        let patched = try ostack.run([
            "api", "PATCH", "/api/v1/data/task/\(id)", "-f", "title=Patched", "--jq", ".record.title",
        ])
        #expect(patched.status == 0 && patched.stdout == "Patched\n", "\(patched.stdout) \(patched.stderr)")
        let body = try ostack.run(
            ["api", "PATCH", "/data/task/\(id)", "--input", "-", "--jq", ".record.amount"], stdin: #"{"amount":7}"#)
        #expect(body.status == 0 && body.stdout == "7\n", "\(body.stdout) \(body.stderr)")
        let fetched = try ostack.run(["api", "\(server.url)/api/v1/data/task/\(id)", "--jq", ".record.title"])
        #expect(fetched.stdout == "Patched\n", "a full URL on the account's own server: \(fetched.stderr)")
        #expect(try ostack.run(["api", "DELETE", "/data/task/\(id)"]).status == 0)
        let gone = try ostack.run(["api", "/data/task/\(id)"])
        #expect(gone.status == 7 && gone.stderr.hasPrefix("ostack: error:"))

        let all = try ostack.run(["api", "/data/task", "--paginate", "--jq", ".records | length"])
        #expect(all.status == 0 && all.stdout == "1000\n", "\(all.stdout) \(all.stderr)")

        let elsewhere = try ostack.run(["api", "http://127.0.0.1:1/api/v1/data/task"])
        #expect(elsewhere.status == 9 && elsewhere.stderr.contains("only to its own server"), "\(elsewhere.stderr)")
        let lookalike = try ostack.run(["api", "\(server.url)0/api/v1/data/task"])
        #expect(lookalike.status == 9)
        #expect(try ostack.run(["api", "/data/task", "-H", "Authorization: Bearer x"]).status == 9)
        #expect(try ostack.run(["api", "/data/../auth/get-session"]).status == 9)

        let verbose = try ostack.run(["api", "/data/task?top=1", "--verbose"])
        #expect(verbose.stderr.contains("> Authorization: (the account's credential, not shown)"))
        #expect(!verbose.stderr.lowercased().contains("bearer"), "\(verbose.stderr)")
    }
}
