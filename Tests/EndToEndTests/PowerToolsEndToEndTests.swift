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
}
