import Glibc
import OStackTestSupport
import PlatformKit
import Testing

/// Issue 16: progress you can trust — pull and push progress on one redrawn line with total,
/// percentage, rate and ETA (none when piped), a clear word on Ctrl-C and "partial" in
/// `sync status` after it, and a `--watch` that does not keep an account unlocked.
@Suite struct SyncProgressEndToEndTests {
    static let fixture: String = {
        let file = #filePath
        return String(file[..<file.lastIndex(of: "/")!]) + "/Fixtures/pty_run.py"
    }()

    static func atTerminal(_ ostack: OStackRunner, _ script: [String], _ arguments: [String]) throws -> ProcessResult {
        var environment = ostack.baseEnvironment
        environment["COLUMNS"] = nil
        return try runProcess(
            executable: "/usr/bin/python3",
            arguments: [fixture, "--cols", "100"] + script + ["--", OStackBinary.path] + arguments,
            environment: environment)
    }

    @Test func pullAndPushShowProgressOnATerminalOnly() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        try #require(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        _ = try server.control("POST", "seed", #"{"object":"task","count":30000}"#)
        try #require(try ostack.run(["sync", "track", "task"]).status == 0)

        let pulled = try Self.atTerminal(ostack, [], ["sync"])
        #expect(pulled.status == 0, "\(pulled.stdout)")
        #expect(pulled.stdout.contains("pulling task  "), "\(pulled.stdout)")
        #expect(pulled.stdout.contains("█") && pulled.stdout.contains("100%  30 000/30 000"), "\(pulled.stdout)")
        #expect(pulled.stdout.contains("\r\u{1B}[2K"), "redrawn in place")
        let lastLine = pulled.stdout.split(separator: "\r\n").last.map(String.init) ?? ""
        #expect(lastLine.contains("pulled 30000"), "the result follows a cleared line: \(lastLine)")

