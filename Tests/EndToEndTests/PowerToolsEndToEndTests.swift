import FoundationEssentials
import Glibc
import OStackTestSupport
import PlatformKit
import Testing

/// Issue 17 (in part): `--jq`, `--template` and `--data @-` (docs/output.md, "Filtering").
@Suite struct PowerToolsEndToEndTests {
    @Test func jqAndTemplateFilterTheJSONDocument() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        try #require(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        _ = try server.control("POST", "seed", #"{"object":"task","count":5}"#)

        // In title order: without --sort a list is in id order, and seeded ids are random.
        let titles = try ostack.run(["records", "list", "task", "--sort", "title", "--jq", ".records[].title"])
        #expect(titles.status == 0, "\(titles.stderr)")
        #expect(titles.stdout == "Seed 1\nSeed 2\nSeed 3\nSeed 4\nSeed 5\n", "\(titles.stdout)")
        let count = try ostack.run(["records", "list", "task", "--all", "--jq", ".records | length"])
        #expect(count.stdout == "5\n")
        let negated = try ostack.run(
            ["records", "list", "task", "--sort", "title", "--limit", "1", "--jq", "-.records[0].amount"])
        #expect(negated.stdout == "-1\n", "an expression starting with - is not an option: \(negated.stderr)")

        let template = #"{{range .records}}{{.title}} ({{if .done}}done{{else}}open{{end}}){{"\n"}}{{end}}"#
        let rendered = try ostack.run(
            ["records", "list", "task", "--sort", "title", "--limit", "3", "--template", template])
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
        // A line break in a value is named as such (it was "ostack sets the credentials and the framing").
        let split = try ostack.run(["api", "/data/task", "-H", "X-Trace: a\r\nX-Other: b"])
        #expect(split.status == 9 && split.stderr.contains("cannot contain a line break"), "\(split.stderr)")
        #expect(try ostack.run(["api", "/data/../auth/get-session"]).status == 9)
        // The sign-in routes answer with credentials: not through ostack api.
        let session = try ostack.run(["api", "/auth/get-session"])
        #expect(session.status == 9 && session.stdout.isEmpty && session.stderr.contains("sign-in routes"))
        // Nor spelled so that the check and the server's router read it differently (the server
        // decodes escapes and empty segments): each of these once printed the session token.
        for spelling in [
            "/%61uth/get-session", "/auth%2Fget-session", "//auth/get-session", "/AUTH/get-session",
            "/data/%2e%2e/auth/get-session", "/data/%2E%2E/%61uth/get-session",
            "\(server.url)//api/v1/auth/get-session",
            "\(server.url)/api/v1//%61uth//get-session",
        ] {
            let other = try ostack.run(["api", spelling])
            #expect(other.status == 9 && other.stdout.isEmpty, "\(spelling): \(other.status) \(other.stdout)")
        }
        // Escapes of ordinary characters still reach the same data route.
        let escaped = try ostack.run(["api", "/%64ata/task?top=1", "--jq", ".records | length"])
        #expect(escaped.status == 0 && escaped.stdout == "1\n", "\(escaped.stdout) \(escaped.stderr)")
        let linkInQuery = try ostack.run(["api", #"/data/task?top=1&filter=["title","=","https://elsewhere.example"]"#])
        #expect(linkInQuery.status == 0, "\(linkInQuery.stderr)")
        #expect(try ostack.run(["api", "/data/task?top=0", "--paginate"]).status == 9)

        let verbose = try ostack.run(["api", "/data/task?top=1", "--verbose"])
        #expect(verbose.stderr.contains("> Authorization: (the account's credential, not shown)"))
        #expect(!verbose.stderr.lowercased().contains("bearer"), "\(verbose.stderr)")
    }

    /// Export → import of 10 000 records into a second account gives the same records; running the
    /// import again adds nothing; 3 bad rows are reported by line and block the import unless
    /// `--skip-invalid`; `--dry-run` queues nothing.
    @Test func exportAndImportRoundTrip() throws {
        // The second account is on another server, as when data moves between deployments (on one
        // server the ids would already be taken).
        let server = try DevServerProcess()
        let other = try DevServerProcess()
        let ostack = OStackRunner()
        try #require(
            try ostack.login(server.url, "alice@example.com", "alice-pass", extra: ["--alias", "one"]).status == 0)
        try #require(
            try ostack.login(other.url, "alice@example.com", "alice-pass", extra: ["--alias", "two"]).status == 0)
        _ = try server.control("POST", "seed", #"{"object":"task","count":10000}"#)
        let scratch = TemporaryDirectory()
        let file = scratch.appending("tasks.csv")

        let exported = try ostack.run(["records", "export", "task", "--account", "one", "--output", file])
        #expect(exported.status == 0 && exported.stderr.contains("Exported 10000 task records"), "\(exported.stderr)")
        let twice = try ostack.run(["records", "export", "task", "--account", "one", "--output", file])
        #expect(twice.status == 9 && twice.stderr.contains("it exists. Nothing was overwritten."), "\(twice.stderr)")
        // Each reason said as it is (a missing directory was "it exists or the directory is not
        // writable"), and a format export does not write is a usage error, exit 64 (it was 9).
        let nowhere = try ostack.run(
            ["records", "export", "task", "--account", "one", "--output", scratch.appending("no/such/dir.csv")])
        #expect(
            nowhere.status == 9 && nowhere.stderr.contains("its directory does not exist."), "\(nowhere.stderr)")
        let tsv = try ostack.run(["records", "export", "task", "--account", "one", "--format", "tsv"])
        #expect(tsv.status == 64 && tsv.stderr.contains("csv, json or ndjson"), "\(tsv.status) \(tsv.stderr)")
        #expect(try ostack.run(["records", "export", "task", "--account", "one", "--jq", "."]).status == 9)
        let asJSON = try ostack.run(["records", "export", "task", "--account", "one", "--json", "--fields", "title"])
        #expect(asJSON.status == 0 && asJSON.stdout.hasPrefix("[{") && asJSON.stdout.hasSuffix("]\n"))
        let dry = try ostack.run(["records", "import", "task", file, "--account", "two", "--dry-run"])
        #expect(dry.status == 0 && dry.stdout.contains("10000 of 10000 rows would be imported"), "\(dry.stdout)")
        #expect(try ostack.run(["queue", "list", "--account", "two", "--json"]).stdout == #"{"entries":[]}"# + "\n")

