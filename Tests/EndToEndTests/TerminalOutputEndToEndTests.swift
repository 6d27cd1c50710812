import Glibc
import PlatformKit
import OStackTestSupport
import Testing

/// Issue 16: output that fits the terminal, a default limit with a "Showing" line, a pager only for
/// a person at a terminal, clean tab-separated values in a pipe, and usage errors in ostack's own
/// style (docs/output.md). Terminal cases run on a pseudo-terminal (`Fixtures/pty_run.py`).
@Suite struct TerminalOutputEndToEndTests {
    static let fixture: String = {
        let file = #filePath
        return String(file[..<file.lastIndex(of: "/")!]) + "/Fixtures/pty_run.py"
    }()

    /// `ostack` on a pseudo-terminal of `columns` × 24 (COLUMNS unset, so the terminal's width counts).
    static func atTerminal(
        _ ostack: OStackRunner, columns: Int = 80, environment: [String: String] = [:], _ arguments: [String]
    ) throws -> ProcessResult {
        var env = ostack.baseEnvironment
        env["COLUMNS"] = nil
        env["LINES"] = nil
        for (key, value) in environment { env[key] = value }
        return try runProcess(
            executable: "/usr/bin/python3",
            arguments: [fixture, "--cols", String(columns), "--", OStackBinary.path] + arguments, environment: env)
    }

    /// The acceptance case: 50 000 records on an 80-column terminal show 30 rows that fit and a
    /// "Showing" line; the same command in a pipe gives tab-separated values without padding.
    @Test func fiftyThousandRecordsOnAnEightyColumnTerminal() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        try #require(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        _ = try server.control("POST", "seed", #"{"object":"task","count":50000}"#)

        let shown = try Self.atTerminal(ostack, environment: ["OSTACK_PAGER": "cat"], ["records", "list", "task"])
        #expect(shown.status == 0, "\(shown.stdout)")
        let lines = shown.stdout.split(separator: "\r\n").map(String.init)
        let header = try #require(lines.firstIndex { $0.hasPrefix("ID ") })
        let rows = lines[(header + 1)...].filter { !$0.hasPrefix("Showing") }
        #expect(rows.count == 30, "\(shown.stdout)")
        for line in lines { #expect(line.count <= 80, "\(line)") }
        #expect(lines[header].contains("TITLE") && lines[header].hasSuffix("UPDATED_AT"))
        // Metadata order: title, status, priority before the other fields.
        let title = try #require(lines[header].firstRange(of: "TITLE")).lowerBound
        let status = try #require(lines[header].firstRange(of: "STATUS")).lowerBound
        #expect(title < status)
        #expect(rows.contains { $0.contains("…") }, "a cut cell ends in …")
        #expect(shown.stdout.contains("Showing 30 of 50000 — use --limit or --all."))

        let piped = try ostack.run(["records", "list", "task"])
        #expect(piped.status == 0)
        let tsv = piped.stdout.split(separator: "\n")
        #expect(tsv.count == 31)  // a header line, then 30 rows
        #expect(tsv[0].hasPrefix("id\ttitle\tstatus"))
        #expect(tsv.allSatisfy { !$0.contains("  ") && !$0.contains("…") && $0.split(separator: "\t").count >= 3 })
        #expect(piped.stderr.contains("Showing 30 of 50000"))
        // After an offset, the rows by position among all that match (it said "Showing 5 of 49990",
        // counting what followed the offset).
        let page = try ostack.run(["records", "list", "task", "--offset", "10", "--limit", "5"])
        #expect(page.stderr.contains("Showing 11–15 of 50000 — use --offset, --limit or --all."), "\(page.stderr)")
        let tail = try ostack.run(["records", "list", "task", "--offset", "49998", "--limit", "5"])
        #expect(tail.stdout.split(separator: "\n").count == 3 && !tail.stderr.contains("Showing"), "\(tail.stderr)")

        let csv = try ostack.run(["records", "list", "task", "--limit", "2", "--format", "csv"])
        #expect(csv.stdout.hasPrefix("id,title,status,") && csv.stdout.split(separator: "\r\n").count == 3)
        let all = try ostack.run(["records", "list", "task", "--all", "--fields", "title", "--format", "tsv"])
        #expect(all.stdout.split(separator: "\n").count == 50_001)
        #expect(!all.stderr.contains("Showing"))
        #expect(try ostack.run(["records", "list", "task", "--all", "--limit", "5"]).status == 64)
    }

