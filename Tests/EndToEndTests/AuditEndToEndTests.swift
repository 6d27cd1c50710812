import Glibc
import OStackTestSupport
import PlatformKit
import Testing

/// `audit`, `audit verify` and `doctor` through the real binary, keyring and dev server (issue 7).
@Suite(.serialized) struct AuditEndToEndTests {
    func signedIn(_ arguments: [String] = [], password: String = "alice-pass") throws -> (
        DevServerProcess, OStackRunner
    ) {
        let server = try DevServerProcess(arguments: arguments)
        let ostack = OStackRunner()
        let login = try ostack.login(server.url, "alice@example.com", password, extra: ["--alias", "work"])
        try #require(login.status == 0, "\(login.stderr)")
        return (server, ostack)
    }

    func accountDirectory(_ ostack: OStackRunner) throws -> String {
        let listing = try runProcess(executable: "/usr/bin/find", arguments: [ostack.home.path, "-name", "data.db"])
        let path = try #require(listing.stdout.split(separator: "\n").first.map(String.init))
        return String(path.dropLast("/data.db".count))
    }

    @Test func theTrailRecordsTheMainJobAndVerifies() throws {
        let (server, ostack) = try signedIn()
        defer { withExtendedLifetime(server) {} }  // the dev server lives as long as the test
        let create = try ostack.run(["records", "create", "task", "--set", "title=Audited"])
        #expect(create.status == 0, "\(create.stderr)")
        #expect(try ostack.run(["sync"]).status == 0)
        #expect(try ostack.run(["switch", "work"]).status == 0)
        let audit = try ostack.run(["audit", "--json"])
        #expect(audit.status == 0)
        for event in ["\"sign-in\"", "\"migration.guest-to-account\"", "\"record.create\"", "\"sync\"", "\"switch\""] {
            #expect(audit.stdout.contains("\"event\":\(event)"), "\(event) missing in \(audit.stdout)")
        }
        let verify = try ostack.run(["audit", "verify", "--json"])
        #expect(verify.status == 0, "\(verify.stdout)")
        #expect(verify.stdout.contains("\"intact\":true"))
        #expect(
            try ostack.run(["audit", "--event", "sync", "--json"]).stdout.contains("\"event\":\"sign-in\"") == false)
    }

    /// A `queue discard` and its event are one transaction (docs/audit.md): killed (`-9`) between
    /// the two, neither is there — the change is still queued, no event says it was dropped — and
    /// the discard run again is recorded once.
    @Test func aDiscardKilledBeforeItsEventLeavesNeither() throws {
        let (server, ostack) = try signedIn()
        defer { withExtendedLifetime(server) {} }
        let create = try ostack.run(["records", "create", "task", "--set", "title=Kept", "--offline", "--json"])
        #expect(create.status == 0, "\(create.stderr)")
        let queued = try ostack.run(["queue", "list", "--json"]).stdout
        let id = try #require(
            queued.firstRange(of: #""id":""#).map { String(queued[$0.upperBound...].prefix { $0 != "\"" }) })
        let killed = try ostack.run(
            ["queue", "discard", id], environment: ["OSTACK_FAILPOINT": "queue-discard.before-event"])
        #expect(killed.status == 137, "\(killed.stderr)")
        #expect(try ostack.run(["queue", "list", "--json"]).stdout.contains(id))
        #expect(!(try ostack.run(["audit", "--json"]).stdout.contains("queue.discard")))
        #expect(try ostack.run(["queue", "discard", id]).status == 0)
        #expect(!(try ostack.run(["queue", "list", "--json"]).stdout.contains(id)))
        let events = try ostack.run(["audit", "--event", "queue.discard", "--json"]).stdout
        #expect(events.ranges(of: "\"event\":\"queue.discard\"").count == 1, "\(events)")
        #expect(try ostack.run(["audit", "verify"]).status == 0)
    }

    @Test func restoringAnOlderCopyOfTheAccountsFilesIsDetected() throws {
        let (server, ostack) = try signedIn()
        defer { withExtendedLifetime(server) {} }  // the dev server lives as long as the test
        #expect(try ostack.run(["records", "create", "task", "--set", "title=One"]).status == 0)
        let directory = try accountDirectory(ostack)
        let backup = ostack.home.path + "/backup"
        _ = try runProcess(executable: "/bin/cp", arguments: ["-a", directory, backup])
        #expect(try ostack.run(["records", "create", "task", "--set", "title=Two"]).status == 0)
        #expect(try ostack.run(["audit", "verify"]).status == 0)
        _ = try runProcess(executable: "/bin/rm", arguments: ["-rf", directory])
        _ = try runProcess(executable: "/bin/cp", arguments: ["-a", backup, directory])
        let verify = try ostack.run(["audit", "verify", "--json"])
        #expect(verify.status == 1, "\(verify.stdout) \(verify.stderr)")
        #expect(verify.stdout.contains("\"intact\":false") && verify.stdout.contains("\"firstBadSeq\":"))
        #expect(try ostack.run(["audit", "verify"]).stdout.contains("NOT intact at sequence"))
        // The failed verification itself is in the global trail (docs/security.md#aud-5).
        #expect(
            try ostack.run(["audit", "--all", "--event", "audit.verify", "--json"]).stdout.contains(
                "\"outcome\":\"failed\""))
    }

    @Test func lockAndFailedUnlocksAreRecordedAfterTheNextUnlock() throws {
        let (server, ostack) = try signedIn()
        defer { withExtendedLifetime(server) {} }  // the dev server lives as long as the test
        let fast: [String: String?] = ["OSTACK_PIN_KDF": "interactive"]
        #expect(try ostack.run(["pin", "set", "--pin-stdin"], stdin: "7319\n", environment: fast).status == 0)
        #expect(try ostack.run(["lock"]).status == 0)
        #expect(try ostack.run(["unlock", "--pin-stdin"], stdin: "0000\n", environment: fast).status == 4)
        #expect(try ostack.run(["audit"]).status == 4)  // locked: the trail is in the encrypted database
        #expect(try ostack.run(["unlock", "--pin-stdin"], stdin: "7319\n", environment: fast).status == 0)
        let audit = try ostack.run(["audit", "--event", "unlock", "--json"]).stdout
        #expect(audit.contains("\"outcome\":\"failed\"") && audit.contains("wrong-pin"), "\(audit)")
        let all = try ostack.run(["audit", "--json"]).stdout
        #expect(all.contains("\"event\":\"pin.set\"") && all.contains("\"event\":\"lock\""))
        #expect(try ostack.run(["audit", "verify"]).status == 0)
    }

    /// An older copy of the account's files put back and written to is `rolled-back`, however many
    /// commands ran on it since: each of them anchored its head, and the first one moved the anchor
    /// onto the fork, which then verified as intact.
    @Test func aRestoredOlderCopyStaysRolledBackAfterWrites() throws {
        let (server, ostack) = try signedIn()
        defer { withExtendedLifetime(server) {} }
        #expect(try ostack.run(["records", "create", "task", "--set", "title=one"]).status == 0)
        let directory = try accountDirectory(ostack)
        let copy = ostack.home.path + "/old.db"
        _ = try runProcess(executable: "/bin/cp", arguments: [directory + "/data.db", copy])
        for title in ["two", "three"] {
            #expect(try ostack.run(["records", "create", "task", "--set", "title=\(title)"]).status == 0)
        }
        #expect(try ostack.run(["audit", "verify"]).status == 0)
        _ = try runProcess(executable: "/bin/cp", arguments: [copy, directory + "/data.db"])
        for title in ["a", "b", "c", "d"] {
            #expect(try ostack.run(["records", "create", "task", "--set", "title=f-\(title)"]).status == 0)
        }
        let verify = try ostack.run(["audit", "verify", "--json"])
        #expect(verify.status == 1 && verify.stdout.contains(#""problem":"rolled-back""#), "\(verify.stdout)")
        let doctor = try ostack.run(["doctor", "--json"])
        #expect(doctor.status != 0, "\(doctor.stdout)")
    }

    /// A sync summary is `ok` only when the sync was: one that left a refused change was recorded as
    /// `sync ok failed=1` while the command exited 9.
    @Test func aSyncSummarySaysWhetherTheSyncWasClean() throws {
        let (server, ostack) = try signedIn()
        #expect(try ostack.run(["records", "create", "task", "--set", "title=Refused", "--offline"]).status == 0)
        try server.control(
            "POST", "faults",
            #"{"action":"status","status":400,"count":1,"match":{"method":"POST"},"body":{"error":"no","code":"VALIDATION_FAILED","fields":[{"field":"title","message":"no"}]}}"#
        )
        let refused = try ostack.run(["sync"])
        #expect(refused.status == 9, "\(refused.stderr)")
        func last() throws -> String {
            let events = try ostack.run(["audit", "--event", "sync", "--json"]).stdout
            // The newest entry: the list is oldest first, each entry an object starting with its account.
            return String(
                events[(events.range(of: #"{"account""#, options: .backwards)?.lowerBound ?? events.startIndex)...])
        }
        let incomplete = try last()
        #expect(
            incomplete.contains("\"outcome\":\"incomplete\"") && incomplete.contains(#""failed":"1""#), "\(incomplete)")
        let queued = try ostack.run(["queue", "list", "--json"]).stdout
        let id = try #require(
            queued.firstRange(of: #""id":""#).map { String(queued[$0.upperBound...].prefix { $0 != "\"" }) })
        #expect(try ostack.run(["queue", "discard", id]).status == 0)
        #expect(try ostack.run(["sync"]).status == 0)
        #expect(try last().contains("\"outcome\":\"ok\""))
        // A sync that stops (the server gone) is `failed`, naming why.
        let unreachable = try server.stop()
        defer { withExtendedLifetime(unreachable) {} }
        #expect(try ostack.run(["records", "create", "task", "--set", "title=Later", "--offline"]).status == 0)
        #expect(try ostack.run(["sync"]).status == 5)
        let stopped = try last()
        #expect(stopped.contains("\"outcome\":\"failed\"") && stopped.contains(#""stopped":"offline""#), "\(stopped)")
    }

    @Test func theTrailHoldsNoSecretAndNoServerText() throws {
        let canary = "CANARY\(UInt32.random(in: 0...UInt32.max))"
        let (server, ostack) = try signedIn(
            ["--user", "alice@example.com:\(canary)-pass:Alice"], password: "\(canary)-pass")
        #expect(try ostack.run(["records", "create", "task", "--set", "title=\(canary)-title"]).status == 0)
        try server.control(
            "POST", "faults",
            #"{"action":"status","status":400,"count":1,"body":{"error":"\#(canary) says no","code":"VALIDATION_FAILED","fields":[{"field":"title","message":"\#(canary)"}]}}"#
        )
        _ = try ostack.run(["records", "create", "task", "--set", "title=x"])
        try server.control(
            "POST", "faults", #"{"action":"status","status":500,"count":1,"body":{"error":"\#(canary) internal"}}"#)
        _ = try ostack.run(["records", "create", "task", "--set", "title=y"])
        _ = try ostack.run(["sync"])
        let audit = try ostack.run(["audit", "--all", "--json"])
        #expect(audit.status == 0)
        #expect(!audit.stdout.contains(canary), "\(audit.stdout)")
        #expect(!audit.stdout.contains("says no") && !audit.stdout.contains("internal"))
        // No keyring secret (session token, database key, anchor key) appears either.
        let items = try ostack.keyringItems(
            namespace: "\(ostack.keyringPrefix):auth:127.0.0.1:\(server.port)::usr_alice")
        let secrets = items.split(separator: "\n").filter { $0.hasPrefix("secret = ") }.map {
            $0.dropFirst("secret = ".count)
        }
        #expect(!secrets.isEmpty)
        for secret in secrets where secret.count >= 16 {
            #expect(!audit.stdout.contains(String(secret)))
        }
        #expect(!audit.stdout.contains("Bearer"))
    }

    @Test func doctorReportsEachProblemAsAFailingCheckWithAFix() throws {
        let (server, ostack) = try signedIn()
        #expect(try ostack.run(["sync", "track", "task"]).status == 0)
        #expect(try ostack.run(["sync"]).status == 0)
        let healthy = try ostack.run(["doctor", "--json"])
        #expect(healthy.status == 0, "\(healthy.stdout)")
        #expect(healthy.stdout.contains("\"ok\":true") && !healthy.stdout.contains("\"status\":\"fail\""))
        #expect(
            healthy.stdout.contains("\"name\":\"clock\",\"status\":\"ok\"")
                || healthy.stdout.contains("\"name\":\"clock\""))

        // The agent check connects instead of looking for the socket path: a directory there is
        // named (unlock could not start the agent), a runtime directory open to others fails. (It
        // used to say "The agent is running." for both.)
        let run = ostack.home.appending("run")
        let socket = run + "/agent-\(ostack.keyringPrefix).sock"
        try SecureFileSystem.createPrivateDirectory(run)
        try SecureFileSystem.createPrivateDirectory(socket)
        let blocked = try ostack.run(["doctor", "--json"])
        #expect(blocked.status == 0, "\(blocked.stdout)")
        #expect(
            blocked.stdout.contains("Something that is not a socket is at the agent's socket path"), "\(blocked.stdout)"
        )
        try SecureFileSystem.removeTree(socket)
        chmod(run, 0o755)
        let open = try ostack.run(["doctor", "--json"])
        #expect(open.status == 1, "\(open.stdout)")
        #expect(open.stdout.contains("The agent's runtime directory or socket is unsafe"), "\(open.stdout)")
        chmod(run, 0o700)
        #expect(try ostack.run(["doctor", "--json"]).stdout.contains("The agent is not running"))

        let directory = try accountDirectory(ostack)
        chmod(directory + "/data.db", 0o644)
        let mode = try ostack.run(["doctor", "--json"])
        #expect(mode.status == 1)
        #expect(mode.stdout.contains("\"name\":\"file-modes\"") && mode.stdout.contains("\"status\":\"fail\""))
        #expect(mode.stdout.contains("chmod"))
        chmod(directory + "/data.db", 0o600)

        try server.control("POST", "expire-sessions")
        // A 401, one refresh attempt that the server refuses: the session is expired.
        #expect(try ostack.run(["records", "list", "task", "--remote"]).status == 3)
        let expired = try ostack.run(["doctor", "--json"])
        #expect(expired.status == 1)
        #expect(expired.stdout.contains("The session has expired.") && expired.stdout.contains("ostack login"))

        _ = try runProcess(
            executable: "/bin/sh",
            arguments: [
                "-c",
                "head -c 4096 /dev/urandom | dd of='\(directory)/data.db' conv=notrunc 2>/dev/null; rm -f '\(directory)/data.db-wal'",
            ])
        let corrupted = try ostack.run(["doctor", "--json"])
        #expect(corrupted.status == 1)
        #expect(corrupted.stdout.contains("does not open with its key"), "\(corrupted.stdout)")
        // The account's own trail is unreadable now; the global one still verifies.
        #expect(try ostack.run(["doctor", "--json"]).stdout.contains("\"name\":\"audit-global\",\"status\":\"ok\""))
    }
}