        let imported = try ostack.run(["records", "import", "task", file, "--account", "two", "--json"])
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(
            imported.stdout.contains(#""queued":10000"#) && imported.stdout.contains(#""pushed":10000"#),
            "\(imported.stdout)")
        let fields = "title,status,priority,due_date,amount,done,notes,estimate"
        func contents(_ account: String) throws -> String {
            try ostack.run([
                "records", "export", "task", "--account", account, "--remote", "--fields", fields, "--format", "ndjson",
            ])
            .stdout.split(separator: "\n").sorted().joined(separator: "\n")
        }
        let mine = try contents("one")
        #expect(mine.split(separator: "\n").count == 10000)
        #expect(try contents("two") == mine, "the second account holds the same records")

        // From the mirror (written straight from the stored text) the same as from the server, also
        // for values CSV must quote or that JSON escapes, and numbers that are not whole.
        let awkward = [
            "Comma, inside", "Quote \"q\" inside", " leading space", "trailing ", "two\nlines", "tab\tx", "é 日本",
            "back\\slash", "a/b", "-5",
        ]
        for (index, title) in awkward.enumerated() {
            let created = try ostack.run([
                "records", "create", "task", "--account", "one", "--set", "title=\(title)", "--set",
                "amount=\(index == 0 ? "2.5" : "\(index * 7)")", "--set", "estimate=0",
            ])
            #expect(created.status == 0, "\(created.stderr)")
        }
        #expect(try ostack.run(["sync", "track", "task", "--account", "one"]).status == 0)
        #expect(try ostack.run(["sync", "--account", "one"]).status == 0)
        for format in ["csv", "ndjson", "csv --fields"] {
            func lines(_ source: String) throws -> [String] {
                let fields = format.hasSuffix("--fields") ? ["--fields", "title,amount"] : []
                let out = try ostack.run(
                    [
                        "records", "export", "task", "--account", "one", source, "--format",
                        String(format.prefix(while: { $0 != " " })),
                    ]
                        + fields)
                #expect(out.status == 0, "\(out.stderr)")
                return out.stdout.split(separator: format.hasPrefix("csv") ? "\r\n" : "\n").map(String.init)
            }
            let local = try lines("--local")
            let remote = try lines("--remote")
            #expect(local.count == 10_000 + awkward.count + (format.hasPrefix("csv") ? 1 : 0))
            if format.hasPrefix("csv") {
                #expect(local.first == remote.first, "the same header")
                #expect(local.sorted() == remote.sorted())
                if format.hasSuffix("--fields") { #expect(local.first == "id,title,amount") }
            } else {
                func id(_ line: String) -> String? {
                    line.firstRange(of: #""id":""#).map { String(line[$0.upperBound...].prefix { $0 != "\"" }) }
                }
                #expect(Set(local.compactMap(id)) == Set(remote.compactMap(id)))
                #expect(
                    Set(local.compactMap(id)).count == 10_000 + awkward.count
                        && local.allSatisfy { $0.hasPrefix("{") && $0.hasSuffix("}") })
            }
        }

        let again = try ostack.run(["records", "import", "task", file, "--account", "two", "--json"])
        #expect(
            again.status == 0 && again.stdout.contains(#""queued":0"#) && again.stdout.contains(#""existing":10000"#))

        let bad = scratch.appending("bad.csv")
        let rows =
            ["title,amount,status"]
            + (1...20).map { n in
                [4, 9, 15].contains(n) ? "Row \(n),not-a-number,open" : "Row \(n),\(n),open"
            }
        try TemporaryDirectory.writeLines(rows, to: bad)
        let refused = try ostack.run(["records", "import", "task", bad, "--account", "one", "--key", "title"])
        #expect(refused.status == 9, "\(refused.stdout) \(refused.stderr)")
        #expect(
            refused.stdout.contains("line 5: Amount must be a number")
                && refused.stdout.contains("line 10: Amount must be a number")
                && refused.stdout.contains("line 16: Amount must be a number"), "\(refused.stdout)")
        #expect(refused.stderr.contains("Nothing was queued"))
        #expect(try ostack.run(["queue", "list", "--account", "one", "--json"]).stdout == #"{"entries":[]}"# + "\n")
        let skipped = try ostack.run([
            "records", "import", "task", bad, "--account", "one", "--key", "title", "--skip-invalid", "--json",
        ])
        #expect(skipped.status == 0 && skipped.stdout.contains(#""queued":17"#), "\(skipped.stdout) \(skipped.stderr)")
        let rerun = try ostack.run([
            "records", "import", "task", bad, "--account", "one", "--key", "title", "--skip-invalid", "--json",
        ])
        #expect(rerun.stdout.contains(#""queued":0"#) && rerun.stdout.contains(#""existing":17"#), "\(rerun.stdout)")
    }

    /// An export that stops half-way (here a page the server fails) leaves no file under the name
    /// asked for — a truncated CSV reads as a whole one and could be imported as the full set — and
    /// nothing beside it; the same command then writes the file whole. A CSV in another encoding
    /// (Latin-1) is refused with its line, never imported with U+FFFD in place of its letters.
    @Test func anExportThatStopsLeavesNoFileAndANonUTF8ImportIsRefused() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        try #require(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        _ = try server.control("POST", "seed", #"{"object":"task","count":3000}"#)
        let scratch = TemporaryDirectory()
        let file = scratch.appending("tasks.csv")
        _ = try server.control(
            "POST", "faults",
            #"{"action":"status","status":404,"body":{"error":"gone"},"skip":1,"count":1000,"match":{"method":"GET","pathPrefix":"/api/v1/data/task"}}"#
        )
        let stopped = try ostack.run(["records", "export", "task", "--remote", "--output", file])
        #expect(stopped.status != 0, "\(stopped.stderr)")
        #expect(try SecureFileSystem.contentsOfDirectory(scratch.path).isEmpty)
        _ = try server.control("DELETE", "faults")
        // Ctrl-C while the second page is slow to come: exit 130, and the partial file is gone too
        // (for `export-database --plaintext` that file would be a readable copy of the data).
        _ = try server.control(
            "POST", "faults",
            #"{"action":"delay","delayMs":4000,"skip":1,"count":1,"match":{"method":"GET","pathPrefix":"/api/v1/data/task"}}"#
        )
        let interrupted = try ostack.start(["records", "export", "task", "--remote", "--output", file])
        var partialSeen = false
        for _ in 0..<3000 where !partialSeen {  // up to 30 s on a busy machine
            partialSeen = try SecureFileSystem.contentsOfDirectory(scratch.path).contains { $0.contains(".partial-") }
            usleep(10_000)
        }
        #expect(partialSeen)
        usleep(300_000)
        kill(interrupted.pid, SIGINT)
        #expect(try interrupted.waitForExit(timeout: 30) == 130)
        #expect(try SecureFileSystem.contentsOfDirectory(scratch.path).isEmpty)
        _ = try server.control("DELETE", "faults")
        let whole = try ostack.run(["records", "export", "task", "--remote", "--output", file])
        #expect(whole.status == 0 && whole.stderr.contains("Exported 3000 task records"), "\(whole.stderr)")
        #expect(try SecureFileSystem.contentsOfDirectory(scratch.path) == ["tasks.csv"])
        #expect(SecureFileSystem.mode(of: file) == 0o600)
        let lines = try #require(try SecureFileSystem.readFile(file)).split(separator: 10)
        #expect(lines.count == 3001)
        // The name is never taken over: a file that exists stays as it was.
        #expect(try ostack.run(["records", "export", "task", "--remote", "--output", file]).status == 9)
        #expect(try SecureFileSystem.readFile(file)?.split(separator: 10).count == 3001)

        let latin1 = scratch.appending("latin1.csv")
        try SecureFileSystem.writeAtomically(
            Array("title,amount,status\nCafe,1,open\n".utf8) + Array("Caf".utf8) + [0xE9] + Array(",2,open\n".utf8),
            to: latin1)
        let refused = try ostack.run(["records", "import", "task", latin1, "--key", "title"])
        #expect(refused.status == 9, "\(refused.stdout) \(refused.stderr)")
        #expect(refused.stderr.contains("Line 3 is not UTF-8"), "\(refused.stderr)")
        #expect(try ostack.run(["queue", "list", "--json"]).stdout == #"{"entries":[]}"# + "\n")
    }