    /// A table on a terminal goes through the pager (`OSTACK_PAGER` > `PAGER`); piped output and
    /// `--json` never do, and `cat` or an empty pager means none.
    @Test func thePagerIsForATerminalOnly() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        try #require(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        _ = try server.control("POST", "seed", #"{"object":"task","count":40}"#)
        let marker = ["OSTACK_PAGER": "sed 's/^/paged: /'", "PAGER": "false"]

        let paged = try Self.atTerminal(ostack, environment: marker, ["records", "list", "task"])
        #expect(paged.status == 0)
        #expect(paged.stdout.contains("paged: ID "), "\(paged.stdout)")
        #expect(paged.stdout.split(separator: "\r\n").filter { $0.hasPrefix("paged: ") }.count == 31)
        let viaPAGER = try Self.atTerminal(
            ostack, environment: ["PAGER": "sed 's/^/pager: /'"], ["records", "list", "task", "--limit", "3"])
        #expect(viaPAGER.stdout.contains("pager: ID "), "\(viaPAGER.stdout)")
        let json = try Self.atTerminal(ostack, environment: marker, ["records", "list", "task", "--json"])
        #expect(json.stdout.contains("{\"object\":\"task\"") && !json.stdout.contains("paged:"))
        let none = try Self.atTerminal(ostack, environment: ["OSTACK_PAGER": ""], ["records", "list", "task"])
        #expect(none.stdout.contains("ID ") && !none.stdout.contains("paged:"))
        let piped = try ostack.run(["records", "list", "task"], environment: marker.mapValues { $0 })
        #expect(piped.status == 0 && !piped.stdout.contains("paged:") && piped.stdout.hasPrefix("id\t"))
        // A pager that is not there took the output with it, exit 0 (`sh: nosuch-pager: not found`):
        // printed without one, and a chosen pager is named. No `less` on PATH: printed, quietly.
        let missing = try Self.atTerminal(ostack, environment: ["OSTACK_PAGER": "nosuch-pager -R"], ["records", "list", "task"])
        #expect(missing.status == 0 && missing.stdout.contains("ID "), "\(missing.stdout)")
        #expect(missing.stdout.contains("the pager 'nosuch-pager -R' was not found; printing without one."))
        // A pager under `~`, as the shell expands it, is found (it was "not found").
        let home = TemporaryDirectory()
        try SecureFileSystem.createDirectory(home.appending("bin"))
        try SecureFileSystem.writeAtomically(Array("#!/bin/sh\nexec sed 's/^/home: /'\n".utf8), to: home.appending("bin/mypager"))
        chmod(home.appending("bin/mypager"), 0o700)
        let tilde = try Self.atTerminal(
            ostack, environment: ["OSTACK_PAGER": "~/bin/mypager", "HOME": home.path], ["records", "list", "task"])
        #expect(tilde.stdout.contains("home: ID ") && !tilde.stdout.contains("warning"), "\(tilde.stdout)")
        let noLess = try Self.atTerminal(
            ostack, environment: ["OSTACK_PAGER": "", "PATH": "/nonexistent"].filter { $0.key == "PATH" },
            ["records", "list", "task"])
        #expect(noLess.stdout.contains("ID ") && !noLess.stdout.contains("warning"), "\(noLess.stdout)")
        // A pager that quits at once ends the listing quietly.
        let quit = try Self.atTerminal(
            ostack, environment: ["OSTACK_PAGER": "true"], ["records", "list", "task", "--all"])
        #expect(quit.status == 0, "\(quit.stdout)")
    }

    /// Usage errors look like every other error, say what was meant, and follow `--json`.
    @Test func usageErrorsInOstacksOwnStyle() throws {
        let ostack = OStackRunner()
        let typo = try ostack.run(["recrods", "list"])
        #expect(typo.status == 64)
        #expect(typo.stderr.hasPrefix("ostack: error: 'recrods' is not an ostack command.\n"), "\(typo.stderr)")
        #expect(typo.stderr.contains("ostack: hint: Did you mean `ostack records`?"))
        let nested = try ostack.run(["sync", "stauts"])
        #expect(nested.stderr.contains("Did you mean `ostack sync status`?"), "\(nested.stderr)")
        let missing = try ostack.run(["records", "list"])
        #expect(missing.status == 64)
        #expect(missing.stderr.contains("ostack: error: Missing expected argument '<object>'."))
        #expect(missing.stderr.contains("ostack: usage: ostack records list"))
        #expect(!missing.stderr.contains("Error:"))
        // An id that starts with '-' (the server's ids may): the parser reads it as options, and
        // the hint says how to pass it (it said only "See `ostack records get --help`").
        let dashed = try ostack.run(["records", "get", "task", "-abc12"])
        #expect(dashed.status == 64)
        #expect(
            dashed.stderr.contains(
                "ostack: hint: An argument that starts with '-', such as the id '-abc12', goes after `--`"),
            "\(dashed.stderr)")
        #expect(dashed.stderr.contains("`ostack records get … -- -abc12`"), "\(dashed.stderr)")
        #expect(!(try ostack.run(["records", "get", "--", "task", "-abc12"])).stderr.contains("goes after"))
        let json = try ostack.run(["records", "lst", "--json"])
        #expect(json.status == 64)
        #expect(json.stderr.hasPrefix(#"{"error":{"code":"usage","hint":"Did you mean `ostack records list`?"#))
        #expect(json.stdout.isEmpty)
        let both = try ostack.run(["accounts", "list", "--json", "--format", "csv"])
        #expect(both.status == 64 && both.stderr.contains(#""code":"usage""#))
        let escape = try ostack.run(["records", "list", "task", "--\u{1B}]0;pwned\u{07}"])
        #expect(escape.status == 64 && !escape.stderr.contains("\u{1B}"), "\(escape.stderr)")
        // A secret ostack may not ask for: the hint names the flag that reads it from stdin (it said
        // "the *-stdin flag").
        let password = try ostack.run(["login", "--server", "http://127.0.0.1:9", "--email", "a@b.c", "--no-input"])
        #expect(password.stderr.contains("ostack: hint: Pass it on stdin with --password-stdin"), "\(password.stderr)")
        let help = try ostack.run(["records", "--help"])
        #expect(help.status == 0 && help.stdout.contains("USAGE: ostack records") && help.stderr.isEmpty)
        // `help` of something that is not a command is a usage error, not the root help and exit 0.
        let unknownHelp = try ostack.run(["help", "recrods"])
        #expect(unknownHelp.status == 64 && unknownHelp.stdout.isEmpty, "\(unknownHelp.stdout)")
        #expect(unknownHelp.stderr.contains("'recrods' is not an ostack command or help topic."))
        #expect(unknownHelp.stderr.contains("Did you mean `ostack help records`?"), "\(unknownHelp.stderr)")
        #expect(try ostack.run(["help", "records", "list"]).stdout.contains("USAGE: ostack records list"))
        #expect(try ostack.run(["help", "environment"]).stdout.contains("OSTACK_HOME"))
        // A negative limit is named as such (it was "Missing value for '--limit <limit>'"), an empty
        // record id is refused before anything is asked of the server (it was exit 11).
        let negative = try ostack.run(["records", "list", "task", "--limit", "-1"])
        #expect(
            negative.status == 64 && negative.stderr.contains("--limit must not be negative."), "\(negative.stderr)")
        let empty = try ostack.run(["records", "get", "task", ""])
        #expect(empty.status == 64 && empty.stderr.contains("The record id must not be empty."), "\(empty.stderr)")
    }

    /// `ostack` on a pseudo-terminal that answers `prompt` with each of `answers` in turn.
    static func answering(
        _ ostack: OStackRunner, _ prompt: String, _ answers: [String], _ arguments: [String]
    ) throws -> ProcessResult {
        try answering(ostack, answers.map { (prompt, $0) }, arguments)
    }

    /// `ostack` on a pseudo-terminal that answers each prompt in order.
    static func answering(
        _ ostack: OStackRunner, _ script: KeyValuePairs<String, String>, _ arguments: [String]
    ) throws -> ProcessResult {
        try answering(ostack, script.map { ($0.key, $0.value) }, arguments)
    }

    static func answering(
        _ ostack: OStackRunner, _ pairs: [(String, String)], _ arguments: [String]
    ) throws -> ProcessResult {
        let script = pairs.flatMap { ["--on", $0.0, "--type", $0.1] }
        return try runProcess(
            executable: "/usr/bin/python3", arguments: [fixture] + script + ["--", OStackBinary.path] + arguments,
            environment: ostack.baseEnvironment)
    }

    /// Unlock on demand: on a terminal a locked account asks for its PIN (no echo, naming the
    /// account) and the command goes on; a wrong PIN is asked again; `--no-input` and scripts keep
    /// exit 4; the recovery key has a no-echo prompt too.
    @Test func aLockedAccountAsksForItsPINOnATerminal() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        try #require(
            try ostack.login(server.url, "alice@example.com", "alice-pass", extra: ["--alias", "work"]).status == 0)
        let set = try ostack.run(
            ["pin", "set", "--pin-stdin", "--json"], stdin: "482913\n", environment: ["OSTACK_PIN_KDF": "interactive"])
        try #require(set.status == 0, "\(set.stderr)")
        let recovery = String(set.stdout.split(separator: "\"")[3])
        try #require(try ostack.run(["lock"]).status == 0)

        let scripted = try ostack.run(["records", "create", "task", "--set", "title=Script", "--offline"])
        #expect(scripted.status == 4, "\(scripted.stderr)")
        let noInput = try Self.answering(
            ostack, "PIN for", ["482913"], ["records", "list", "task", "--local", "--no-input"])
        #expect(noInput.status == 4 && !noInput.stdout.contains("PIN for"), "\(noInput.stdout)")

        let asked = try Self.answering(
            ostack, "PIN for work: ", ["000000", "482913"],
            ["records", "create", "task", "--set", "title=Typed", "--offline", "--json"])
        #expect(asked.status == 0, "\(asked.stdout)")
        #expect(asked.stdout.contains("Account work is locked. PIN for work: "))
        #expect(asked.stdout.contains("Wrong PIN."))
        #expect(!asked.stdout.contains("482913") && !asked.stdout.contains("000000"), "the PIN is not echoed")
        #expect(asked.stdout.contains(#""queued":true"#))
        let listed = try ostack.run(["records", "list", "task", "--local", "--json"])
        #expect(listed.status == 0 && listed.stdout.contains("Typed"), "unlocked for the next command too")

        // A locked account met by `sync`: asked for on a terminal, then one report, not two.
        try #require(try ostack.run(["lock"]).status == 0)
        let synced = try Self.answering(ostack, "PIN for work: ", ["482913"], ["sync", "--json"])
        #expect(synced.status == 0, "\(synced.stdout)")
        #expect(synced.stdout.ranges(of: #"{"accounts":"#).count == 1, "\(synced.stdout)")

        try #require(try ostack.run(["lock"]).status == 0)
        let withKey = try Self.answering(ostack, "Recovery key for work: ", [recovery], ["unlock", "--recovery-key"])
        #expect(withKey.status == 0, "\(withKey.stdout)")
        #expect(withKey.stdout.contains("Unlocked work with the recovery key"))
        #expect(!withKey.stdout.contains(recovery), "the recovery key is not echoed")
    }

    /// Every JSON document names an account the same way (`{"id","alias"}` under `account`), and
    /// `agent status` speaks prose, not the agent's JSON.
    /// A line format (`tsv`, `csv`, and `tsv` by default in a pipe) carries rows only: an empty list
    /// is its header line, never a sentence a program would take for a row ("The queue is empty."
    /// used to be printed as one); every column is named; `sync status --format csv` is its
    /// objects' table; CSV lines end in CRLF without an extra empty line; `status` takes an
    /// explicit `--format tsv|csv`.
    @Test func lineFormatsCarryRowsOnly() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        try #require(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        #expect(
            try ostack.run(["queue", "list", "--format", "csv"]).stdout
                == "id,object,record,operation,status,attempts,last error\r\n")
        #expect(
            try ostack.run(["queue", "list"]).stdout
                == "id\tobject\trecord\toperation\tstatus\tattempts\tlast error\n")
        #expect(
            try ostack.run(["conflicts", "list", "--format", "tsv"]).stdout == "id\tobject\trecord\tchange\tfields\n")
        #expect(
            try ostack.run(["audit", "--format", "csv", "--event", "nothing.such"]).stdout
                == "seq,time,account,event,outcome,details\r\n")
        let accounts = try ostack.run(["accounts", "list", "--format", "csv"]).stdout
        #expect(accounts.hasPrefix("default,alias,email,server,state\r\n*,alice,"), "\(accounts)")
        #expect(try ostack.run(["sync", "track", "task"]).status == 0)
        #expect(
            try ostack.run(["sync", "status", "--format", "csv"]).stdout == "object,records,pulled\r\ntask,0,never\r\n")
        // `status` honours an explicit line format (it printed aligned text whatever was asked);
        // `config list` names its third column.
        let status = try ostack.run(["status", "--format", "csv"]).stdout
        #expect(
            status.hasPrefix("field,value\r\naccount,alice (") && status.contains("\r\nlock,no PIN\r\n"), "\(status)")
        let all = try ostack.run(["status", "--all", "--format", "tsv"]).stdout
        #expect(all.hasPrefix("account\tserver\tuser\tsession\tlock\tqueue\tlast sync\nalice ("), "\(all)")
        #expect(try ostack.run(["status"]).stdout.hasPrefix("account      alice ("))
        // `--format ndjson` of a list: one item per line (it printed the list's JSON document).
        let accountLines = try ostack.run(["accounts", "list", "--format", "ndjson"]).stdout
        #expect(
            accountLines.hasPrefix(#"{"alias":"alice","#) && accountLines.split(separator: "\n").count == 1,
            "\(accountLines)")
        let settingLines = try ostack.run(["config", "list", "--format", "ndjson"]).stdout.split(separator: "\n")
        #expect(
            settingLines.count > 3 && settingLines.allSatisfy { $0.hasPrefix(#"{"isDefault":"#) }, "\(settingLines)")
        #expect(try ostack.run(["queue", "list", "--format", "ndjson"]).stdout.isEmpty)
        let settings = try ostack.run(["config", "list", "--format", "csv"]).stdout
        #expect(settings.hasPrefix("key,value,source\r\nkeyring.backend,secret-service,default\r\n"), "\(settings)")
        // On a terminal an empty list is a sentence.
        let shown = try Self.atTerminal(ostack, ["queue", "list"])
        #expect(shown.stdout.contains("The queue is empty."), "\(shown.stdout)")
        // `records list --format ndjson`: one record per line, from the mirror or the server (it
        // printed one JSON document).
        for title in ["A", "B"] {
            #expect(try ostack.run(["records", "create", "task", "--set", "title=\(title)"]).status == 0)
        }
        for source in ["--local", "--remote"] {
            let lines = try ostack.run(["records", "list", "task", source, "--format", "ndjson"]).stdout
                .split(separator: "\n")
            #expect(
                lines.count == 2 && lines.allSatisfy { $0.hasPrefix("{\"") && $0.contains("\"title\":") }, "\(lines)")
        }
    }

    @Test func oneAccountShapeInEveryDocument() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        defer { _ = try? ostack.run(["agent", "stop"]) }
        try #require(
            try ostack.login(server.url, "alice@example.com", "alice-pass", extra: ["--alias", "work"]).status == 0)
        let id = "127.0.0.1:\(server.port)::usr_alice"
        let reference = #""account":{"alias":"work","id":"\#(id)"}"#
        let set = try ostack.run(
            ["pin", "set", "--pin-stdin"], stdin: "482913\n", environment: ["OSTACK_PIN_KDF": "interactive"])
        try #require(set.status == 0, "\(set.stderr)")
        let human = try ostack.run(["agent", "status"]).stdout
        #expect(
            human.hasPrefix("The agent is running (pid ") && human.contains("work: unlocked; locks after "), "\(human)")
        #expect(!human.contains("{"))
        let agent = try ostack.run(["agent", "status", "--json"]).stdout
        #expect(agent.contains(reference) && agent.contains(#""running":true"#), "\(agent)")
        let locked = try ostack.run(["lock", "--json"]).stdout
        #expect(locked == "{\(reference),\"locked\":true}\n", "\(locked)")
        let unlocked = try ostack.run(["unlock", "--pin-stdin", "--json"], stdin: "482913\n").stdout
        #expect(unlocked == "{\(reference),\"unlocked\":true}\n", "\(unlocked)")
        #expect(try ostack.run(["sync", "status", "--json"]).stdout.hasPrefix("{\(reference),"))
        #expect(try ostack.run(["audit", "--json"]).stdout.contains(reference))
        #expect(try ostack.run(["doctor", "--json"]).stdout.contains(reference))
        let all = try ostack.run(["lock", "--all", "--json"]).stdout
        #expect(all == #"{"accounts":[{"alias":"work","id":"\#(id)"}],"locked":true}"# + "\n", "\(all)")
    }

    /// A write waiting on a slow server shows a spinner on a terminal that says the change is saved;
    /// `--timeout` bounds the wait, and not getting an answer in time is saved-and-queued success.
    @Test func aSlowServerShowsASpinnerAndTimeoutBoundsTheWait() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        try #require(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        let slow =
            #"{"match":{"method":"POST","pathPrefix":"/api/v1/data/task"},"count":3,"action":"delay","delayMs":1500}"#
        try server.control("POST", "faults", slow)

        let waited = try Self.atTerminal(ostack, ["records", "create", "task", "--set", "title=Slow"])
        #expect(waited.status == 0, "\(waited.stdout)")
        #expect(waited.stdout.contains("Sending to 127.0.0.1:\(server.port) — the change is saved"), "\(waited.stdout)")
        #expect(waited.stdout.contains("Created task "))

        let timedOut = try ostack.run(["records", "create", "task", "--set", "title=Late", "--timeout", "1s"])
        #expect(timedOut.status == 0, "\(timedOut.stderr)")
        #expect(
            timedOut.stderr.contains("did not answer in time. The change is saved and queued."), "\(timedOut.stderr)")
        #expect(!timedOut.stderr.contains("Sending to"), "no spinner when stderr is not a terminal")
        let strict = try ostack.run(
            ["records", "create", "task", "--set", "title=Strict", "--timeout", "1", "--require-online"])
        #expect(strict.status == 5 && strict.stderr.contains("The change is saved and queued."), "\(strict.stderr)")
        #expect(try ostack.run(["records", "list", "task", "--timeout", "soon"]).status == 64)
        #expect(try ostack.run(["sync"]).status == 0)
        let titles = try ostack.run(["records", "list", "task", "--all", "--fields", "title", "--json"]).stdout
        #expect(titles.contains("Late") && titles.contains("Slow"), "\(titles)")
    }

    /// A new file-keyring passphrase is asked twice on a terminal; two different ones create nothing,
    /// and one passphrase in two Unicode forms is the same one (docs/security.md#pin-7).
    @Test func aNewFileKeyringPassphraseIsAskedTwice() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        defer { _ = try? ostack.run(["agent", "stop"]) }
        let login = [
            "login", "--server", server.url, "--email", "alice@example.com", "--keyring", "file", "--alias", "work",
        ]
        func typed(_ first: String, _ second: String) throws -> ProcessResult {
            try Self.answering(
                ostack,
                [
                    "Password: ": "alice-pass", "New keyring passphrase: ": first,
                    "Repeat the keyring passphrase: ": second,
                ],
                login)
        }
        let differ = try typed("correct horse", "correct hosre")
        #expect(differ.status == 9, "\(differ.stdout)")
        #expect(differ.stdout.contains("The two passphrases differ; nothing was created."), "\(differ.stdout)")
        #expect(!differ.stdout.contains("correct"), "no echo")
        #expect(!(try ostack.run(["accounts", "list"]).stdout.contains("work")))
        // One passphrase typed composed, then decomposed (`è` as `e` + U+0300): the same one. It was
        // "The two passphrases differ".
        let same = try typed("correct h\u{F6}rse cr\u{E8}me", "correct ho\u{308}rse cre\u{300}me")
        #expect(same.status == 0, "\(same.stdout)")
        #expect(try ostack.run(["accounts", "list"]).stdout.contains("work"))
    }

    /// Red team, 2026-11-29: on a 40-column terminal `records list` cut every record id to three characters
    /// ("OFq…"), the one cell a person copies into the next command; `Table.fit` kept the first column
    /// whole only when it takes at most half the width. gh keeps ids whole and cuts titles instead; so does ostack now.
    @Test func idsStayWholeOnANarrowTerminal() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        try #require(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        _ = try server.control("POST", "seed", #"{"object":"task","count":3}"#)
        let ids = try ostack.run(["records", "list", "task", "--jq", ".records[].id"]).stdout.split(separator: "\n")
        try #require(ids.count == 3)
        let shown = try TerminalOutputEndToEndTests.atTerminal(
            ostack, columns: 40, environment: ["OSTACK_PAGER": "cat"], ["records", "list", "task"])
        #expect(shown.status == 0)
        for id in ids { #expect(shown.stdout.contains(String(id)), "\(id) not whole in:\n\(shown.stdout)") }
    }
}
