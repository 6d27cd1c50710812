import OStackTestSupport
import Testing

/// Issue 16, "wrong and silent answers": garbage is refused instead of answered with nothing,
/// conflicting flags are refused, and a login says when it changed the default account.
@Suite struct HonestAnswersEndToEndTests {
    @Test func garbageAndConflictingFlagsAreRefusedAndTheDefaultIsNamed() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        let first = try ostack.login(server.url, "alice@example.com", "alice-pass", extra: ["--alias", "work"])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("It is now the default account."))
        let second = try ostack.login(
            server.url, "bob@example.com", "bob-pass", extra: ["--alias", "personal", "--no-switch"])
        #expect(second.status == 0, "\(second.stderr)")
        #expect(!second.stdout.contains("default"))

        let garbage = try ostack.run(["audit", "--since", "garbage"])
        #expect(garbage.status == 64, "\(garbage.stdout)")
        #expect(garbage.stderr.contains("--since takes a UTC date or time"))
        for since in ["2026-11-01", "2026-11-01T12:00Z", "2026-11-01T12:00:00Z", "2026-11-01T12:00:00.250Z"] {
            #expect(try ostack.run(["audit", "--since", since]).status == 0, "\(since)")
        }
        for bad in ["2026-13-01", "2026-11-01T25:00Z", "2026-11-01T12:00:00", "20261101"] {
            #expect(try ostack.run(["audit", "--since", bad]).status == 64, "\(bad)")
        }

        // `--account` and `--all` together would have signed everyone out.
        let both = try ostack.run(["logout", "--account", "personal", "--all"])
        #expect(both.status == 64, "\(both.stderr)")
        #expect(try ostack.run(["audit", "--account", "work", "--all"]).status == 64)
        // `lock work --all` locked every account and said "Locked every account.".
        for arguments in [["lock", "work", "--all"], ["lock", "--account", "work", "--all"]] {
            let lock = try ostack.run(arguments)
            #expect(lock.status == 64 && lock.stderr.contains("not both"), "\(arguments): \(lock)")
        }
        let status = try ostack.run(["status", "--all", "--json"]).stdout
        #expect(!status.contains("\"signedIn\":false"), "\(status)")
        // Confirmations go to stdout, like every other command's.
        let logout = try ostack.run(["logout", "personal"])
        #expect(
            logout.status == 0 && logout.stdout == "Signed out of personal.\n" && logout.stderr.isEmpty, "\(logout)")
    }

    /// Changes queued for records the server no longer has are not "a server problem", and
    /// "not found" says what was not found.
    @Test func goneRecordsAndMissingRecordsAreNamed() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        let other = OStackRunner()
        for runner in [ostack, other] {
            #expect(
                try runner.login(server.url, "alice@example.com", "alice-pass", extra: ["--alias", "work"]).status == 0)
        }
        let created = try ostack.run(["records", "create", "task", "--set", "title=Short-lived", "--json"])
        let range = try #require(created.stdout.firstRange(of: "\"id\":\""))
        let id = String(created.stdout[range.upperBound...].prefix { $0 != "\"" })
        #expect(try other.run(["records", "delete", "task", "--", id]).status == 0)
        let update = try ostack.run(["records", "update", "task", "--set", "title=Too late", "--", id])
        #expect(update.status == 7, "\(update.stderr)")
        #expect(update.stderr.contains("1 queued change is for records the server no longer has"), "\(update.stderr)")
        let sync = try ostack.run(["sync"])
        #expect(sync.status == 7, "\(sync.stderr)")
        #expect(sync.stderr.contains("queued change is for records the server no longer has"))
        #expect(sync.stderr.contains("ostack queue list"))

        let missing = try ostack.run(["records", "get", "task", "nope_1", "--remote"])
        #expect(missing.status == 7)
        #expect(missing.stderr.contains("No task record nope_1"), "\(missing.stderr)")
    }

    /// Local input that cannot become a record is refused with a clear error (found by red team):
    /// `--data @/dev/zero` grew memory until the process died with a Swift backtrace; the ids `.`
    /// and `..` were created and queued, then their requests went to the collection (libcurl folds
    /// dot segments away); a numeric id was silently replaced by a made-up one; and `--data
    /// @/dev/stdin` with one object failed, read a second time after the pipe was empty.
    @Test func localInputThatCannotBeARecordIsRefused() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        #expect(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        let endless = try ostack.run(["records", "create", "task", "--data", "@/dev/zero"])
        #expect(endless.status == 9 && endless.stderr.contains("larger than 256 MiB"), "\(endless.stderr)")
        #expect(!endless.stderr.contains("Fatal") && !endless.stderr.contains("crashed"), "\(endless.stderr)")
        // JSON ostack cannot read says why: nested too deep for the decoder (well-formed, it was
        // "not valid JSON"), or where it stops being JSON.
        let deep = String(repeating: "[", count: 600) + String(repeating: "]", count: 600)
        let deepFilter = try ostack.run(["records", "list", "task", "--local", "--filter-json", deep])
        #expect(
            deepFilter.status == 9 && deepFilter.stderr.contains("--filter-json nests 600 levels deep"),
            "\(deepFilter.stderr)")
        let broken = try ostack.run(["records", "create", "task", "--data", "{\n\"title\": \"x\",\n\"status\": }"])
        #expect(broken.status == 9 && broken.stderr.contains("--data is not valid JSON (line 3)"), "\(broken.stderr)")
        // A name given twice is refused (the first was kept, silently): in --data, and by line in
        // an NDJSON import.
        let twice = try ostack.run(["records", "create", "task", "--data", #"{"title":"A","title":"B"}"#])
        #expect(twice.status == 9 && twice.stderr.contains("--data names 'title' twice"), "\(twice.stderr)")
        let rows = try ostack.run(
            ["records", "import", "task", "-", "--format", "ndjson"],
            stdin: #"{"title":"Fine"}"# + "\n" + #"{"title":"A","status":"open","title":"B"}"# + "\n")
        #expect(rows.status == 9 && rows.stdout.contains("line 2: 'title' appears twice"), "\(rows.stdout)")
        // An argument that is not UTF-8 is refused (it was stored with U+FFFD in place of its bytes).
        let notUTF8 = try runProcess(
            executable: "/bin/sh",
            arguments: ["-c", #"exec "$0" records create task --set "$(printf 'title=\377\376')""#, OStackBinary.path],
            environment: ostack.baseEnvironment)
        #expect(
            notUTF8.status == 64 && notUTF8.stderr.contains("Argument 5 is not valid UTF-8"), "\(notUTF8.stderr)")
        // stdin has the same limit, and says so (it was "Could not read stdin." beyond 64 MiB).
        for arguments in ["records import task --format ndjson -", "records create task --data @-"] {
            let endlessStdin = try runProcess(
                executable: "/bin/sh", arguments: ["-c", "exec \"$0\" \(arguments) < /dev/zero", OStackBinary.path],
                environment: ostack.baseEnvironment, timeout: 60)
            #expect(
                endlessStdin.status == 9 && endlessStdin.stderr.contains("stdin holds more than 256 MiB"),
                "\(arguments): \(endlessStdin.stderr)")
        }
        for id in [".", "..", ""] {
            let made = try ostack.run(["records", "create", "task", "--data", #"{"id":"\#(id)","title":"Dot"}"#])
            #expect(made.status == 9 && made.stderr.contains("cannot be empty, '.' or '..'"), "\(id): \(made.stderr)")
        }
        // An id the server's answer could never confirm (too long, a control character) stayed
        // queued as unconfirmed for good; refused at create and by line at import.
        for id in [String(repeating: "x", count: 256), #"a\u0007b"#] {
            let made = try ostack.run(["records", "create", "task", "--data", #"{"id":"\#(id)","title":"Odd"}"#])
            #expect(made.status == 9 && made.stderr.contains("An id has 1 to 255 characters"), "\(made.stderr)")
        }
        let oddRows = try ostack.run(
            ["records", "import", "task", "-", "--format", "ndjson"],
            stdin: #"{"id":"\#(String(repeating: "y", count: 300))","title":"Long"}"# + "\n")
        #expect(oddRows.status == 9 && oddRows.stdout.contains("line 1: an id has 1 to 255 characters"), "\(oddRows.stdout)")
        let numeric = try ostack.run(["records", "create", "task", "--data", #"{"id":5,"title":"Five"}"#])
        #expect(numeric.status == 9 && numeric.stderr.contains("An id must be a string"), "\(numeric.stderr)")
        // An import names such rows with their lines before anything is queued.
        let imported = try ostack.run(
            ["records", "import", "task", "-", "--format", "json"],
            stdin: #"[{"id":"ok1","title":"A"},{"id":"..","title":"B"},{"id":7,"title":"C"}]"#)
        #expect(imported.status == 9, "\(imported.stderr)")
        #expect(imported.stdout.contains("line 2: an id cannot be empty, '.' or '..'"), "\(imported.stdout)")
        #expect(imported.stdout.contains("line 3: an id must be a string"), "\(imported.stdout)")
        #expect(try ostack.run(["queue", "list", "--json"]).stdout == #"{"entries":[]}"# + "\n")
        let piped = try ostack.run(["records", "create", "task", "--data", "@/dev/stdin"], stdin: #"{"title":"Piped"}"#)
        #expect(piped.status == 0, "\(piped.stderr)")
        #expect(try ostack.run(["records", "list", "task", "--remote"]).stdout.contains("Piped"))
        withExtendedLifetime(server) {}
    }

    /// A record whose deletion is queued here is not found by an update or a second delete, and
    /// nothing is sent: the update used to push the queued delete, fail not-found, and leave the
    /// record back in the mirror, so every later sync failed. A write to a record of an untracked
    /// object that is not here says why it cannot be saved instead of promising a later push.
    @Test func writesToRecordsNotHereSayWhy() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        #expect(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        #expect(try ostack.run(["sync", "track", "task"]).status == 0)
        #expect(try ostack.run(["records", "create", "task", "--data", #"{"id":"gone1","title":"Gone"}"#]).status == 0)
        #expect(try ostack.run(["records", "delete", "task", "gone1", "--offline"]).status == 0)
        for command in [["update", "task", "gone1", "--set", "status=done"], ["delete", "task", "gone1"]] {
            let write = try ostack.run(["records"] + command)
            #expect(write.status == 7, "\(write.stdout) \(write.stderr)")
            #expect(
                write.stderr.contains("No task record gone1") && write.stderr.contains("Its deletion is queued here"),
                "\(write.stderr)")
        }
        let queued = try ostack.run(["queue", "list", "--json"]).stdout
        #expect(
            queued.components(separatedBy: #""operation":"#).count == 2 && queued.contains(#""operation":"delete""#),
            "\(queued)")
        #expect(try server.control("GET", "record?object=task&id=gone1").contains("gone1"), "nothing was sent")
        #expect(try ostack.run(["sync"]).status == 0)
        #expect(try ostack.run(["records", "get", "task", "gone1"]).status == 7)
        // An untracked object: a record only the server has.
        #expect(try ostack.run(["sync", "untrack", "task"]).status == 0)
        try server.control("POST", "seed", #"{"object":"task","count":1}"#)
        let listed = try ostack.run(["records", "list", "task", "--remote", "--fields", "id", "--format", "csv"]).stdout
        let id = String(try #require(listed.split(separator: "\r\n").last))
        // The id is random and may start with '-': after `--` it is never read as an option.
        let offline = try ostack.run(["records", "update", "task", "--set", "status=done", "--offline", "--", id])
        #expect(offline.status == 7, "\(offline.stderr)")
        #expect(
            offline.stderr.contains("There is no copy of it here to change offline. task is not tracked"),
            "\(offline.stderr)")
        #expect(offline.stderr.contains("`ostack sync track task`"), "\(offline.stderr)")
        let missing = try ostack.run(["records", "delete", "task", "nosuch1"])
        #expect(missing.status == 7 && missing.stderr.contains("No task record nosuch1"), "\(missing.stderr)")
        let stopped = try server.stop()  // the server cannot be reached
        defer { withExtendedLifetime(stopped) {} }
        for command in [["update", "task", "--set", "status=done", "--", id], ["delete", "task", "--", id]] {
            let write = try ostack.run(["records"] + command)
            #expect(write.status == 5, "\(write.stderr)")
            #expect(
                write.stderr.contains("Nothing was saved: the record must be read from the server first."),
                "\(write.stderr)")
            #expect(!write.stderr.contains("pushes queued changes later"), "\(write.stderr)")
        }
        let get = try ostack.run(["records", "get", "task", "--", id])
        #expect(get.status == 5 && get.stderr.contains("ostack: hint: Check the connection.\n"), "\(get.stderr)")
        #expect(try ostack.run(["queue", "list", "--json"]).stdout == #"{"entries":[]}"# + "\n")
    }

    /// Small mistakes on the command line are named, not passed over: an object that was never
    /// tracked ("No longer tracking tsak"), `--interval` without `--watch` (ignored: one sync ran),
    /// and a field set twice (the last one won).
    @Test func smallCommandLineMistakesAreNamed() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        #expect(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        #expect(try ostack.run(["sync", "track", "task"]).status == 0)
        let typo = try ostack.run(["sync", "untrack", "tsak"])
        #expect(typo.status == 0 && typo.stdout == "tsak was not tracked: nothing changed.\n", "\(typo.stdout)")
        #expect(try ostack.run(["sync", "status", "--json"]).stdout.contains(#""name":"task""#))
        let interval = try ostack.run(["sync", "--interval", "5m"])
        #expect(interval.status == 64 && interval.stderr.contains("pass both"), "\(interval.stderr)")
        #expect(try server.control("GET", "counters").contains("/api/v1/data") == false, "a sync ran")
        let twice = try ostack.run(["records", "create", "task", "--set", "title=a", "--set", "title=b"])
        #expect(twice.status == 9 && twice.stderr.contains("--set names 'title' twice"), "\(twice.stderr)")
        #expect(!(try server.control("GET", "counters")).contains("POST /api/v1/data/task"), "nothing was sent")
    }

    /// A write whose push also sent an older queued change of another record, which failed, says
    /// so in a warning (it said only "Updated task s3."), and still succeeds. `--json` documents
    /// carry every key docs/commands.md lists: `record` null after a delete, `lastError` null.
    @Test func aWriteSaysWhenAnOlderChangeItSentFailed() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        #expect(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        #expect(try ostack.run(["sync", "track", "task"]).status == 0)
        for id in ["s2", "s3"] {
            #expect(
                try ostack.run(["records", "create", "task", "--data", #"{"id":"\#(id)","title":"\#(id)"}"#]).status
                    == 0)
        }
        #expect(try ostack.run(["records", "update", "task", "s2", "--set", "status=done", "--offline"]).status == 0)
        let entries = try ostack.run(["queue", "list", "--json"]).stdout
        #expect(entries.contains(#""lastError":null"#), "\(entries)")
        try server.control("POST", "faults", #"{"action":"status","status":503,"count":1,"match":{"method":"PATCH"}}"#)
        let update = try ostack.run(["records", "update", "task", "s3", "--set", "status=done"])
        #expect(update.status == 0, "\(update.stderr)")
        #expect(update.stdout.contains("Updated task s3."), "\(update.stdout)")
        #expect(
            update.stderr.contains(
                "ostack: warning: An older queued change (task s2) sent with this one did not go through; this one did."
            ),
            "\(update.stderr)")
        #expect(update.stderr.contains("ostack: hint: Run `ostack queue list` to see it;"), "\(update.stderr)")
        // No warning when nothing older failed.
        let delete = try ostack.run(["records", "delete", "task", "s3", "--json"])
        #expect(delete.status == 0 && delete.stderr.isEmpty, "\(delete.stderr)")
        #expect(
            delete.stdout == #"{"id":"s3","object":"task","queued":false,"record":null}"# + "\n", "\(delete.stdout)")
    }

    /// Answers that said too little or ignored what was asked (a red-team pass): an unknown object
    /// of a delete is named, an unknown queue id is named, a refused setting says what it takes
    /// (and a CA file must exist), `status --all` with `--account` and `api --format tsv` are usage
    /// errors (both were ignored), and `status --all` without accounts prints nothing on stdout.
    @Test func smallAnswersSayWhatTheyAreAbout() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        #expect(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        let object = try ostack.run(["records", "delete", "tsak", "x1"])
        #expect(object.status == 7 && object.stderr.contains("Unknown object 'tsak'."), "\(object.stderr)")
        for command in [["retry", "q_nosuch"], ["discard", "q_nosuch", "--yes"]] {
            let queue = try ostack.run(["queue"] + command)
            #expect(
                queue.status == 7 && queue.stderr.contains("No queued change has the id 'q_nosuch'."), "\(queue.stderr)"
            )
        }
        let interval = try ostack.run(["config", "set", "sync.interval", "31d"])
        #expect(interval.status == 9, "\(interval.stderr)")
        #expect(interval.stderr.contains("sync.interval takes a duration from 1s to 30d"), "\(interval.stderr)")
        // A value starting with '-' is the value, refused by the setting's own rule (the parser took
        // it for an unknown option and dropped it: "Give a value, or --unset"), also after `--`.
        for arguments in [["sync.interval", "-5"], ["sync.interval", "--", "-5"]] {
            let negative = try ostack.run(["config", "set"] + arguments)
            #expect(negative.status == 9 && negative.stderr.contains("'-5' is not one"), "\(negative.stderr)")
        }
        let typo = try ostack.run(["config", "set", "sync.interval", "5m", "--jsn"])
        #expect(typo.status == 64 && typo.stderr.contains("Unknown option '--jsn'."), "\(typo.stderr)")
        // Also before the value (it said "Give one value (quote a value with spaces).").
        let before = try ostack.run(["config", "set", "sync.interval", "--jsn", "5m"])
        #expect(before.status == 64 && before.stderr.contains("Unknown option '--jsn'."), "\(before.stderr)")
        #expect(try ostack.run(["config", "set", "sync.interval", "5m", "--json"]).stdout.contains(#""value":"5m""#))
        let ca = try ostack.run(["config", "set", "tls.ca-file", "/nonexistent/ca.pem"])
        #expect(ca.status == 9 && ca.stderr.contains("the absolute path of a file that exists"), "\(ca.stderr)")
        #expect(try ostack.run(["config", "get", "tls.ca-file", "--json"]).stdout.contains(#""isDefault":true"#))
        let all = try ostack.run(["status", "--all", "--account", "alice"])
        #expect(all.status == 64 && all.stderr.contains("--account does not apply"), "\(all.stderr)")
        let api = try ostack.run(["api", "/data/task", "--format", "tsv"])
        #expect(api.status == 64 && api.stdout.isEmpty, "\(api.stdout) \(api.stderr)")
        let empty = OStackRunner()
        let none = try empty.run(["status", "--all"])
        #expect(none.status == 0 && none.stdout.isEmpty && none.stderr.contains("No accounts yet."), "\(none.stdout)")
    }

    /// A signed-out account's `sync` with nothing to do said "pushed 0, pulled 0" and exit 0; it is
    /// `not-signed-in` (3). `--account` with `--all` on `sync` and `audit verify` was ignored; it is a
    /// usage error. `accounts remove --force` recorded `forced=no` while it threw changes away.
    @Test func signedOutSyncsAndForcedRemovalsAreToldAsTheyAre() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        #expect(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        #expect(try ostack.run(["logout"]).status == 0)
        let sync = try ostack.run(["sync"])
        #expect(sync.status == 3, "\(sync.stdout) \(sync.stderr)")
        for command in [["sync", "--all", "--account", "alice"], ["audit", "verify", "--all", "--account", "alice"]] {
            let both = try ostack.run(command)
            #expect(both.status == 64, "\(command) \(both.stderr)")
        }
        #expect(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        #expect(try ostack.run(["records", "create", "task", "--set", "title=Unsynced", "--offline"]).status == 0)
        #expect(try ostack.run(["accounts", "remove", "alice", "--force", "--yes"]).status == 0)
        let trail = try ostack.run(["audit", "--all", "--event", "account", "--json"]).stdout
        #expect(trail.contains(#""forced":"yes""#), "\(trail)")
    }

    /// `login --account A`, the hint a signed-out account gives, signs A in again: it ignored
    /// `--account` and signed in the last server's account (or asked for an e-mail).
    @Test func loginWithAnAccountSignsThatAccountIn() throws {
        let first = try DevServerProcess()
        let second = try DevServerProcess()
        let ostack = OStackRunner()
        #expect(try ostack.login(first.url, "alice@example.com", "alice-pass", extra: ["--alias", "one"]).status == 0)
        #expect(try ostack.login(second.url, "alice@example.com", "alice-pass", extra: ["--alias", "two"]).status == 0)
        #expect(try ostack.run(["logout", "one"]).status == 0)
        let again = try ostack.run(["login", "--account", "one", "--password-stdin"], stdin: "alice-pass\n")
        #expect(again.status == 0, "\(again.stderr)")
        #expect(
            again.stdout.contains("Signed in to 127.0.0.1:\(first.port)") && again.stdout.contains("(account one)"),
            "\(again.stdout)")
        let status = try ostack.run(["status", "--account", "one", "--json"]).stdout
        #expect(status.contains(#""state":"valid""#), "\(status)")
    }

    /// Without `--sort`, a tracked object's list and `--remote` give the same rows in the same order,
    /// page by page (the mirror lists by id, the server listed in its own order).
    @Test func localAndRemoteListsAgreeWithoutASort() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        #expect(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        try server.control("POST", "seed", #"{"object":"task","count":12}"#)
        #expect(try ostack.run(["sync", "track", "task"]).status == 0)
        #expect(try ostack.run(["sync"]).status == 0)
        for page in [["--limit", "3"], ["--limit", "3", "--offset", "3"], ["--all"]] {
            let arguments = ["records", "list", "task", "--fields", "id", "--format", "csv"] + page
            let local = try ostack.run(arguments + ["--local"]).stdout
            let remote = try ostack.run(arguments + ["--remote"]).stdout
            #expect(local == remote && local.split(separator: "\r\n").count > 3, "\(page): \(local) vs \(remote)")
        }
    }

    /// Issue 16: destructive commands ask on a terminal (a pseudo-terminal here); anything but `y`
    /// changes nothing, `--yes` skips the question, and scripts (no terminal) are not asked; with
    /// `--no-input` they need `--yes`.
    @Test func destructiveCommandsConfirmOnATerminal() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        #expect(
            try ostack.login(server.url, "alice@example.com", "alice-pass", extra: ["--alias", "work"]).status == 0)
        #expect(try ostack.login(server.url, "bob@example.com", "bob-pass", extra: ["--alias", "other"]).status == 0)
        #expect(try ostack.run(["sync", "track", "task", "--account", "work"]).status == 0)
        #expect(try ostack.run(["sync", "--account", "work"]).status == 0)
        let file = #filePath
        let fixture = String(file[..<file.lastIndex(of: "/")!]) + "/Fixtures/pty_run.py"
        func atTerminal(_ answer: String, _ arguments: [String]) throws -> ProcessResult {
            try runProcess(
                executable: "/usr/bin/python3", arguments: [fixture, answer, OStackBinary.path] + arguments,
                environment: ostack.baseEnvironment)
        }
        let declined = try atTerminal("n", ["accounts", "remove", "other"])
        #expect(declined.status == 1, "\(declined.stdout)")
        #expect(declined.stdout.contains("Remove account other") && declined.stdout.contains("Nothing was changed."))
        #expect(try ostack.run(["accounts", "list", "--json"]).stdout.contains("\"alias\":\"other\""))
        let untrack = try atTerminal("n", ["sync", "untrack", "task", "--account", "work"])
        #expect(untrack.status == 1 && untrack.stdout.contains("drop its"), "\(untrack.stdout)")
        #expect(try ostack.run(["sync", "status", "--account", "work"]).stdout.contains("task"))
        // `--no-input` never asks, and what would ask needs `--yes` (on a terminal it went ahead as
        // if confirmed; in a script too).
        for noInput in [
            try atTerminal("y", ["accounts", "remove", "other", "--no-input"]),
            try ostack.run(["sync", "untrack", "task", "--account", "work", "--no-input"]),
        ] {
            #expect(noInput.status == 9, "\(noInput.stdout) \(noInput.stderr)")
            #expect(!noInput.stdout.contains("[y/N]"), "\(noInput.stdout)")
            #expect((noInput.stdout + noInput.stderr).contains("pass --yes"), "\(noInput.stdout) \(noInput.stderr)")
        }
        #expect(try ostack.run(["accounts", "list", "--json"]).stdout.contains("\"alias\":\"other\""))
        #expect(try ostack.run(["sync", "status", "--account", "work"]).stdout.contains("task"))
        let accepted = try atTerminal("y", ["accounts", "remove", "other"])
        #expect(accepted.status == 0, "\(accepted.stdout)")
        #expect(!(try ostack.run(["accounts", "list", "--json"]).stdout.contains("\"alias\":\"other\"")))
        let skipped = try atTerminal("n", ["sync", "untrack", "task", "--account", "work", "--yes"])
        #expect(skipped.status == 0 && !skipped.stdout.contains("[y/N]"), "\(skipped.stdout)")
    }

    /// Red team, 2026-11-29: `records get` of a tracked object whose record is not in the mirror yet (made on
    /// the server after the last pull, or the object never pulled) said "No task record X." — exit 7,
    /// the same words as a record the server does not have — while the server was reachable and had it,
    /// and `records update` of the same id found it there.
    @Test func getOfATrackedObjectDoesNotDenyARecordTheServerHas() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        try #require(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        _ = try server.control("POST", "seed", #"{"object":"task","count":2,"ids":"sequential"}"#)
        #expect(try ostack.run(["sync", "track", "task"]).status == 0)
        #expect(try ostack.run(["sync"]).status == 0)
        let made = try ostack.run(["api", "POST", "/data/task", "-f", "id=srvnew", "-f", "title=From the server"])
        try #require(made.status == 0, "\(made.stderr)")

        // Asked of the server when the mirror does not hold it, and kept there.
        let get = try ostack.run(["records", "get", "task", "srvnew"])
        #expect(get.status == 0 && get.stdout.contains("From the server"), "status \(get.status): \(get.stderr)")
        #expect(try ostack.run(["records", "get", "task", "srvnew", "--local"]).status == 0)
        // `--local` asks the mirror alone; a record nobody has is still "not found".
        #expect(try ostack.run(["records", "get", "task", "nowhere", "--local"]).status == 7)
        #expect(try ostack.run(["records", "get", "task", "nowhere"]).status == 7)
        // The same id is found by update, so the two commands disagree about whether it exists.
        let update = try ostack.run(["records", "update", "task", "srvnew", "--set", "title=Changed"])
        #expect(update.status == 0, "\(update.stderr)")
    }

    /// Red team, 2026-11-29: docs/commands.md, "JSON output", documents `doctor`'s checks as
    /// `{"name","account":ref|null,…}` and audit events as `{"seq","time","account":ref|null,…}` ("null:
    /// the global trail"), as `status` writes its `lastSyncAt`/`queue` nulls. A check that is not about an
    /// account (keyring, home, settings, …) left `account` out instead, so `jq '.checks[] |
    /// select(.account == null)'` works but `has("account")` and typed decoders disagree with the docs.
    @Test func doctorGlobalChecksCarryAnExplicitNullAccount() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        try #require(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        let doctor = try ostack.run(["doctor", "--json"])
        #expect(doctor.status == 0, "\(doctor.stderr)")
        let keyring = try #require(
            doctor.stdout.split(separator: "},{").first { $0.contains(#""name":"keyring""#) }, "\(doctor.stdout)")
        #expect(keyring.contains(#""account":null"#), "\(keyring)")
        let status = try ostack.run(["status", "--json"])
        #expect(status.stdout.contains(#""lastSyncAt":null"#), "status does write its documented nulls")
    }
}