    /// An import queues each batch while the push sends the one before (`PushFeed`). A push that
    /// stops part-way leaves every row queued, and one `sync` then delivers each exactly once; an
    /// import killed while a batch is in flight, run again, also leaves exactly one copy of each row.
    @Test func anImportStoppedPartWayLosesAndDuplicatesNothing() throws {
        let scratch = TemporaryDirectory()
        let file = scratch.appending("rows.csv")
        let lines = ["title,amount,status"] + (1...1000).map { "Row \($0),\($0 % 50),open" }
        try TemporaryDirectory.writeLines(lines, to: file)
        func count(_ server: DevServerProcess) throws -> String? {
            let body = try server.control("GET", "record?object=task&id=")
            return body.firstRange(of: #""count":"#).map { String(body[$0.upperBound...].prefix { $0.isNumber }) }
        }

        // The third batch and every request after it are dropped before the server runs them.
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        try #require(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        try server.control(
            "POST", "faults",
            #"{"action":"drop-before","skip":2,"count":100000,"match":{"method":"POST","pathPrefix":"/api/v1/data/task"}}"#
        )
        let stopped = try ostack.run(["records", "import", "task", file, "--key", "title", "--json"])
        #expect(stopped.status == 0 && stopped.stderr.contains("saved and queued"), "\(stopped.stderr)")
        #expect(
            stopped.stdout.contains(#""queued":1000"#) && stopped.stdout.contains(#""pushed":400"#), "\(stopped.stdout)"
        )
        #expect(try count(server) == "400")
        let pending = try ostack.run(["queue", "list", "--json"]).stdout
        #expect(pending.components(separatedBy: #""operation":"create""#).count - 1 == 600)
        try server.control("DELETE", "faults")
        let sync = try ostack.run(["sync", "--json"])
        #expect(sync.status == 0 && sync.stdout.contains(#""pushed":600"#), "\(sync.stdout) \(sync.stderr)")
        #expect(try count(server) == "1000")

        // Killed (-9) with a batch in flight and the next one just queued: the run again queues the
        // rest and finds out whether the batch in flight arrived before sending it again.
        let other = try DevServerProcess()
        let second = OStackRunner()
        try #require(try second.login(other.url, "alice@example.com", "alice-pass").status == 0)
        let killed = try second.run(
            ["records", "import", "task", file, "--key", "title"],
            environment: ["OSTACK_FAILPOINT": "push-feed.request-in-flight"])
        #expect(killed.status == 137, "\(killed.stderr)")
        let again = try second.run(["records", "import", "task", file, "--key", "title", "--json"])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.contains(#""existing":400"#) && again.stdout.contains(#""queued":600"#), "\(again.stdout)")
        #expect(try count(other) == "1000")
        #expect(try second.run(["queue", "list", "--json"]).stdout == #"{"entries":[]}"# + "\n")

        // Rows from stdin could not be read again: all are queued before the push starts (no
        // request is ever in flight while rows wait to be queued, so the fail point is never hit).
        let piped = try second.run(
            ["records", "import", "task", "-", "--format", "csv", "--key", "title"],
            stdin: (["title,amount,status"] + (1...500).map { "Piped \($0),1,open" }).joined(separator: "\n") + "\n",
            environment: ["OSTACK_FAILPOINT": "push-feed.request-in-flight"])
        #expect(piped.status == 0, "\(piped.stdout) \(piped.stderr)")
        #expect(try count(other) == "1500")
        #expect(try second.run(["queue", "list", "--json"]).stdout == #"{"entries":[]}"# + "\n")
    }

    /// With a server that takes one record per request, an import of 1 200 rows is 1 200 push
    /// rounds of one queued batch each: all are pushed (the push's round bound counts only rounds
    /// in which nothing more was queued).
    @Test func anImportLongerThanThePushRoundBoundIsPushedWhole() throws {
        let server = try DevServerProcess(arguments: ["--batch-cap", "1"])
        let ostack = OStackRunner()
        try #require(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        // A first push of two creates learns the cap (the server refuses the batch of two).
        for title in ["First", "Second"] {
            #expect(try ostack.run(["records", "create", "task", "--set", "title=\(title)", "--offline"]).status == 0)
        }
        #expect(try ostack.run(["sync"]).status == 0)
        let scratch = TemporaryDirectory()
        let file = scratch.appending("rows.csv")
        let lines = ["title,amount,status"] + (1...1200).map { "Row \($0),\($0 % 50),open" }
        try TemporaryDirectory.writeLines(lines, to: file)
        let imported = try ostack.run(["records", "import", "task", file, "--key", "title", "--json"], timeout: 300)
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(
            imported.stdout.contains(#""queued":1200"#) && imported.stdout.contains(#""pushed":1200"#),
            "\(imported.stdout)")
        #expect(try ostack.run(["queue", "list", "--json"]).stdout == #"{"entries":[]}"# + "\n")
    }

    /// A dev server, a signed-in account and a directory for the test's files.
    func signedInWithScratch() throws -> (DevServerProcess, OStackRunner, TemporaryDirectory) {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        try #require(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        return (server, ostack, TemporaryDirectory())
    }

    /// A CSV quote that is never closed swallowed every line after it into one cell, and the import
    /// succeeded with one row; text after a closing quote was glued on. Both are refused, naming the
    /// line, and nothing is queued.
    @Test func aMalformedCSVIsRefusedNamingTheLine() throws {
        let (server, ostack, scratch) = try signedInWithScratch()
        defer { withExtendedLifetime(server) {} }  // the server lives as long as the test
        let open = scratch.appending("open.csv")
        try TemporaryDirectory.writeLines(["id,title", "z4,\"oops", "z5,second", "z6,third"], to: open)
        let unclosed = try ostack.run(["records", "import", "task", open])
        #expect(unclosed.status == 9, "\(unclosed.stdout) \(unclosed.stderr)")
        #expect(unclosed.stderr.contains("Line 2: a quoted cell is not closed"), "\(unclosed.stderr)")
        let glued = scratch.appending("glued.csv")
        try TemporaryDirectory.writeLines(["id,title", "z6,\"a\"b"], to: glued)
        let after = try ostack.run(["records", "import", "task", glued])
        #expect(after.status == 9 && after.stderr.contains("Line 2: text after the closing quote"), "\(after.stderr)")
        #expect(try ostack.run(["queue", "list", "--json"]).stdout == #"{"entries":[]}"# + "\n")
        // A quoted cell with commas, quotes and a line break still reads as one value.
        let fine = scratch.appending("fine.csv")
        try TemporaryDirectory.writeLines(["id,title", "z7,\"a, \"\"b\"\"", "c\""], to: fine)
        #expect(try ostack.run(["records", "import", "task", fine, "--offline"]).status == 0)
        let record = try ostack.run(["records", "get", "task", "z7", "--local", "--json"]).stdout
        #expect(record.contains(#""title":"a, \"b\"\nc""#), "\(record)")
        // An export of an untracked object's mirror says what it holds, as `records list` does.
        let export = try ostack.run(["records", "export", "task", "--local", "--format", "csv"])
        #expect(export.status == 0 && export.stderr.contains("task is not tracked"), "\(export.stderr)")
    }

    /// A CSV header is checked once, before any row: an unknown or repeated column used to be
    /// reported on every row as "not a valid value" (or, repeated, one of its cells was dropped and
    /// the import succeeded), and an unknown `--key` once per row as "no value for the key field".
    /// A column without a name is fine while its cells are empty; a bad value says why.
    @Test func anImportChecksItsHeaderAndKeyOnce() throws {
        let (server, ostack, scratch) = try signedInWithScratch()
        defer { withExtendedLifetime(server) {} }
        func importing(_ lines: [String], _ extra: [String] = []) throws -> ProcessResult {
            let file = scratch.appending("rows-\(UInt32.random(in: 0...UInt32.max)).csv")
            try TemporaryDirectory.writeLines(lines, to: file)
            return try ostack.run(["records", "import", "task", file, "--offline"] + extra)
        }
        let unknown = try importing(["titel,status"] + (1...30).map { "x\($0),open" })
        #expect(unknown.status == 9, "\(unknown.stdout) \(unknown.stderr)")
        #expect(unknown.stdout.isEmpty, "\(unknown.stdout)")
        #expect(
            unknown.stderr.contains("Line 1: 'titel' is not a field of Task. Did you mean 'title'?"),
            "\(unknown.stderr)")
        let twice = try importing(["title,title", "x,y"], ["--key", "title"])
        #expect(
            twice.status == 9 && twice.stderr.contains("Line 1: the column 'title' appears twice."), "\(twice.stderr)")
        let key = try importing(["title", "x", "y"], ["--key", "nosuch"])
        #expect(key.status == 9 && key.stdout.isEmpty, "\(key.stdout) \(key.stderr)")
        #expect(key.stderr.contains("--key: 'nosuch' is not a field of Task."), "\(key.stderr)")
        let unnamed = try importing(["title,", "x,", "y,z"], ["--key", "title"])
        #expect(unnamed.status == 9, "\(unnamed.stderr)")
        #expect(unnamed.stderr.contains("Line 3: column 2 has a value but no name"), "\(unnamed.stderr)")
        let value = try importing(["title,amount", "x,abc"], ["--key", "title"])
        #expect(value.status == 9 && value.stdout.contains("line 2: Amount must be a number"), "\(value.stdout)")
        #expect(try ostack.run(["queue", "list", "--json"]).stdout == #"{"entries":[]}"# + "\n")
        // A key field's `""` is no key value; blank lines before the header are skipped.
        let emptyKey = try importing(["title,notes", #""",x"#], ["--key", "title"])
        #expect(
            emptyKey.status == 9 && emptyKey.stdout.contains("no value for the key field title"), "\(emptyKey.stdout)")
        let blankFirst = try importing(["", "title", "Blank first"], ["--key", "title"])
        #expect(blankFirst.status == 0, "\(blankFirst.stderr)")
        // A trailing empty column (a spreadsheet's) imports.
        // A quoted empty cell is an empty text; an empty cell is null.
        let trailing = try importing(["title,amount,notes,owner,", #"x,1,"",,"#], ["--key", "title"])
        #expect(trailing.status == 0, "\(trailing.stderr)")
        let stored = try ostack.run(["records", "list", "task", "--local", "--json"]).stdout
        #expect(stored.contains(#""notes":"""#) && !stored.contains(#""owner""#), "\(stored)")
    }

    /// An unknown field in `--sort` or `--fields` names the option; it said "The filter is not
    /// valid" (`invalid-filter`) with no filter given. A filter's own unknown field still does.
    @Test func unknownSortAndFieldsNameTheirOption() throws {
        let (server, ostack, _) = try signedInWithScratch()
        defer { withExtendedLifetime(server) {} }
        let sort = try ostack.run(["records", "list", "task", "--sort", "-titel", "--json"])
        #expect(sort.status == 9, "\(sort.stderr)")
        #expect(sort.stderr.contains(#""code":"invalid-input""#), "\(sort.stderr)")
        #expect(sort.stderr.contains("--sort: Unknown field 'titel'. Did you mean 'title'?"), "\(sort.stderr)")
        let fields = try ostack.run(["records", "export", "task", "--fields", "title,nosuch"])
        #expect(fields.status == 9 && fields.stderr.contains("--fields: Unknown field 'nosuch'."), "\(fields.stderr)")
        #expect(!fields.stderr.contains("filter"), "\(fields.stderr)")
        let filter = try ostack.run(["records", "list", "task", "--filter", "nosuch = 1"])
        #expect(filter.status == 9 && filter.stderr.contains("The filter is not valid."), "\(filter.stderr)")
    }

    /// `records import`'s `--format` is the file's: what it prints is chosen by `--json`, `--jq` and
    /// `--template` alone. An NDJSON file from stdin printed a JSON report, and a CSV from stdin
    /// could not have one (`--format csv --json` was refused as two output formats). Elsewhere the
    /// two still conflict, reported with the command's usage line.
    @Test func anImportsFormatIsItsInputs() throws {
        let (server, ostack, _) = try signedInWithScratch()
        defer { withExtendedLifetime(server) {} }
        let ndjson = try ostack.run(
            ["records", "import", "task", "-", "--format", "ndjson", "--key", "title"],
            stdin: #"{"title":"One"}"# + "\n")
        #expect(ndjson.status == 0 && ndjson.stdout == "Imported 1 task record (1 pushed).\n", "\(ndjson.stdout)")
        let csv = try ostack.run(
            ["records", "import", "task", "-", "--format", "csv", "--key", "title", "--json"], stdin: "title\nTwo\n")
        #expect(csv.status == 0 && csv.stdout.contains(#""queued":1"#), "\(csv.stdout) \(csv.stderr)")
        let jq = try ostack.run(
            ["records", "import", "task", "-", "--format", "csv", "--key", "title", "--jq", ".pushed"],
            stdin: "title\nThree\n")
        #expect(jq.status == 0 && jq.stdout == "1\n", "\(jq.stdout) \(jq.stderr)")
        // A usage error of an import is plain text: its `--format json` names the file's format.
        let usage = try ostack.run(["records", "import", "task", "-", "--format", "json", "--bogus"], stdin: "[]")
        #expect(usage.status == 64 && usage.stderr.hasPrefix("ostack: error:"), "\(usage.stderr)")
        let list = try ostack.run(["records", "list", "task", "--format", "csv", "--json"])
        #expect(list.status == 64 && list.stderr.contains("Pass --json or --format csv, not both."), "\(list.stderr)")
        let filtered = try ostack.run(["records", "list", "task", "--format", "tsv", "--jq", "."])
        #expect(filtered.status == 64, "\(filtered.stderr)")
        #expect(
            filtered.stderr.contains("ostack: usage: ostack records list [<options>] <object>"), "\(filtered.stderr)")
        let export = try ostack.run(["records", "export", "task", "--format", "csv", "--json"])
        #expect(export.status == 64 && export.stdout.isEmpty, "\(export.stdout) \(export.stderr)")
    }

    /// A JSON import that is not JSON (here a number no double holds) said "A JSON import is one
    /// array of objects"; it now names the line. An NDJSON line that is not JSON says so.
    @Test func aJSONImportSaysWhereItIsNotJSON() throws {
        let (server, ostack, scratch) = try signedInWithScratch()
        defer { withExtendedLifetime(server) {} }
        let array = scratch.appending("rows.json")
        try TemporaryDirectory.writeLines(["[", #"{"title":"a"},"#, #"{"title":"b","amount":1e400}"#, "]"], to: array)
        let json = try ostack.run(["records", "import", "task", array, "--key", "title"])
        #expect(json.status == 9 && json.stderr.contains("Line 3: the file is not valid JSON"), "\(json.stderr)")
        let object = scratch.appending("one.json")
        try TemporaryDirectory.writeLines([#"{"title":"a"}"#], to: object)
        let single = try ostack.run(["records", "import", "task", object, "--key", "title"])
        #expect(single.status == 9 && single.stderr.contains("use --format ndjson"), "\(single.stderr)")
        let lines = scratch.appending("rows.ndjson")
        try TemporaryDirectory.writeLines([#"{"title":"a"}"#, #"{"title":1e400}"#, "[1]"], to: lines)
        let ndjson = try ostack.run(["records", "import", "task", lines, "--key", "title"])
        #expect(ndjson.status == 9, "\(ndjson.stderr)")
        #expect(ndjson.stdout.contains("line 2: not valid JSON\nline 3: not a JSON object"), "\(ndjson.stdout)")
        #expect(try ostack.run(["queue", "list", "--json"]).stdout == #"{"entries":[]}"# + "\n")
    }

    /// Running a failed import again sends the rows its push failed to deliver: they were skipped as
    /// "already here" and stayed failed while the re-run said it succeeded.
    @Test func runningAFailedImportAgainSendsItsRows() throws {
        let (server, ostack, scratch) = try signedInWithScratch()
        let file = scratch.appending("rows.csv")
        try TemporaryDirectory.writeLines(["title,amount", "First,1", "Second,2"], to: file)
        try server.control(
            "POST", "faults",
            #"{"action":"status","status":500,"count":50,"match":{"method":"POST","pathPrefix":"/api/v1/data"}}"#)
        #expect(try ostack.run(["records", "import", "task", file, "--key", "title"]).status == 11)
        try server.control("DELETE", "faults")
        let again = try ostack.run(["records", "import", "task", file, "--key", "title"])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.contains("2 already here, 2 of them sent again"), "\(again.stdout)")
        let body = try server.control("GET", "record?object=task&id=")
        #expect(body.contains("\"count\":2"), "\(body)")
        #expect(try ostack.run(["queue", "list", "--json"]).stdout == #"{"entries":[]}"# + "\n")
    }

    /// `pushed` counts the rows the server took: rows it refuses stay queued as failed and are not
    /// counted (the count used to be the fall in pending entries, which a failure also makes).
    @Test func anImportCountsOnlyTheRowsTheServerTook() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        try #require(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        let scratch = TemporaryDirectory()
        let file = scratch.appending("rows.csv")
        let lines = ["title,amount,status"] + (1...30).map { "Refused \($0),1,open" }
        try TemporaryDirectory.writeLines(lines, to: file)
        try server.control(
            "POST", "faults",
            #"{"action":"status","status":400,"count":100000,"match":{"method":"POST","pathPrefix":"/api/v1/data/task"},"body":{"error":"no","code":"VALIDATION_FAILED","fields":[{"field":"title","message":"no"}]}}"#
        )
        let refused = try ostack.run(["records", "import", "task", file, "--key", "title", "--json"])
        #expect(
            refused.stdout.contains(#""queued":30"#) && refused.stdout.contains(#""pushed":0"#), "\(refused.stdout)")
        // Refused rows are the user's to fix: exit 9 `refused`, saved and queued (not exit 11, "the
        // server had a problem").
        #expect(refused.status == 9 && refused.stderr.contains(#""code":"refused""#), "\(refused.stderr)")
        try server.control("DELETE", "faults")
        // Once the server takes them, a second file of new rows counts only its own.
        let more = scratch.appending("more.csv")
        let next = ["title,amount,status"] + (1...20).map { "Taken \($0),1,open" }
        try TemporaryDirectory.writeLines(next, to: more)
        let taken = try ostack.run(["records", "import", "task", more, "--key", "title", "--json"])
        #expect(taken.stdout.contains(#""queued":20"#) && taken.stdout.contains(#""pushed":20"#), "\(taken.stdout)")
        // Every row of it delivered: it succeeds; the 30 older refused changes are a warning (they
        // used to fail every later import with exit 11).
        #expect(taken.status == 0, "\(taken.stderr)")
        #expect(taken.stderr.contains(#""warning":{"code":"refused""#), "\(taken.stderr)")
        #expect(try ostack.run(["sync"]).status == 9)
    }

    /// A server that assigns its own ids (`--assign-ids`: tsk_1, tsk_2, …) names the first batch
    /// with ids that rows later in the file carry: those ids are not adopted while the rows wait to
    /// be queued (the answer stays unconfirmed, as when the id is taken here), so every row is still
    /// queued and one `sync` settles all of them; running the import again finds every row, also
    /// those now known under the server's id.
    @Test func anImportAgainstAServerThatAssignsIdsLosesAndDuplicatesNothing() throws {
        let server = try DevServerProcess(arguments: ["--assign-ids"])
        let ostack = OStackRunner()
        try #require(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        let scratch = TemporaryDirectory()
        let file = scratch.appending("rows.csv")
        let ids = (1...400).map { "imp_\($0)" } + (1...200).map { "tsk_\($0)" }
        let lines = ["id,title,amount,status"] + ids.enumerated().map { "\($1),Row \($0),\($0 % 50),open" }
        try TemporaryDirectory.writeLines(lines, to: file)
        func count() throws -> String? {
            let body = try server.control("GET", "record?object=task&id=")
            return body.firstRange(of: #""count":"#).map { String(body[$0.upperBound...].prefix { $0.isNumber }) }
        }
        let imported = try ostack.run(["records", "import", "task", file, "--json"])
        #expect(imported.stdout.contains(#""queued":600"#), "\(imported.stdout) \(imported.stderr)")
        #expect(try count() == "600")
        // The unconfirmed ones wait for their retry time; made due, they are found on the server.
        #expect(try ostack.run(["queue", "retry"]).status == 0)
        #expect(try ostack.run(["sync"]).status == 0)
        #expect(try count() == "600")
        #expect(try ostack.run(["queue", "list", "--json"]).stdout == #"{"entries":[]}"# + "\n")
        // Each row is found under the id it was imported with except where a server id took that
        // name: the server's tsk_1 is the first row's record (the row imported as tsk_1 is tsk_401).
        for (index, id) in [
            (0, "imp_1"), (199, "imp_200"), (250, "imp_251"), (0, "tsk_1"), (199, "tsk_200"), (400, "tsk_401"),
            (599, "tsk_600"),
        ] {
            let got = try ostack.run(["records", "get", "task", "--json", "--", id])
            #expect(got.status == 0 && got.stdout.contains(#""title":"Row \#(index)""#), "\(id): \(got.stdout)")
        }
        let first = try ostack.run(["records", "get", "task", "tsk_1", "--remote", "--json"])
        #expect(first.stdout.contains(#""title":"Row 0""#), "the server's tsk_1 is the first row: \(first.stdout)")
        let again = try ostack.run(["records", "import", "task", file, "--json"])
        #expect(again.stdout.contains(#""existing":600"#) && again.stdout.contains(#""queued":0"#), "\(again.stdout)")
        #expect(try count() == "600")
    }
}