        let batch = "[" + (0..<3000).map { #"{"title":"Offline \#($0)"}"# }.joined(separator: ",") + "]"
        let queued = try ostack.run(["records", "create", "task", "--data", batch, "--offline"])
        try #require(queued.status == 0, "\(queued.stderr)")
        let pushed = try Self.atTerminal(ostack, [], ["sync", "--push-only"])
        #expect(pushed.status == 0, "\(pushed.stdout)")
        #expect(pushed.stdout.contains("pushing  ") && pushed.stdout.contains("100%  3 000/3 000"), "\(pushed.stdout)")

        _ = try server.control("POST", "seed", #"{"object":"task","count":100}"#)
        let piped = try ostack.run(["sync"])
        #expect(piped.status == 0 && piped.stderr.isEmpty, "no progress when not a terminal: \(piped.stderr)")
        let json = try Self.atTerminal(ostack, [], ["sync", "--json"])
        #expect(!json.stdout.contains("pulling") && !json.stdout.contains("█"), "\(json.stdout)")
    }

    /// Ctrl-C in the middle of a pull: a clear word, exit 130, what was pulled is kept, and
    /// `sync status` says the last sync is partial until a sync completes.
    @Test func interruptingASyncSaysWhatIsKept() throws {
        let server = try DevServerProcess(arguments: ["--latency-ms", "40"])
        let ostack = OStackRunner()
        try #require(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        _ = try server.control("POST", "seed", #"{"object":"task","count":40000}"#)
        try #require(try ostack.run(["sync", "track", "task"]).status == 0)

        let interrupted = try Self.atTerminal(ostack, ["--on", "pulling task", "--type", "^C"], ["sync"])
        #expect(interrupted.status == 130, "\(interrupted.stdout)")
        #expect(interrupted.stdout.contains("ostack: interrupted: what was pulled and pushed so far is kept"))
        let status = try ostack.run(["sync", "status"])
        #expect(status.stdout.contains("partial  a sync"), "\(status.stdout)")
        #expect(status.stdout.contains("synced   never"))
        let json = try ostack.run(["sync", "status", "--json"]).stdout
        #expect(json.contains(#""partialSyncAt":""#), "\(json)")

        #expect(try ostack.run(["sync"]).status == 0)
        let after = try ostack.run(["sync", "status"]).stdout
        #expect(!after.contains("partial") && after.contains("task"), "\(after)")
        #expect(!(try ostack.run(["sync", "status", "--json"]).stdout.contains("partialSyncAt")))
    }

    /// Ctrl-C while an import pushes (its rows are still being queued, batch by batch): exit 130
    /// with what to do; running the same import again queues the rest, and the server ends with
    /// exactly one copy of every row.
    @Test func interruptingAnImportSaysHowToFinish() throws {
        let server = try DevServerProcess(arguments: ["--latency-ms", "40"])
        let ostack = OStackRunner()
        try #require(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        let scratch = TemporaryDirectory()
        let file = scratch.appending("rows.csv")
        let lines = ["title,amount,status"] + (1...6000).map { "Row \($0),1,open" }
        try TemporaryDirectory.writeLines(lines, to: file)

        let interrupted = try Self.atTerminal(
            ostack, ["--on", "pushing", "--type", "^C"], ["records", "import", "task", file, "--key", "title"])
        #expect(interrupted.status == 130, "\(interrupted.stdout)")
        #expect(
            interrupted.stdout.contains(
                "ostack: interrupted: the rows queued so far are kept; run the same import again"),
            "\(interrupted.stdout)")
        let again = try ostack.run(["records", "import", "task", file, "--key", "title", "--json"])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(!again.stdout.contains(#""queued":0"#) && !again.stdout.contains(#""existing":0"#), "\(again.stdout)")
        #expect(try ostack.run(["sync"]).status == 0)
        let body = try server.control("GET", "record?object=task&id=")
        #expect(body.contains(#""count":6000"#), "\(body)")

        // Started with SIGINT ignored (a background job of a script), Ctrl-C stays ignored.
        let more = scratch.appending("more.csv")
        let next = ["title,amount,status"] + (1...3000).map { "More \($0),1,open" }
        try TemporaryDirectory.writeLines(next, to: more)
        var environment = ostack.baseEnvironment
        environment["COLUMNS"] = nil
        let ignoring = try runProcess(
            executable: "/usr/bin/python3",
            arguments: [
                Self.fixture, "--cols", "100", "--on", "pushing", "--type", "^C", "--", "/bin/sh", "-c",
                "trap '' INT; exec \"$0\" records import task \"$1\" --key title", OStackBinary.path, more,
            ],
            environment: environment)
        #expect(ignoring.status == 0 && !ignoring.stdout.contains("interrupted"), "\(ignoring.stdout)")
        #expect(try server.control("GET", "record?object=task&id=").contains(#""count":9000"#))
    }

    /// `records export` counts the records on one redrawn line on a terminal, and writes no progress
    /// when its output is not a terminal.
    @Test func anExportShowsProgressOnATerminalOnly() throws {
        let server = try DevServerProcess(arguments: ["--latency-ms", "40"])
        let ostack = OStackRunner()
        try #require(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        _ = try server.control("POST", "seed", #"{"object":"task","count":8000}"#)
        let scratch = TemporaryDirectory()
        let shown = try Self.atTerminal(
            ostack, [], ["records", "export", "task", "--remote", "--output", scratch.appending("at-terminal.csv")])
        #expect(shown.status == 0, "\(shown.stdout)")
        #expect(shown.stdout.contains("exporting task") && shown.stdout.contains("\r\u{1B}[2K"), "\(shown.stdout)")
        #expect(shown.stdout.contains("Exported 8000 task records"), "\(shown.stdout)")
        let piped = try ostack.run([
            "records", "export", "task", "--remote", "--output", scratch.appending("piped.csv"),
        ])
        #expect(piped.status == 0 && !piped.stderr.contains("exporting"), "\(piped.stderr)")
    }

    /// `sync --watch` reads the account's key without counting as use: the account still locks
    /// itself after its idle timeout while the watch runs.
    @Test func aWatchDoesNotKeepTheAccountUnlocked() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        defer { _ = try? ostack.run(["agent", "stop"]) }
        try #require(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        #expect(try ostack.run(["config", "set", "agent.idle-timeout", "3s"]).status == 0)
        let set = try ostack.run(
            ["pin", "set", "--pin-stdin"], stdin: "482913\n", environment: ["OSTACK_PIN_KDF": "interactive"])
        try #require(set.status == 0, "\(set.stderr)")
        let watch = try ostack.start(["sync", "--watch", "--interval", "1s"])
        defer { watch.kill() }
        usleep(6_000_000)
        let status = try ostack.run(["status", "--json"]).stdout
        #expect(status.contains("\"locked\":true"), "the watch kept the account unlocked: \(status)")
    }
}
