import Glibc
import PlatformKit
import OStackTestSupport
import Testing

/// PIN lock, unlock, lockout, recovery and the agent, against the real keyring and dev server.
/// (`OSTACK_PIN_KDF=interactive` keeps Argon2id at libsodium's INTERACTIVE floor in tests.)
@Suite(.serialized) struct PINLockEndToEndTests {
    static let fast: [String: String?] = ["OSTACK_PIN_KDF": "interactive"]

    func signedIn() throws -> (DevServerProcess, OStackRunner) {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        #expect(
            try ostack.login(server.url, "alice@example.com", "alice-pass", extra: ["--alias", "work"]).status == 0)
        return (server, ostack)
    }

    func namespace(_ ostack: OStackRunner, _ server: DevServerProcess) -> String {
        "\(ostack.keyringPrefix):auth:127.0.0.1:\(server.port)::usr_alice"
    }

    /// `pin set` started and held two seconds between staging and commit (where its recovery key
    /// is shown); returned once it is inside that pause.
    func pinSetPausedAfterStaging(_ ostack: OStackRunner) throws -> ChildProcess {
        try ostack.startPaused(
            at: "pin-set.after-staging", ["pin", "set", "--pin-stdin", "--json"], stdin: "7319\n",
            environment: Self.fast)
    }

    @discardableResult
    func setPIN(_ ostack: OStackRunner, _ pin: String = "7319") throws -> String {
        let result = try ostack.run(["pin", "set", "--pin-stdin", "--json"], stdin: pin + "\n", environment: Self.fast)
        try #require(result.status == 0, "\(result.stderr)")
        let fields = result.stdout.split(separator: "\"")
        try #require(fields.count > 3, "\(result.stdout)")
        return String(fields[3])
    }

    /// `logout --all` with one account locked signs out the others and names the locked one (it
    /// stopped at it, exit 4, before signing out an account after it, and said nothing of it).
    @Test func logoutAllPassesALockedAccountAndNamesIt() throws {
        let (server, ostack) = try signedIn()
        // After work in the list (accounts go by alias), where the old loop never came.
        #expect(
            try ostack.login(server.url, "bob@example.com", "bob-pass", extra: ["--no-switch", "--alias", "zed"]).status
                == 0)
        _ = try setPIN(ostack)
        _ = try ostack.run(["agent", "stop"])  // locks work
        defer { _ = try? ostack.run(["agent", "stop"]) }
        let out = try ostack.run(["logout", "--all"])
        #expect(out.status == 4, "\(out.stdout) \(out.stderr)")
        #expect(out.stdout.contains("work: not signed out (locked).") && out.stdout.contains("Signed out of zed."))
        #expect(out.stderr.contains("Account work is locked."), "\(out.stderr)")
        let list = try ostack.run(["accounts", "list", "--json"]).stdout
        #expect(list.components(separatedBy: #""signedIn":true"#).count == 2, "\(list)")
    }

    /// A PIN or recovery key ostack may not ask for: the hint names the flag that reads it from
    /// stdin (it said "the *-stdin flag").
    @Test func aSecretThatCannotBeAskedForNamesItsFlag() throws {
        let (_, ostack) = try signedIn()
        defer { _ = try? ostack.run(["agent", "stop"]) }
        func hint(_ arguments: [String]) throws -> String { try ostack.run(arguments + ["--no-input"]).stderr }
        #expect(try hint(["pin", "set"]).contains("ostack: hint: Pass it on stdin with --pin-stdin."))
        _ = try setPIN(ostack)
        #expect(try ostack.run(["lock"]).status == 0)
        #expect(try hint(["unlock"]).contains("ostack: hint: Pass it on stdin with --pin-stdin."))
        let recovery = try hint(["unlock", "--recovery-key"])
        #expect(recovery.contains("ostack: hint: Pass it on stdin with --recovery-key-stdin."), "\(recovery)")
    }

    @Test func lockedAccountsRefuseAuthButKeepMetadata() throws {
        let (server, ostack) = try signedIn()
        let recovery = try setPIN(ostack)
        #expect(recovery.split(separator: "-").count == 8)
        // No plain db-key remains; the token is sealed.
        let items = try ostack.keyringItems(namespace: namespace(ostack, server))
        #expect(!items.contains("kind = db-key"))
        #expect(items.contains("kind = pin-ring") && items.contains("kind = recovery-ring"))
        #expect(try ostack.run(["auth", "refresh"]).status == 0)  // unlocked right after pin set

        #expect(try ostack.run(["lock"]).status == 0)
        let refused = try ostack.run(["auth", "refresh"])
        #expect(refused.status == 4)
        #expect(refused.stderr.contains("Account work is locked."))
        #expect(try ostack.run(["logout"]).status == 4)
        let status = try ostack.run(["status", "--json"])
        #expect(status.status == 0)
        #expect(status.stdout.contains("\"locked\":true"))
        #expect(try ostack.run(["accounts", "list"]).status == 0)
        // doctor works (the database unchecked: a warning, exit 0); the trail is in the database.
        let doctor = try ostack.run(["doctor", "--json"])
        #expect(doctor.status == 0 && doctor.stdout.contains("the account is locked"), "\(doctor.stdout)")
        #expect(try ostack.run(["audit"]).status == 4)

        let wrong = try ostack.run(["unlock", "--pin-stdin"], stdin: "0000\n")
        #expect(wrong.status == 4)
        #expect(wrong.stderr.contains("Incorrect PIN. 4 attempts left."))
        #expect(try ostack.run(["unlock", "--pin-stdin"], stdin: "7319\n").status == 0)
        #expect(try ostack.run(["auth", "refresh"]).status == 0)
        #expect(try ostack.run(["status", "--json"]).stdout.contains("\"locked\":false"))
    }

    @Test func lockoutThenRecoveryKeyThenNewPIN() throws {
        let (server, ostack) = try signedIn()
        defer {
            withExtendedLifetime(server) {}  // the dev server lives as long as the test
            _ = try? ostack.run(["agent", "stop"])
        }
        let recovery = try setPIN(ostack)
        #expect(try ostack.run(["lock"]).status == 0)
        for _ in 0..<4 { #expect(try ostack.run(["unlock", "--pin-stdin"], stdin: "2468\n").status == 4) }
        let fifth = try ostack.run(["unlock", "--pin-stdin"], stdin: "2468\n")
        #expect(fifth.stderr.contains("Too many wrong PINs"))
        let right = try ostack.run(["unlock", "--pin-stdin"], stdin: "7319\n")
        #expect(right.status == 4)  // the PIN path is erased: even the right PIN no longer works
        // Issue 16: `unlock` says so before asking (nothing on stdin is needed), and `status` tells
        // a locked-out PIN apart from no PIN.
        let asked = try ostack.run(["unlock", "--pin-stdin"], stdin: "")
        #expect(asked.status == 4 && asked.stderr.contains("Too many wrong PINs"), "\(asked.stderr)")
        #expect(try ostack.run(["status", "--json"]).stdout.contains("\"pinLockedOut\":true"))
        #expect(try ostack.run(["status"]).stdout.contains("the PIN is locked out (use the recovery key)"))
        // `lock` of a locked-out account is no mistake (it said the account had no PIN).
        let relock = try ostack.run(["lock"])
        #expect(relock.status == 0 && !relock.stderr.contains("no PIN"), "\(relock.stderr)")
        #expect(try ostack.run(["unlock", "--recovery-key-stdin"], stdin: recovery.lowercased() + "\n").status == 0)
        let afterRecovery = try ostack.run(["auth", "refresh"])
        let agentStatus = try ostack.run(["agent", "status"]).stdout
        #expect(afterRecovery.status == 0, "\(afterRecovery.stderr) \(agentStatus)")
        #expect(try ostack.run(["pin", "set", "--pin-stdin"], stdin: "8642\n", environment: Self.fast).status == 0)
        #expect(try ostack.run(["lock"]).status == 0)
        #expect(try ostack.run(["unlock", "--pin-stdin"], stdin: "8642\n").status == 0)
    }

    /// A lockout killed between its two deletions leaves an account the recovery key and a new
    /// PIN bring back. (It deleted the ring first: a kill there left an envelope nothing could
    /// open, and `pin set`, `pin remove`, `unlock` and `login` all refused for good.)
    @Test func aLockoutKilledHalfWayIsStillALockout() throws {
        let (server, ostack) = try signedIn()
        defer {
            withExtendedLifetime(server) {}
            _ = try? ostack.run(["agent", "stop"])
        }
        let recovery = try setPIN(ostack)
        #expect(try ostack.run(["lock"]).status == 0)
        for _ in 0..<4 { #expect(try ostack.run(["unlock", "--pin-stdin"], stdin: "2468\n").status == 4) }
        let killed = try ostack.run(
            ["unlock", "--pin-stdin"], stdin: "2468\n",
            environment: ["OSTACK_FAILPOINT": "pin-lockout.after-envelope"])
        #expect(killed.status == 137, "\(killed.status) \(killed.stderr)")
        #expect(try ostack.run(["status", "--json"]).stdout.contains("\"pinLockedOut\":true"))
        #expect(try ostack.run(["unlock", "--recovery-key-stdin"], stdin: recovery + "\n").status == 0)
        let newPIN = try ostack.run(["pin", "set", "--pin-stdin"], stdin: "8642\n", environment: Self.fast)
        #expect(newPIN.status == 0, "\(newPIN.stderr)")
        #expect(try ostack.run(["lock"]).status == 0)
        #expect(try ostack.run(["unlock", "--pin-stdin"], stdin: "8642\n").status == 0)
    }

    /// `lock` that cannot reach the agent safely says so instead of "Locked"; `lock --all` is
    /// audited; `accounts remove` makes the agent forget the removed account's key.
    @Test func lockingIsTrueOrRefusedAndRemovalForgetsTheKey() throws {
        let (server, ostack) = try signedIn()
        defer {
            withExtendedLifetime(server) {}
            _ = try? ostack.run(["agent", "stop"])
        }
        try setPIN(ostack)
        let run = ostack.home.appending("run")
        #expect(chmod(run, 0o750) == 0)
        let unsafe = try ostack.run(["lock"])
        #expect(unsafe.status == 10 && !unsafe.stdout.contains("Locked"), "\(unsafe.status) \(unsafe.stdout)")
        #expect(try ostack.run(["lock", "--all"]).status == 10)
        #expect(chmod(run, 0o700) == 0)
        #expect(try ostack.run(["agent", "status"]).stdout.contains("unlocked"))  // it was never forgotten
        #expect(try ostack.run(["lock", "--all"]).status == 0)
        #expect(try ostack.run(["unlock", "--pin-stdin"], stdin: "7319\n").status == 0)
        let trail = try ostack.run(["audit", "--json"])
        #expect(trail.stdout.contains("\"lock\""), "\(trail.stdout) \(trail.stderr)")

        #expect(try ostack.run(["agent", "status"]).stdout.contains("unlocked"))
        #expect(try ostack.run(["accounts", "remove", "work", "--force"]).status == 0)
        let after = try ostack.run(["agent", "status"])
        #expect(!after.stdout.contains("unlocked"), "\(after.stdout)")
    }

    /// The pid of the agent serving `ostack`'s home (its command line and environment in /proc).
    func agentPID(_ ostack: OStackRunner) throws -> pid_t? {
        let listing = try runProcess(executable: "/bin/ls", arguments: ["/proc"])
        for name in listing.stdout.split(separator: "\n") {
            guard let pid = pid_t(name) else { continue }
            let command = try? runProcess(executable: "/bin/cat", arguments: ["/proc/\(pid)/cmdline"]).stdout
            guard let command, command.contains("agent\u{0}--foreground") else { continue }
            let environ = try? runProcess(executable: "/bin/cat", arguments: ["/proc/\(pid)/environ"]).stdout
            if environ?.contains("OSTACK_HOME=\(ostack.home.path)\u{0}") == true { return pid }
        }
        return nil
    }

    /// Whether `pid` is gone or a zombie (its memory released), not merely stopped.
    func isDead(_ pid: pid_t) -> Bool {
        guard let stat = try? runProcess(executable: "/bin/cat", arguments: ["/proc/\(pid)/stat"]).stdout,
            let close = stat.lastIndex(of: ")")
        else { return true }
        return stat[stat.index(close, offsetBy: 2)] == "Z"
    }

    /// `lock` against an agent that takes the request and never answers (stopped with SIGSTOP)
    /// kills it and says so. It said "Locked work." after five seconds unconfirmed, while the
    /// stopped agent kept the key in its memory until someone continued it.
    @Test func lockingAnAgentThatDoesNotAnswerStopsIt() throws {
        let (server, ostack) = try signedIn()
        defer {
            withExtendedLifetime(server) {}
            _ = try? ostack.run(["agent", "stop"])
        }
        _ = try setPIN(ostack)  // unlocked: the agent holds the key
        let pid = try #require(try agentPID(ostack))
        #expect(kill(pid, SIGSTOP) == 0)
        let lock = try ostack.run(["lock", "--json"])
        #expect(isDead(pid), "the agent that held the key is still there")
        _ = kill(pid, SIGCONT)
        #expect(lock.status == 0 && lock.stdout.contains(#""agentStopped":true"#), "\(lock.stdout) \(lock.stderr)")
        let status = try ostack.run(["status", "--json"]).stdout
        #expect(status.contains("\"locked\":true"), "\(status)")
        #expect(try ostack.run(["records", "list", "task", "--local"]).status == 4)
        // A new agent takes the next unlock.
        #expect(try ostack.run(["unlock", "--pin-stdin"], stdin: "7319\n").status == 0)
        let again = try #require(try agentPID(ostack))
        #expect(again != pid)
        #expect(kill(again, SIGSTOP) == 0)
        let all = try ostack.run(["lock", "--all"])
        #expect(isDead(again), "the agent that held the key is still there")
        _ = kill(again, SIGCONT)
        #expect(all.status == 0 && all.stdout.contains("was stopped, so every account is locked"), "\(all.stdout)")
        #expect(try ostack.run(["status", "--json"]).stdout.contains("\"locked\":true"))

        // Stopped long enough for its backlog to fill, an agent makes `connect` itself wait: an
        // unlock then hung for as long as the agent stayed stopped. Now it ends with what to do,
        // `lock` finds the agent by its ownership lock, and `agent stop` kills it too.
        #expect(try ostack.run(["unlock", "--pin-stdin"], stdin: "7319\n").status == 0)
        for stopper in [["lock"], ["agent", "stop"]] {
            if stopper == ["agent", "stop"] {
                #expect(try ostack.run(["unlock", "--pin-stdin"], stdin: "7319\n").status == 0)
            }
            let third = try #require(try agentPID(ostack))
            #expect(kill(third, SIGSTOP) == 0)
            let socket = try #require(
                try runProcess(executable: "/usr/bin/find", arguments: [ostack.home.path, "-name", "agent-*.sock"])
                    .stdout.split(separator: "\n").first.map(String.init))
            // Connections nobody accepts, until the backlog is full.
            let waiting = (0..<300).compactMap { _ in try? UnixSocket.connect(path: socket, timeout: 0.05) }
            #expect(waiting.count < 300, "the backlog never filled")
            let unlock = try ostack.run(["unlock", "--pin-stdin"], stdin: "7319\n")
            #expect(unlock.status != 0 && unlock.stderr.contains("ostack agent stop"), "\(unlock.stderr)")
            let stopped = try ostack.run(stopper)
            #expect(isDead(third), "\(stopper): \(stopped.stdout) \(stopped.stderr)")
            _ = kill(third, SIGCONT)
            #expect(stopped.status == 0 && stopped.stdout.contains("every account is locked"), "\(stopped.stdout)")
            withExtendedLifetime(waiting) {}
        }
    }

    /// The agent an unlock starts keeps none of the unlocking command's files or working
    /// directory: it held a caller's pipe (whose reader then waited hours for its end) and its
    /// directory (a stick that could not be unmounted).
    @Test func theAgentKeepsNothingOfItsCaller() throws {
        let (server, ostack) = try signedIn()
        defer {
            withExtendedLifetime(server) {}
            _ = try? ostack.run(["agent", "stop"])
        }
        try setPIN(ostack)
        #expect(try ostack.run(["agent", "stop"]).status == 0)
        let directory = TemporaryDirectory(prefix: "ostack-agent-cwd")
        // fd 3 of the unlocking command is a pipe, its working directory a directory of its own.
        let unlock = try ChildProcess(
            executable: OStackBinary.path, arguments: ["unlock", "--pin-stdin"], environment: ostack.baseEnvironment,
            workingDirectory: directory.path, stdin: Array("7319\n".utf8), fd3: Array("x".utf8))
        #expect(try unlock.waitForExit(timeout: 60) == 0, "\(unlock.stderrText())")
        let status = try ostack.run(["agent", "status"]).stdout
        let pid = try #require(
            status.split(separator: " ").drop { $0 != "(pid" }.dropFirst().first.flatMap {
                Int32($0.trimmingCharacters(in: .punctuationCharacters))
            },
            "\(status)")
        var buffer = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/\(pid)/cwd", &buffer, buffer.count - 1)
        #expect(length > 0 && String(cString: buffer) == "/", "the agent's working directory")
        let descriptors = try runProcess(executable: "/bin/ls", arguments: ["-l", "/proc/\(pid)/fd"]).stdout
        #expect(!descriptors.contains("pipe:") && !descriptors.contains(directory.path), "\(descriptors)")
    }

    @Test func aFreshSignInRebuildsLocalDataOnlyWhenConfirmed() throws {
        let (server, ostack) = try signedIn()
        defer { withExtendedLifetime(server) {} }
        try setPIN(ostack)
        #expect(try ostack.run(["lock"]).status == 0)
        // Locked (PIN still valid): signing in again is refused until unlocked.
        #expect(try ostack.login(server.url, "alice@example.com", "alice-pass", extra: ["--no-input"]).status == 4)
        for _ in 0..<5 { _ = try ostack.run(["unlock", "--pin-stdin"], stdin: "2468\n") }
        let declined = try ostack.login(server.url, "alice@example.com", "alice-pass", extra: ["--no-input"])
        #expect(declined.status == 4)
        #expect(declined.stderr.contains("--rebuild-local-data"))
        #expect(!(try ostack.keyringItems(namespace: "\(ostack.keyringPrefix):guest")).contains("attribute"))
        let rebuilt = try ostack.login(server.url, "alice@example.com", "alice-pass", extra: ["--rebuild-local-data"])
        #expect(rebuilt.status == 0, "\(rebuilt.stderr)")
        #expect(try ostack.run(["auth", "refresh"]).status == 0)
        let status = try ostack.run(["status", "--json"]).stdout
        #expect(status.contains("\"hasPin\":false") && status.contains("\"locked\":false"))
        #expect(try ostack.run(["accounts", "list", "--json"]).stdout.components("\"id\"") == 1)
    }

    /// docs/security.md#pin-3: the counter is persisted before Argon2 runs, so kill -9 mid-derivation costs an attempt.
    @Test func killDuringKeyDerivationStillCostsAnAttempt() throws {
        let (server, ostack) = try signedIn()
        defer {
            withExtendedLifetime(server) {}  // the dev server lives as long as the test
            _ = try? ostack.run(["agent", "stop"])
        }
        try setPIN(ostack)
        #expect(try ostack.run(["lock"]).status == 0)
        let killed = try ostack.run(
            ["unlock", "--pin-stdin"], stdin: "7319\n", environment: ["OSTACK_FAILPOINT": "unlock.after-count"])
        #expect(killed.status == 137)
        let next = try ostack.run(["unlock", "--pin-stdin"], stdin: "0000\n")
        #expect(next.stderr.contains("3 attempts left"))  // 1 (killed) + 1 (wrong) = 2 used
    }

    /// SOD-3: a key derivation the OS refuses memory for is `not-enough-memory` and gives its attempt
    /// back (the right PIN on a host short of memory ended in a lockout after five tries), and an
    /// envelope asking Argon2id for more than libsodium's SENSITIVE limits is refused before an
    /// attempt is counted (4 294 967 295 passes held `unlock` at full CPU).
    @Test func aDerivationThatCannotRunCostsNoAttempt() throws {
        let (server, ostack) = try signedIn()
        defer {
            withExtendedLifetime(server) {}
            _ = try? ostack.run(["agent", "stop"])
        }
        try setPIN(ostack)
        #expect(try ostack.run(["lock"]).status == 0)
        let found = try runProcess(executable: "/usr/bin/find", arguments: [ostack.home.path, "-name", "pin.env"])
        let envelope = try #require(found.stdout.split(separator: "\n").first.map(String.init))
        _ = try runProcess(executable: "/bin/cp", arguments: [envelope, envelope + ".kept"])
        func edit(_ field: String, _ value: UInt64) throws {
            let script =
                "import json,sys;p=sys.argv[1];e=json.load(open(p));e['kdf'][sys.argv[2]]=int(sys.argv[3]);json.dump(e,open(p,'w'))"
            _ = try runProcess(
                executable: "/usr/bin/python3", arguments: ["-c", script, envelope, field, String(value)])
        }
        // 1 GiB asked, about 900 MB of address space allowed: six tries, each refused, none counted.
        try edit("memLimit", 1 << 30)
        for _ in 0..<6 {
            let short = try runProcess(
                executable: "/bin/sh",
                arguments: ["-c", "ulimit -v 900000; exec \"$0\" unlock --pin-stdin", OStackBinary.path],
                environment: ostack.baseEnvironment, stdin: Array("7319\n".utf8))
            #expect(short.status == 10 && short.stderr.contains("Not enough memory to unlock"), "\(short.stderr)")
            #expect(short.stderr.contains("The attempt was not counted."))
        }
        try edit("opsLimit", 4_294_967_295)
        let costly = try ostack.run(["unlock", "--pin-stdin"], stdin: "7319\n", timeout: 20)
        #expect(
            costly.status == 10 && costly.stderr.contains("format this version does not understand"), "\(costly.stderr)"
        )
        _ = try runProcess(executable: "/bin/mv", arguments: [envelope + ".kept", envelope])
        let wrong = try ostack.run(["unlock", "--pin-stdin"], stdin: "0000\n")
        #expect(wrong.stderr.contains("4 attempts left"), "\(wrong.stderr)")  // only this one counted
        #expect(try ostack.run(["unlock", "--pin-stdin"], stdin: "7319\n").status == 0)
    }

    /// `audit --all` and `audit verify --all` with one account locked: the others and the global
    /// trail are listed and checked (one locked account made both fail outright, so a nightly
    /// `audit verify --all` could not see tampering elsewhere); the locked one is named as not
    /// checked, and the command exits 4 (`locked`; 1 if a checked trail were broken).
    @Test func oneLockedAccountDoesNotHideTheOthersTrails() throws {
        let (server, ostack) = try signedIn()
        defer {
            withExtendedLifetime(server) {}
            _ = try? ostack.run(["agent", "stop"])
        }
        #expect(
            try ostack.login(server.url, "bob@example.com", "bob-pass", extra: ["--alias", "bob", "--no-switch"]).status
                == 0)
        try setPIN(ostack)
        #expect(try ostack.run(["lock"]).status == 0)
        let verify = try ostack.run(["audit", "verify", "--all", "--json"])
        #expect(verify.status == 4, "\(verify.stderr)")
        #expect(verify.stdout.contains(#""id":"global","intact":true"#), "\(verify.stdout)")
        #expect(verify.stdout.contains("usr_bob") && verify.stdout.contains(#""reason":"locked""#), "\(verify.stdout)")
        let human = try ostack.run(["audit", "verify", "--all"])
        #expect(human.stdout.contains("usr_alice: not checked (locked)"), "\(human.stdout)")
        let listed = try ostack.run(["audit", "--all", "--json"])
        #expect(listed.status == 4 && listed.stdout.contains(#""alias":"bob""#), "\(listed.stdout) \(listed.stderr)")
    }

    /// `doctor` on the PIN's envelopes: a missing recovery envelope is a failure (all was `ok`, while
    /// a lockout would then leave the data unreadable); a missing pin.env is named as such (it was
    /// a "stray pin-ring" with `logout` as the fix); a lockout's fix is the recovery key (it said
    /// `unlock`, which cannot work then).
    @Test func doctorNamesWhatIsWrongWithThePINsEnvelopes() throws {
        let (server, ostack) = try signedIn()
        defer {
            withExtendedLifetime(server) {}
            _ = try? ostack.run(["agent", "stop"])
        }
        try setPIN(ostack)
        let found = try runProcess(executable: "/usr/bin/find", arguments: [ostack.home.path, "-name", "pin.env"])
        let pin = try #require(found.stdout.split(separator: "\n").first.map(String.init))
        let recovery = String(pin.dropLast("pin.env".count)) + "recovery.env"
        func doctor() throws -> ProcessResult { try ostack.run(["doctor", "work"]) }
        #expect(try doctor().status == 0)
        _ = try runProcess(executable: "/bin/mv", arguments: [recovery, recovery + ".kept"])
        let noRecovery = try doctor()
        #expect(
            noRecovery.status != 0 && noRecovery.stdout.contains("recovery envelope (recovery.env) is missing"),
            "\(noRecovery.stdout)")
        _ = try runProcess(executable: "/bin/mv", arguments: [recovery + ".kept", recovery])
        #expect(try ostack.run(["lock"]).status == 0)
        _ = try runProcess(executable: "/bin/mv", arguments: [pin, pin + ".kept"])
        let noPIN = try doctor()
        #expect(noPIN.stdout.contains("The PIN envelope (pin.env) is missing"), "\(noPIN.stdout)")
        #expect(!noPIN.stdout.contains("Unexpected keyring item"), "\(noPIN.stdout)")
        // And `unlock` says so, instead of "Too many wrong PINs".
        let unlock = try ostack.run(["unlock", "--pin-stdin"], stdin: "7319\n")
        #expect(
            unlock.status == 10 && unlock.stderr.contains("The PIN envelope (pin.env) of account work is missing"),
            "\(unlock.stderr)")
        _ = try runProcess(executable: "/bin/mv", arguments: [pin + ".kept", pin])
        for _ in 0..<5 { _ = try ostack.run(["unlock", "--pin-stdin"], stdin: "0000\n") }
        #expect(try ostack.run(["unlock", "--pin-stdin"], stdin: "7319\n").stderr.contains("Too many wrong PINs"))
        let lockedOut = try doctor()
        #expect(lockedOut.stdout.contains("The PIN is locked out"), "\(lockedOut.stdout)")
        #expect(lockedOut.stdout.contains("`ostack unlock work --recovery-key`"), "\(lockedOut.stdout)")
    }

    @Test func changeAndRemove() throws {
        let (server, ostack) = try signedIn()
        try setPIN(ostack)
        let found = try runProcess(executable: "/usr/bin/find", arguments: [ostack.home.path, "-name", "pin.env"])
        let envelope = try #require(found.stdout.split(separator: "\n").first.map(String.init))
        _ = try runProcess(executable: "/bin/cp", arguments: ["-p", envelope, envelope + ".before-change"])
        let change = try ostack.run(["pin", "change", "--pin-stdin"], stdin: "7319\n9753\n", environment: Self.fast)
        #expect(change.status == 0, "\(change.stderr)")
        #expect(try ostack.run(["lock"]).status == 0)
        #expect(try ostack.run(["unlock", "--pin-stdin"], stdin: "7319\n").status == 4)
        // The change replaced the ring key too: the envelope from before it, put back (a backup, a
        // copy), does not open with the old PIN (it did while the ring key stayed).
        _ = try runProcess(executable: "/bin/cp", arguments: ["-p", envelope, envelope + ".after-change"])
        _ = try runProcess(executable: "/bin/cp", arguments: ["-p", envelope + ".before-change", envelope])
        let old = try ostack.run(["unlock", "--pin-stdin"], stdin: "7319\n")
        #expect(old.status == 4 && old.stderr.contains("Incorrect PIN"), "\(old.stderr)")
        _ = try runProcess(executable: "/bin/mv", arguments: [envelope + ".after-change", envelope])
        #expect(try ostack.run(["unlock", "--pin-stdin"], stdin: "9753\n").status == 0)
        // Wrong PINs spent through `pin change` and `pin remove` are in the trail (AUD-5), as
        // `unlock`'s are: they were counted but left no trace.
        #expect(
            try ostack.run(["pin", "change", "--pin-stdin"], stdin: "0000\n2468\n", environment: Self.fast).status == 4)
        #expect(try ostack.run(["pin", "remove", "--pin-stdin"], stdin: "0000\n").status == 4)
        let guesses = try ostack.run(["audit", "--event", "pin", "--json"]).stdout
        for event in ["pin.change", "pin.remove"] {
            #expect(
                guesses.contains(#""details":{"reason":"wrong-pin"},"event":"\#(event)","outcome":"failed""#),
                "\(guesses)")
        }
        #expect(try ostack.run(["pin", "remove", "--pin-stdin"], stdin: "9753\n").status == 0)
        let items = try ostack.keyringItems(namespace: namespace(ostack, server))
        #expect(items.contains("kind = db-key") && !items.contains("kind = pin-ring"))
        #expect(try ostack.run(["lock"]).status == 9)  // no PIN: nothing to lock
        #expect(try ostack.run(["auth", "refresh"]).status == 0)
    }

    /// Issue 16: `unlock` of an account without a PIN says so before asking for one.
    @Test func unlockWithoutAPINSaysSoBeforeAsking() throws {
        let (server, ostack) = try signedIn()
        defer { withExtendedLifetime(server) {} }
        let unlock = try ostack.run(["unlock", "--pin-stdin"], stdin: "")
        #expect(unlock.status == 9, "\(unlock.stderr)")
        #expect(unlock.stderr.contains("has no PIN"))
        #expect(try ostack.run(["status"]).stdout.contains("no PIN"))
    }

    /// PIN-7: a passphrase typed through another input method, terminal or password manager, which
    /// sends `é` as `e` + U+0301, is the same PIN (it was "Incorrect PIN", one step nearer the
    /// lockout's erasure of the PIN path).
    @Test func aPassphraseInAnotherNormalisationFormIsTheSamePIN() throws {
        let (server, ostack) = try signedIn()
        defer { withExtendedLifetime(server) {} }
        let composed = "caf\u{E9} au lait", decomposed = "cafe\u{301} au lait"
        _ = try setPIN(ostack, composed)
        #expect(try ostack.run(["lock"]).status == 0)
        let unlock = try ostack.run(["unlock", "--pin-stdin"], stdin: decomposed + "\n")
        #expect(unlock.status == 0, "\(unlock.stderr)")
        // Set in the decomposed form, typed in the composed one.
        let change = try ostack.run(
            ["pin", "change", "--pin-stdin"], stdin: composed + "\n" + "cre\u{300}me bru\u{302}le\u{301}e\n",
            environment: Self.fast)
        #expect(change.status == 0, "\(change.stderr)")
        #expect(try ostack.run(["lock"]).status == 0)
        let again = try ostack.run(["unlock", "--pin-stdin"], stdin: "cr\u{E8}me br\u{FB}l\u{E9}e\n")
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try ostack.run(["records", "list", "task", "--local"]).status == 0)
    }

    @Test func trivialPINsAreRefused() throws {
        let (server, ostack) = try signedIn()
        defer {
            withExtendedLifetime(server) {}  // the dev server lives as long as the test
            _ = try? ostack.run(["agent", "stop"])
        }
        let result = try ostack.run(["pin", "set", "--pin-stdin"], stdin: "1234\n", environment: Self.fast)
        #expect(result.status == 9)
        #expect(result.stderr.contains("too easy"))
    }

    /// An agent socket path no agent could listen on — longer than a Unix socket address, or taken
    /// by a directory — is refused before a PIN is asked for, staged or tried. (Before: `pin set` with
    /// a deep home ended in "Something went wrong" after staging; `unlock` with a directory there
    /// counted the attempt first.)
    @Test func anAgentSocketPathThatCannotWorkIsRefusedBeforeAnyPIN() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        let deep = ostack.home.appending(String(repeating: "d", count: 100))
        try #require(mkdir(deep, 0o700) == 0)
        let inDeep: [String: String?] = ["OSTACK_HOME": deep, "OSTACK_PIN_KDF": "interactive"]
        let login = try ostack.run(
            ["login", "--server", server.url, "--email", "alice@example.com", "--password-stdin"],
            stdin: "alice-pass\n", environment: inDeep)
        try #require(login.status == 0, "\(login.stderr)")
        let long = try ostack.run(["pin", "set", "--pin-stdin"], stdin: "7319\n", environment: inDeep)
        #expect(long.status == 9, "\(long.stderr)")
        #expect(long.stderr.contains("longer than a Unix socket allows"), "\(long.stderr)")
        #expect(try ostack.run(["status", "--json"], environment: inDeep).stdout.contains("\"hasPin\":false"))
        let doctor = try ostack.run(["doctor"], environment: inDeep)
        #expect(doctor.status == 1 && doctor.stdout.contains("longer than a Unix socket allows"), "\(doctor.stdout)")

        let (_, near) = (server, OStackRunner())
        #expect(
            try near.login(server.url, "alice@example.com", "alice-pass", extra: ["--alias", "work"]).status == 0)
        let run = near.home.appending("run")
        let socket = run + "/agent-\(near.keyringPrefix).sock"
        try #require(mkdir(run, 0o700) == 0 && mkdir(socket, 0o700) == 0)
        let blocked = try near.run(["pin", "set", "--pin-stdin"], stdin: "7319\n", environment: Self.fast)
        #expect(blocked.status == 10 && blocked.stderr.contains("is at \(socket)"), "\(blocked.stderr)")
        #expect(try near.run(["status", "--json"]).stdout.contains("\"hasPin\":false"))
        try #require(rmdir(socket) == 0)
        _ = try setPIN(near)
        defer { _ = try? near.run(["agent", "stop"]) }
        #expect(try near.run(["lock"]).status == 0)
        #expect(try near.run(["agent", "stop"]).status == 0)
        try #require(mkdir(socket, 0o700) == 0)
        let unlock = try near.run(["unlock", "--pin-stdin"], stdin: "0000\n", environment: Self.fast)
        #expect(unlock.status == 10, "\(unlock.stderr)")
        // `pin change` and the recovery key are refused before anything is spent or changed too
        // (the change used to take effect and then fail).
        let change = try near.run(
            ["pin", "change", "--pin-stdin"], stdin: "7319\n482913\n482913\n", environment: Self.fast)
        #expect(change.status == 10, "\(change.stderr)")
        let recovery = try near.run(["unlock", "--recovery-key-stdin"], stdin: "AAAA-BBBB\n", environment: Self.fast)
        #expect(recovery.status == 10, "\(recovery.stderr)")
        try #require(rmdir(socket) == 0)
        // That attempt was never made: the first wrong PIN still leaves four.
        let wrong = try near.run(["unlock", "--pin-stdin"], stdin: "0000\n", environment: Self.fast)
        #expect(wrong.status == 4 && wrong.stderr.contains("4 attempts left"), "\(wrong.stderr)")
        // The PIN is still the old one.
        #expect(try near.run(["unlock", "--pin-stdin"], stdin: "7319\n", environment: Self.fast).status == 0)
    }

    /// A shorter `agent.idle-timeout` or `agent.max-lifetime` applies at once to an account already
    /// unlocked (it kept the limits of its unlock: up to 15 minutes more for a user who shortened the
    /// timeout before walking away); a longer one waits for the next unlock.
    @Test func aShorterAgentTimeoutAppliesToUnlockedAccounts() throws {
        let (server, ostack) = try signedIn()
        defer {
            withExtendedLifetime(server) {}
            _ = try? ostack.run(["agent", "stop"])
        }
        try setPIN(ostack)
        func unlocked() throws -> Bool { try ostack.run(["status", "--json"]).stdout.contains("\"locked\":false") }
        #expect(try unlocked())
        #expect(try ostack.run(["config", "set", "agent.max-lifetime", "24h"]).status == 0)
        #expect(try ostack.run(["agent", "status", "--json"]).stdout.contains("\"lifetimeSecondsLeft\":43"))
        #expect(try ostack.run(["config", "set", "agent.idle-timeout", "1s"]).status == 0)
        usleep(2_500_000)
        #expect(try !unlocked(), "still unlocked after a 1s idle timeout")
    }

    @Test func agentForgetsAfterIdleTimeoutAndIsPrivate() throws {
        let (server, ostack) = try signedIn()
        defer {
            withExtendedLifetime(server) {}  // the dev server lives as long as the test
            _ = try? ostack.run(["agent", "stop"])
        }
        // The timings below hold on a loaded machine: the key is put between `putFrom` and
        // `putBy`; the four commands start 2 s after it, so a reset by any of them would keep the
        // key until at least `putBy` + 8 s, while without one it is gone by `putBy` + 6 s.
        #expect(try ostack.run(["config", "set", "agent.idle-timeout", "6s"]).status == 0)
        let clock = ContinuousClock()
        func sleep(until deadline: ContinuousClock.Instant) {
            let left = clock.now.duration(to: deadline)
            guard left > .zero else { return }
            let (seconds, attoseconds) = left.components
            usleep(UInt32(seconds) * 1_000_000 + UInt32(attoseconds / 1_000_000_000_000))
        }
        let putFrom = clock.now
        try setPIN(ostack)
        let putBy = clock.now
        let status = try ostack.run(["agent", "status", "--json"])
        #expect(status.stdout.contains("\"dumpable\":false"))
        let socket = ostack.home.appending("run/agent-\(ostack.keyringPrefix).sock")
        let modes = try runProcess(
            executable: "/usr/bin/stat", arguments: ["-c", "%a", socket, ostack.home.appending("run")])
        #expect(modes.stdout.split(separator: "\n") == ["600", "700"])
        // Another uid cannot talk to it.
        let other = try runProcess(
            executable: "/usr/bin/setpriv",
            arguments: [
                "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c",
                "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ntry:\n s.connect(sys.argv[1]); print('connected')\nexcept OSError as e: print('refused')",
                socket,
            ])
        #expect(other.stdout.contains("refused"), "\(other.stdout) \(other.stderr)")
        // `status`, `audit`, `audit verify` and `doctor` do not count as use; after the idle timeout
        // the key is gone. (Each of the last three used to reset the agent's idle timer.)
        sleep(until: putBy + .seconds(2))
        // Whatever ends before `putFrom` + 6 s saw the key held; only a machine too slow to get there
        // in time (a slow `pin set`, four slow commands) leaves nothing to check.
        func held() -> Bool { clock.now < putFrom + .seconds(6) }
        let unlocked = try ostack.run(["status", "--json"]).stdout
        if held() { #expect(unlocked.contains("\"locked\":false"), "\(unlocked)") }
        #expect(try ostack.run(["audit"]).status == 0)
        #expect(try ostack.run(["audit", "verify"]).status == 0)
        let doctor = try ostack.run(["doctor", "--json"])
        if held() { #expect(doctor.stdout.contains("The agent is running."), "\(doctor.stdout)") }
        sleep(until: putBy + .milliseconds(6_750))
        #expect(try ostack.run(["status", "--json"]).stdout.contains("\"locked\":true"))
        #expect(try ostack.run(["auth", "refresh"]).status == 4)
    }

    /// A command started while `pin set` is between staging and commit (where its recovery key is
    /// shown) leaves the staged set alone: the set completes, the PIN and the recovery key both open
    /// the account, and no keyring item is missing.
    @Test func aCommandDuringPinSetDoesNotUndoIt() throws {
        let (server, ostack) = try signedIn()
        let setting = try pinSetPausedAfterStaging(ostack)
        _ = try ostack.run(["records", "list", "task", "--local"])
        let status = try setting.waitForExit(timeout: 60)
        try #require(status == 0, "\(setting.stderrText())")
        let fields = setting.remainingStdout().split(separator: "\"")
        try #require(fields.count > 3, "\(fields)")
        let recovery = String(fields[3])
        let items = try ostack.keyringItems(namespace: namespace(ostack, server))
        #expect(items.contains("kind = pin-ring") && items.contains("kind = recovery-ring"), "\(items)")
        _ = try? ostack.run(["agent", "stop"])
        #expect(try ostack.run(["unlock", "--pin-stdin"], stdin: "7319\n").status == 0)
        _ = try? ostack.run(["agent", "stop"])
        // A wrong recovery key is named as such (not "Incorrect PIN").
        let wrongKey = String(recovery.map { $0 == "-" ? "-" : ($0 == "A" ? "B" : "A") })
        let refused = try ostack.run(["unlock", "--recovery-key-stdin"], stdin: wrongKey + "\n")
        #expect(refused.status == 4 && refused.stderr.contains("Incorrect recovery key."), "\(refused.stderr)")
        #expect(try ostack.run(["unlock", "--recovery-key-stdin"], stdin: recovery + "\n").status == 0)
        _ = try? ostack.run(["agent", "stop"])
    }

    /// Parallel unlocks with the right PIN take turns: none is counted as a failure, the PIN is
    /// never locked out.
    @Test func parallelUnlocksWithTheRightPINAllSucceed() throws {
        let (_, ostack) = try signedIn()
        try setPIN(ostack)
        _ = try? ostack.run(["agent", "stop"])
        let unlocks = try (0..<6).map { _ in try ostack.start(["unlock", "--pin-stdin"], stdin: "7319\n") }
        for unlock in unlocks {
            #expect(try unlock.waitForExit(timeout: 120) == 0, "\(unlock.stderrText())")
        }
        let status = try ostack.run(["status", "--json"])
        #expect(!status.stdout.contains("locked-out"), "\(status.stdout)")
        _ = try? ostack.run(["agent", "stop"])
        #expect(try ostack.run(["unlock", "--pin-stdin"], stdin: "7319\n").status == 0)
        _ = try? ostack.run(["agent", "stop"])
    }

    /// `accounts remove` waits for a `pin set` between staging and commit: the set commits into the
    /// account it staged, then the removal takes it whole — nothing is committed into a removed
    /// account, and no directory of it is left behind.
    @Test func aRemovalWaitsForAPinSet() throws {
        let (_, ostack) = try signedIn()
        let setting = try pinSetPausedAfterStaging(ostack)
        let remove = try ostack.run(["accounts", "remove", "work", "--force", "--yes"])
        #expect(try setting.waitForExit(timeout: 60) == 0, "\(setting.stderrText())")
        #expect(remove.status == 0, "\(remove.stderr)")
        #expect(try ostack.run(["accounts", "list", "--json"]).stdout.contains("\"alias\":\"work\"") == false)
        let left = try runProcess(
            executable: "/usr/bin/find", arguments: [ostack.home.path + "/data/accounts", "-mindepth", "1"])
        #expect(left.stdout.isEmpty, "left behind: \(left.stdout)")
        _ = try? ostack.run(["agent", "stop"])
    }
}
