import Glibc
import OStackTestSupport
import PlatformKit
import Testing

/// Issue 15, local hardening (docs/security.md#lock-3, #pin-3, #fs-2, #aud-6): another local user
/// cannot impersonate the agent, the PIN limit holds under parallel guesses, a lost database is
/// never silently recreated, parallel writers never fail, planted symbolic links are refused and
/// forged audit lines are not chained. Against the built binary, the dev server and gnome-keyring.
@Suite(.serialized) struct LocalHardeningEndToEndTests {
    static let fast: [String: String?] = ["OSTACK_PIN_KDF": "interactive"]
    /// The uid/gid of `nobody`: the other local user of these tests.
    static let otherUser = "65534"

    func signedIn(environment: [String: String?] = [:]) throws -> (DevServerProcess, OStackRunner) {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        let login = try ostack.login(
            server.url, "alice@example.com", "alice-pass", extra: ["--alias", "work"], environment: environment)
        try #require(login.status == 0, "\(login.stderr)")
        return (server, ostack)
    }

    /// Signed in, PIN 7319 set, the agent stopped (the account is locked).
    func signedInWithPIN() throws -> (DevServerProcess, OStackRunner) {
        let (server, ostack) = try signedIn()
        #expect(try ostack.run(["pin", "set", "--pin-stdin"], stdin: "7319\n", environment: Self.fast).status == 0)
        #expect(try ostack.run(["agent", "stop"]).status == 0)
        return (server, ostack)
    }

    func accountDirectory(_ ostack: OStackRunner) throws -> String {
        let listing = try runProcess(executable: "/usr/bin/find", arguments: [ostack.home.path, "-name", "data.db"])
        let path = try #require(listing.stdout.split(separator: "\n").first.map(String.init))
        return String(path.dropLast("/data.db".count))
    }

    /// A Unix socket listener run as `nobody` that prints "received <n>" for every connection that
    /// sent it bytes (a fake agent of another user). It prints "ready" once listening.
    func fakeAgent(at path: String) throws -> ChildProcess {
        let script = """
            import os, socket, sys
            s = socket.socket(socket.AF_UNIX)
            s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o777); s.listen(16)
            print("ready", flush=True)
            while True:
                c, _ = s.accept(); c.settimeout(2)
                try:
                    d = c.recv(65536)
                except Exception:
                    d = b""
                if d:
                    print("received", len(d), flush=True)
                c.close()
            """
        let child = try ChildProcess(
            executable: "/usr/bin/setpriv",
            arguments: [
                "--reuid=\(Self.otherUser)", "--regid=\(Self.otherUser)", "--clear-groups", "/usr/bin/python3", "-c",
                script, path,
            ])
        let ready = try child.readLine(timeout: 20)
        try #require(ready == "ready", "fake agent: \(child.stderrText())")
        return child
    }

    func chownToOtherUser(_ path: String) throws {
        let result = try runProcess(executable: "/bin/chown", arguments: ["\(Self.otherUser):\(Self.otherUser)", path])
        try #require(result.status == 0, "\(result.stderr)")
    }

    // MARK: 1. The agent cannot be impersonated

    /// Without XDG_RUNTIME_DIR the agent's directory is `/tmp/ostack-<uid>`; another user can make it
    /// first and serve a fake agent in it. ostack refuses the directory and sends nothing.
    @Test func aFallbackRuntimeDirectoryOfAnotherUserGetsNothing() throws {
        let fallback = "/tmp/ostack-\(getuid())"
        let aside = fallback + ".aside-\(UInt32.random(in: 0...UInt32.max))"
        let hadOne = SecureFileSystem.exists(fallback)
        if hadOne { try #require(rename(fallback, aside) == 0) }
        defer {
            try? SecureFileSystem.removeTree(fallback)
            if hadOne { rename(aside, fallback) }
        }
        let home = TemporaryDirectory(prefix: "ostack-fallback-home")
        var environment: [String: String?] = Self.fast
        for name in ["OSTACK_HOME", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"] {
            environment[name] = .some(nil)
        }
        environment["HOME"] = home.path
        let (server, ostack) = try signedIn(environment: environment)
        defer { withExtendedLifetime(server) {} }
        let set = try ostack.run(["pin", "set", "--pin-stdin"], stdin: "7319\n", environment: environment)
        try #require(set.status == 0, "\(set.stderr)")
        #expect(SecureFileSystem.exists(fallback + "/agent-\(ostack.keyringPrefix).sock"))
        #expect(try ostack.run(["agent", "stop"], environment: environment).status == 0)
        try SecureFileSystem.removeTree(fallback)

        // Another user makes the directory first (0700, its own) and listens in it.
        try #require(mkdir(fallback, 0o700) == 0)
        try chownToOtherUser(fallback)
        let fake = try fakeAgent(at: fallback + "/agent-\(ostack.keyringPrefix).sock")
        defer { fake.kill() }
        let unlock = try ostack.run(["unlock", "--pin-stdin"], stdin: "7319\n", environment: environment)
        #expect(unlock.status == 10, "\(unlock.stderr)")
        #expect(unlock.stderr.contains("Refusing to use the agent's runtime directory"), "\(unlock.stderr)")
        #expect(try ostack.run(["auth", "refresh"], environment: environment).status == 4)  // still locked
        fake.kill()
        #expect(!fake.remainingStdout().contains("received"))

        // With the directory gone, unlock makes its own private one (no PIN attempt was spent).
        try SecureFileSystem.removeTree(fallback)
        let again = try ostack.run(["unlock", "--pin-stdin"], stdin: "7319\n", environment: environment)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(SecureFileSystem.mode(of: fallback) == 0o700)
        _ = try ostack.run(["agent", "stop"], environment: environment)
    }

    /// A socket in our own runtime directory served by another uid: the client checks the peer
    /// (SO_PEERCRED) before it sends a byte.
    @Test func anAgentSocketServedByAnotherUserGetsNothing() throws {
        let (server, ostack) = try signedInWithPIN()
        defer {
            withExtendedLifetime(server) {}
            _ = try? ostack.run(["agent", "stop"])
        }
        let run = ostack.home.appending("run")
        #expect(SecureFileSystem.mode(of: run) == 0o700)
        // The other user's listener is bound in its own directory, then its socket is moved into ours.
        let theirs = TemporaryDirectory(prefix: "ostack-other-user")
        try chownToOtherUser(theirs.path)
        let fake = try fakeAgent(at: theirs.appending("agent.sock"))
        defer { fake.kill() }
        let socket = run + "/agent-\(ostack.keyringPrefix).sock"
        try? SecureFileSystem.removeFile(socket)
        try #require(rename(theirs.appending("agent.sock"), socket) == 0)
        let unlock = try ostack.run(["unlock", "--pin-stdin"], stdin: "7319\n")
        #expect(unlock.status == 10, "\(unlock.stderr)")
        #expect(unlock.stderr.contains("Refusing to use the agent socket"), "\(unlock.stderr)")
        fake.kill()
        #expect(!fake.remainingStdout().contains("received"))
    }

    /// A directory where the agent's socket belongs: the unlock says what is in the way and that it
    /// is not removed, instead of "Something went wrong".
    @Test func aDirectoryAtTheAgentSocketIsNamed() throws {
        let (server, ostack) = try signedInWithPIN()
        defer {
            withExtendedLifetime(server) {}
            _ = try? ostack.run(["agent", "stop"])
        }
        let socket = ostack.home.appending("run") + "/agent-\(ostack.keyringPrefix).sock"
        try? SecureFileSystem.removeFile(socket)
        try #require(mkdir(socket, 0o700) == 0)
        let unlock = try ostack.run(["unlock", "--pin-stdin"], stdin: "7319\n")
        #expect(unlock.status == 10, "\(unlock.stderr)")
        #expect(unlock.stderr.contains("the agent's socket path") && !unlock.stderr.contains("Something went wrong"))
        #expect(SecureFileSystem.isDirectory(socket, followLinks: false))
        rmdir(socket)
    }

    // MARK: 2. The PIN limit holds under races

    /// 12 wrong PINs at once: exactly 5 are counted (4 "incorrect", the fifth locks out) and the
    /// other 7 are refused before Argon2id runs; the right PIN no longer works afterwards.
    @Test func parallelWrongPINsAreCountedOneByOne() throws {
        let (server, ostack) = try signedIn()
        defer {
            withExtendedLifetime(server) {}
            _ = try? ostack.run(["agent", "stop"])
        }
        #expect(try ostack.run(["pin", "set", "--pin-stdin"], stdin: "7319\n", environment: Self.fast).status == 0)
        #expect(try ostack.run(["lock"]).status == 0)
        let children = try (0..<12).map { _ in try ostack.start(["unlock", "--pin-stdin"], stdin: "2468\n") }
        var messages: [String] = []
        for child in children {
            #expect(try child.waitForExit(timeout: 120) == 4)
            messages.append(child.stderrText())
        }
        let incorrect = messages.filter { $0.contains("Incorrect PIN.") }
        #expect(incorrect.count == 4, "\(messages)")
        for left in ["4 attempts left", "3 attempts left", "2 attempts left", "1 attempt left"] {
            #expect(incorrect.filter { $0.contains(left) }.count == 1, "\(messages)")
        }
        #expect(messages.filter { $0.contains("Too many wrong PINs") }.count == 8, "\(messages)")
        let right = try ostack.run(["unlock", "--pin-stdin"], stdin: "7319\n")
        #expect(right.status == 4 && right.stderr.contains("Too many wrong PINs"))
    }

    /// A correct PIN resets the counter durably before `unlock` returns: wrong, right, wrong, …
    /// always leaves 4 attempts.
    @Test func aCorrectPINResetsTheCounterBeforeUnlockReturns() throws {
        let (server, ostack) = try signedIn()
        defer {
            withExtendedLifetime(server) {}
            _ = try? ostack.run(["agent", "stop"])
        }
        #expect(try ostack.run(["pin", "set", "--pin-stdin"], stdin: "7319\n", environment: Self.fast).status == 0)
        for _ in 0..<4 {
            #expect(try ostack.run(["lock"]).status == 0)
            let wrong = try ostack.run(["unlock", "--pin-stdin"], stdin: "0000\n")
            #expect(wrong.status == 4 && wrong.stderr.contains("4 attempts left"), "\(wrong.stderr)")
            #expect(try ostack.run(["unlock", "--pin-stdin"], stdin: "7319\n").status == 0)
        }
    }

    // MARK: 3. A lost database is an error, never silently recreated

    @Test func aMissingOrEmptyDatabaseIsReportedAndNeverRecreated() throws {
        let (server, ostack) = try signedIn()
        defer { withExtendedLifetime(server) {} }
        #expect(try ostack.run(["records", "create", "task", "--set", "title=Queued", "--offline"]).status == 0)
        let database = try accountDirectory(ostack) + "/data.db"
        for suffix in ["-wal", "-shm"] { try SecureFileSystem.removeFile(database + suffix) }
        try #require(truncate(database, 0) == 0)
        let sync = try ostack.run(["sync"])
        #expect(sync.status == 10, "\(sync.stdout) \(sync.stderr)")
        #expect(sync.stderr.contains("The local database of account work is missing or empty"), "\(sync.stderr)")
        #expect(SecureFileSystem.size(of: database) == 0)
        try SecureFileSystem.removeFile(database)
        let list = try ostack.run(["queue", "list"])
        #expect(list.status == 10 && list.stderr.contains("missing or empty"), "\(list.stderr)")
        // doctor fails on it, with the fix (it used to warn "could not check" and exit 0).
        let doctor = try ostack.run(["doctor"])
        #expect(doctor.status == 1, "\(doctor.stdout)")
        #expect(doctor.stdout.contains("The database is missing or empty"), "\(doctor.stdout)")
        #expect(doctor.stdout.contains("ostack login --account work"), "\(doctor.stdout)")
        #expect(!SecureFileSystem.exists(database))
        // The fix it names: signing in again starts a new local database.
        #expect(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        #expect(try ostack.run(["queue", "list"]).status == 0)
    }

    /// A database damaged part-way (truncated inside its pages) is reported as unreadable and named
    /// by account — by commands and by `doctor`, which fails — not as a disk or permission problem.
    @Test func aDamagedDatabaseIsReportedAsUnreadable() throws {
        let (server, ostack) = try signedIn()
        defer { withExtendedLifetime(server) {} }
        _ = try server.control("POST", "seed", #"{"object":"task","count":2000}"#)
        #expect(try ostack.run(["sync", "track", "task"]).status == 0)
        #expect(try ostack.run(["sync"]).status == 0)
        let database = try accountDirectory(ostack) + "/data.db"
        let size = try #require(SecureFileSystem.size(of: database))
        try #require(truncate(database, off_t(size / 2)) == 0)
        let list = try ostack.run(["records", "list", "task", "--local", "--all"])
        #expect(list.status == 10, "\(list.stderr)")
        #expect(list.stderr.contains("account work"), "\(list.stderr)")
        #expect(!list.stderr.contains("disk space"), "\(list.stderr)")
        let doctor = try ostack.run(["doctor"])
        #expect(doctor.status != 0, "\(doctor.stdout)")
        #expect(doctor.stdout.contains("does not open with its key"), "\(doctor.stdout)")
        #expect(list.stderr.contains("accounts remove work --force"), "\(list.stderr)")
        // Signing in again to it fails on its database; that interrupted sign-in does not stop the
        // commands of another account.
        #expect(try ostack.login(server.url, "bob@example.com", "bob-pass", extra: ["--alias", "bob"]).status == 0)
        #expect(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 10)
        let other = try ostack.run(["records", "list", "task", "--local", "--account", "bob"])
        #expect(other.status == 0, "\(other.stderr)")
    }

    /// A journal damaged from outside (they are written atomically) stops no other account: an
    /// unreadable PIN journal is left alone and named by `doctor`; an unreadable login journal is set
    /// aside (its sign-in cannot be finished) and the guest items go.
    @Test func aDamagedJournalStopsNoOtherAccount() throws {
        let (server, ostack) = try signedIn()
        defer { withExtendedLifetime(server) {} }
        #expect(try ostack.login(server.url, "bob@example.com", "bob-pass", extra: ["--alias", "bob"]).status == 0)
        let someAccountDirectory = try runProcess(
            executable: "/bin/sh",
            arguments: ["-c", "dirname \"$(find '\(ostack.home.path)' -name data.db | head -1)\""]
        ).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        try #require(creat(someAccountDirectory + "/pin-journal.json", 0o600) >= 0)
        for account in ["work", "bob"] {
            let list = try ostack.run(["records", "list", "task", "--local", "--account", account])
            #expect(list.status == 0, "\(account): \(list.stderr)")
        }
        let doctor = try ostack.run(["doctor"])
        #expect(doctor.status != 0)
        #expect(doctor.stdout.contains("The journal of an interrupted PIN change is damaged"), "\(doctor.stdout)")
        try SecureFileSystem.removeFile(someAccountDirectory + "/pin-journal.json")

        let loginJournal = ostack.home.path + "/state/login-journal.json"
        try #require(creat(loginJournal, 0o600) >= 0)
        let list = try ostack.run(["records", "list", "task", "--local", "--account", "bob"])
        #expect(list.status == 0, "\(list.stderr)")
        #expect(!SecureFileSystem.exists(loginJournal) && SecureFileSystem.exists(loginJournal + ".damaged"))
    }

    /// A home that is not this user's private one — another user's (`sudo -E`, a shared
    /// OSTACK_HOME) or one opened to others — is refused before any account file is read or written.
    @Test func anotherUsersHomeIsRefused() throws {
        let (server, ostack) = try signedIn()
        defer { withExtendedLifetime(server) {} }
        let state = ostack.home.path + "/state"
        _ = try runProcess(executable: "/bin/chown", arguments: ["-R", Self.otherUser, state])
        defer { _ = try? runProcess(executable: "/bin/chown", arguments: ["-R", "\(geteuid())", state]) }
        let create = try ostack.run(["records", "create", "task", "--set", "title=Not here", "--offline"])
        #expect(create.status == 10, "\(create.stderr)")
        #expect(try ostack.run(["agent", "start"]).status == 10)
        // Commands that write only the registry or the configuration refuse it by name too.
        for command in [["config", "set", "sync.interval", "10m"], ["accounts", "rename", "work", "job"]] {
            let refused = try ostack.run(command)
            #expect(refused.status == 10 && refused.stderr.contains("Refusing to use"), "\(command): \(refused.stderr)")
        }
        #expect(!SecureFileSystem.exists(ostack.home.path + "/run/agent-\(ostack.keyringPrefix).sock"))
        #expect(create.stderr.contains("Refusing to use the state directory"), "\(create.stderr)")
        let owners = try runProcess(executable: "/usr/bin/find", arguments: [state, "!", "-user", Self.otherUser])
        #expect(owners.stdout.isEmpty, "files written into the other user's directory: \(owners.stdout)")
        _ = try runProcess(executable: "/bin/chown", arguments: ["-R", "\(geteuid())", state])

        // A data directory others can write to is refused; a configuration directory made by hand
        // with the usual 0755 is fine (it holds no secret).
        let data = ostack.home.path + "/data"
        chmod(data, 0o777)
        let opened = try ostack.run(["records", "list", "task", "--local"])
        #expect(opened.status == 10 && opened.stderr.contains("the data directory"), "\(opened.stderr)")
        chmod(data, 0o700)
        chmod(ostack.home.path + "/config", 0o755)
        #expect(try ostack.run(["records", "list", "task", "--local"]).status == 0)
        chmod(ostack.home.path + "/config", 0o700)
    }

    /// A write whose push cannot start (its sync lock file replaced by a directory) is saved and
    /// queued, and says so: a script that retried a "failed" create would otherwise make it twice.
    @Test func aWriteWhosePushCannotStartSaysItIsQueued() throws {
        let (server, ostack) = try signedIn()
        defer { withExtendedLifetime(server) {} }
        let directoryName = String(try accountDirectory(ostack).split(separator: "/").last ?? "")
        let lock = ostack.home.path + "/state/locks/sync-\(directoryName).lock"
        try? SecureFileSystem.removeFile(lock)
        try #require(mkdir(lock, 0o700) == 0)
        let create = try ostack.run(["records", "create", "task", "--set", "title=Once"])
        #expect(create.status == 10, "\(create.stderr)")
        #expect(create.stderr.contains("saved and queued"), "\(create.stderr)")
        #expect(try ostack.run(["queue", "list", "--json"]).stdout.contains("\"operation\":\"create\""))
        rmdir(lock)
        #expect(try ostack.run(["sync"]).status == 0)
        let count = try server.control("GET", "record?object=task&id=")
        #expect(count.contains("\"count\":1"), "\(count)")
    }

    /// A registry or configuration that is not JSON is named as damaged, with what to do — not "in a
    /// format this version does not understand", which sends the user looking for another version.
    @Test func aDamagedRegistryOrConfigurationIsNamed() throws {
        let (server, ostack) = try signedIn()
        defer { withExtendedLifetime(server) {} }
        for (file, name) in [("/data/accounts.json", "account registry"), ("/config/config.json", "configuration")] {
            let path = ostack.home.path + file
            let saved = try #require(try SecureFileSystem.readFile(path))
            try SecureFileSystem.writeAtomically(Array("\u{0}garbage".utf8), to: path)
            let status = try ostack.run(["status"])
            #expect(status.status == 10, "\(status.stderr)")
            #expect(
                status.stderr.contains("The \(name)") && status.stderr.contains("it is damaged"), "\(status.stderr)")
            #expect(try SecureFileSystem.readFile(path) == Array("\u{0}garbage".utf8))  // nothing was changed
            try SecureFileSystem.writeAtomically(saved, to: path)
            // A link in its place (a dotfile manager's) is refused by name (FS-2), and so is a
            // directory; both were "Local storage failed. Check free disk space" on every command
            // (found by red team).
            for (place, remove) in [
                ({ symlink(path + ".real", path) }, { unlink(path) }), ({ mkdir(path, 0o700) }, { rmdir(path) }),
            ] as [(() -> Int32, () -> Int32)] {
                #expect(rename(path, path + ".real") == 0 && place() == 0)
                let refused = try ostack.run(["status"])
                #expect(
                    refused.status == 10 && refused.stderr.contains("Refusing to use")
                        && refused.stderr.contains(file.split(separator: "/").last.map(String.init) ?? "?"),
                    "\(refused.stderr)")
                #expect(remove() == 0 && rename(path + ".real", path) == 0)
            }
        }
        #expect(try ostack.run(["status"]).status == 0)
    }

    /// A registry entry whose data directory is not a name ostack makes — "..", "", another
    /// account's — is refused with the whole registry: `accounts remove` deletes nothing (before, it
    /// deleted the tree the name pointed at: every account's data, or the data directory itself),
    /// and the default account is not read from such an entry either.
    @Test func aHandEditedDataDirectoryDeletesNothing() throws {
        let (server, ostack) = try signedIn()
        defer { withExtendedLifetime(server) {} }
        let path = ostack.home.path + "/data/accounts.json"
        let saved = String(decoding: try #require(try SecureFileSystem.readFile(path)), as: UTF8.self)
        let directory = try #require(
            saved.firstRange(of: #""dataDirectory" : ""#).map { String(saved[$0.upperBound...].prefix { $0 != "\"" }) })
        let canary = ostack.home.path + "/data/accounts/" + directory + "/data.db"
        #expect(SecureFileSystem.exists(canary))
        for name in ["..", "", ".", "acct-0123456789ABCDEF"] {
            let edited = saved.replacingOccurrences(of: "\"\(directory)\"", with: "\"\(name)\"")
            try SecureFileSystem.writeAtomically(Array(edited.utf8), to: path)
            // Named, and as the default account (read through the registry's one-entry path).
            for arguments in [["accounts", "remove", "work", "--force", "--yes"], ["status"]] {
                let run = try ostack.run(arguments)
                #expect(run.status == 10, "\(name) \(arguments): \(run.status) \(run.stderr)")
                #expect(run.stderr.contains("it is damaged"), "\(name) \(arguments): \(run.stderr)")
            }
            #expect(SecureFileSystem.exists(canary), "\(name)")
            #expect(SecureFileSystem.exists(path), "\(name)")
        }
        try SecureFileSystem.writeAtomically(Array(saved.utf8), to: path)
        #expect(try ostack.run(["status"]).status == 0)
    }

    /// A setting's value is the user's text (or a hand-edited config.json's): `config get` and
    /// `config set` print it through the sanitiser, so an escape sequence in a path cannot retitle
    /// the terminal; `--json` keeps it exact, escaped.
    @Test func aSettingsValueReachesTheTerminalSanitised() throws {
        let ostack = OStackRunner()
        let directory = TemporaryDirectory()
        let value = directory.path + "/ca\u{1B}]2;owned\u{07}.pem"  // a file that exists (checked)
        try TemporaryDirectory.writeLines(["-----BEGIN CERTIFICATE-----"], to: value)
        let set = try ostack.run(["config", "set", "tls.ca-file", value])
        #expect(set.status == 0, "\(set.stderr)")
        let get = try ostack.run(["config", "get", "tls.ca-file"])
        for output in [set.stdout, get.stdout] {
            #expect(output.contains("/ca") && output.contains(".pem"), "\(output)")
            #expect(!output.contains("\u{1B}") && !output.contains("\u{07}"), "\(output.debugDescription)")
        }
        let json = try ostack.run(["config", "get", "tls.ca-file", "--json"])
        #expect(json.stdout.contains(#"\u001b]2;owned\u0007"#), "\(json.stdout)")
    }

    /// A setting edited by hand into a value ostack cannot use is named, not quietly replaced by
    /// its default (an agent timeout longer than the one written, the system's CAs instead of a
    /// private one): commands that use the keyring or the server stop with `invalid-setting` and
    /// the fix; `doctor` still runs and fails its settings check; `config list` marks the value;
    /// `config set --unset` repairs it. Before, `agent.idle-timeout: "5 m"` silently meant 15m,
    /// a bad `keyring.backend` made every command and `doctor` say "The input is not valid.", and
    /// `doctor` reported nothing.
    @Test func aHandEditedSettingIsNamedNotQuietlyReplaced() throws {
        let (server, ostack) = try signedIn()
        defer { withExtendedLifetime(server) {} }
        let path = ostack.home.path + "/config/config.json"
        for (key, valid, invalid) in [
            ("agent.idle-timeout", "5m", "5 m"), ("keyring.backend", "file", "bogus"),
            ("tls.ca-file", "", "ca.pem"), ("sync.lookback", "5s", "banana"),
        ] {
            #expect(try ostack.run(["config", "set", key, valid]).status == 0, "\(key)")
            let saved = String(decoding: try #require(try SecureFileSystem.readFile(path)), as: UTF8.self)
            let written = #""\#(key)" : "\#(valid)""#
            try #require(saved.contains(written), "\(saved)")
            let edited = saved.replacingOccurrences(of: written, with: #""\#(key)" : "\#(invalid)""#)
            try SecureFileSystem.writeAtomically(Array(edited.utf8), to: path)
            for arguments in [["sync"], ["records", "list", "task", "--local"], ["config", "get", key]] {
                let run = try ostack.run(arguments)
                #expect(run.status == 9, "\(key) \(arguments): \(run.status) \(run.stderr)")
                #expect(
                    run.stderr.contains("The setting \(key) in config.json is not valid")
                        // A missing CA file is pointed at again, not unset (the system's CAs instead).
                        && run.stderr.contains(key == "tls.ca-file" ? "ostack config set tls.ca-file PATH" : "ostack config set \(key) --unset"),
                    "\(key): \(run.stderr)")
            }
            let doctor = try ostack.run(["doctor"])
            #expect(doctor.status == 1, "\(key): \(doctor.stderr)")
            #expect(doctor.stdout.contains("FAIL  settings: Not valid in config.json: \(key)."), "\(doctor.stdout)")
            #expect(doctor.stdout.contains("\n      fix: It "), "\(doctor.stdout)")
            #expect(doctor.stdout.contains("ok    keyring:"), "\(key): the other checks ran: \(doctor.stdout)")
            let list = try ostack.run(["config", "list", "--json"])
            #expect(list.stdout.contains(#""key":"\#(key)","valid":false"#), "\(list.stdout)")
            #expect(try ostack.run(["config", "list"]).stdout.contains("\(key)\t\(invalid)\tinvalid"))
            #expect(try ostack.run(["config", "set", key, "--unset"]).status == 0)
            let repaired = try ostack.run(["sync"])
            #expect(repaired.status == 0, "\(key): \(repaired.stderr)")
        }
        // A value of another JSON type names its setting, not the whole file as damaged (which lost
        // the default account too): a number stands for its text, null for no value.
        for (value, status) in [("true", 9), (#"["5m"]"#, 9), ("300", 0), ("null", 0)] {
            let saved = String(decoding: try #require(try SecureFileSystem.readFile(path)), as: UTF8.self)
            let settings = try #require(saved.firstRange(of: #""settings" : {"#))
            var edited = saved
            edited.insert(contentsOf: #" "sync.interval" : \#(value)\#(saved.contains(#""settings" : {}"#) ? "" : ",")"#, at: settings.upperBound)
            try SecureFileSystem.writeAtomically(Array(edited.utf8), to: path)
            let run = try ostack.run(["sync"])
            #expect(run.status == status, "\(value): \(run.stderr)")
            if status == 9 {
                #expect(run.stderr.contains("The setting sync.interval in config.json is not valid"), "\(run.stderr)")
                #expect(try ostack.run(["accounts", "list"]).stdout.contains("*\twork"), "the default account is kept")
                // Another setting's write keeps the hand-written value as it was (an array became the
                // text "(not a text)", and the user's value was lost).
                #expect(try ostack.run(["config", "set", "locale", "fr"]).status == 0)
                let rewritten = String(decoding: try #require(try SecureFileSystem.readFile(path)), as: UTF8.self)
                #expect(!rewritten.contains("(not a text)"), "\(rewritten)")
                #expect(rewritten.contains(value == "true" ? #""sync.interval" : "true""# : #""5m""#), "\(rewritten)")
                #expect(try ostack.run(["config", "set", "locale", "--unset"]).status == 0)
            }
            let got = try ostack.run(["config", "get", "sync.interval"])
            if value == "300" { #expect(got.stdout == "300\n", "\(got.stdout)") }
            if value == "null" { #expect(got.stdout == "5m\n", "\(got.stdout)") }
            #expect(try ostack.run(["config", "set", "sync.interval", "--unset"]).status == 0)
        }
        // A key ostack does not know is ignored, and doctor names it.
        let saved = String(decoding: try #require(try SecureFileSystem.readFile(path)), as: UTF8.self)
        let settings = try #require(saved.firstRange(of: #""settings" : {"#))
        var edited = saved
        edited.insert(contentsOf: #" "sync.intervall" : "1m","#, at: settings.upperBound)
        try SecureFileSystem.writeAtomically(Array(edited.utf8), to: path)
        #expect(try ostack.run(["sync"]).status == 0)
        let doctor = try ostack.run(["doctor"])
        #expect(doctor.stdout.contains("warn  settings:") && doctor.stdout.contains("sync.intervall"), "\(doctor.stdout)")
        // What takes access away works whatever config.json holds: `lock`, `logout` and `accounts
        // remove` (with a bad `locale` they stopped with `invalid-setting`).
        #expect(try ostack.run(["config", "set", "locale", "de"]).status == 0)
        let current = String(decoding: try #require(try SecureFileSystem.readFile(path)), as: UTF8.self)
        let broken = current.replacingOccurrences(of: #""locale" : "de""#, with: #""locale" : "xx_YY.UTF-8""#)
        try SecureFileSystem.writeAtomically(Array(broken.utf8), to: path)
        #expect(try ostack.run(["sync"]).status == 9)
        for arguments in [["lock", "--all"], ["logout"], ["accounts", "remove", "work", "--force", "--yes"]] {
            let run = try ostack.run(arguments)
            #expect(run.status == 0, "\(arguments): \(run.status) \(run.stderr)")
        }
        #expect(!(try ostack.run(["accounts", "list"])).stdout.contains("work"))
    }

    /// A full disk: what is stored can still be read (the first connection of a WAL database must
    /// grow its `-shm` file, which failed, so `records list` said "Local storage failed"), a write
    /// says the disk is full (`storage-full`, exit 10) and saves nothing, and once space is freed
    /// everything works with nothing lost. The home is a 4 MiB tmpfs in a mount namespace of its
    /// own (`unshare`), filled up with a file.
    @Test func aFullDiskStillReadsAndSaysWhyWritesFail() throws {
        let (server, ostack) = try signedIn()
        defer { withExtendedLifetime(server) {} }
        #expect(try ostack.run(["records", "create", "task", "--set", "title=Before", "--offline"]).status == 0)
        let script = #"""
            set -u
            stage=$(mktemp -d) && cp -a "$OSTACK_HOME/." "$stage/"
            mount -t tmpfs -o size=4m,mode=700 tmpfs "$OSTACK_HOME" && cp -a "$stage/." "$OSTACK_HOME/" || exit 99
            rm -rf "$stage"
            out=$(mktemp)
            step() { name=$1; shift; "$O" "$@" > "$out" 2>&1; echo "[$name $?] $(tr '\r\n' '  ' < "$out")"; }
            dd if=/dev/zero of="$OSTACK_HOME/filler" bs=4k 2>/dev/null
            step list records list task --local --fields title --format csv
            step create records create task --set title=Full --offline --json
            step config config set sync.interval 10m
            rm "$OSTACK_HOME/filler"
            step after records create task --set title=After --offline
            step again records list task --local --fields title --format csv
            step queue queue list --json
            step doctor doctor
            rm -f "$out"
            """#
        var environment = ostack.baseEnvironment
        environment["O"] = OStackBinary.path
        let run = try runProcess(
            executable: "/usr/bin/unshare", arguments: ["-Urm", "/bin/bash", "-c", script], environment: environment)
        let lines = run.stdout.split(separator: "\n").map(String.init)
        func line(_ name: String) -> String { lines.first { $0.hasPrefix("[\(name) ") } ?? "" }
        try #require(run.status == 0 && lines.count == 7, "\(run.stdout) \(run.stderr)")
        #expect(line("list").hasPrefix("[list 0]") && line("list").contains("Before"), "\(line("list"))")
        #expect(line("create").hasPrefix("[create 10]") && line("create").contains(#""code":"storage-full""#), "\(line("create"))")
        #expect(line("config").hasPrefix("[config 10]") && line("config").contains("the disk that holds ostack's files is full"), "\(line("config"))")
        #expect(line("after").hasPrefix("[after 0]"), "\(line("after"))")
        #expect(line("again").contains("After") && line("again").contains("Before") && !line("again").contains("Full"), "\(line("again"))")
        #expect(line("queue").components(separatedBy: #""operation":"create""#).count == 3, "\(line("queue"))")
        #expect(line("doctor").contains("ok    work: database:"), "\(line("doctor"))")
    }

    /// A relative `OSTACK_HOME` was ignored: every command used the default directories (the
    /// user's own accounts) instead of the sandbox meant. It is refused before anything is done.
    @Test func aRelativeOstackHomeIsRefused() throws {
        let ostack = OStackRunner()
        let home = TemporaryDirectory()
        let relative = "ostack-relative-\(UInt32.random(in: 0...UInt32.max))"
        for arguments in [["accounts", "list"], ["status", "--short"], ["config", "list"]] {
            let run = try ostack.run(arguments, environment: ["OSTACK_HOME": relative, "HOME": home.path])
            #expect(run.status == 9, "\(arguments): \(run.stdout) \(run.stderr)")
            #expect(run.stderr.contains("OSTACK_HOME must be an absolute path"), "\(run.stderr)")
        }
        #expect(SecureFileSystem.size(of: home.path + "/.config/ostack") == nil, "the default directories were used")
        // Not even the debug log of the refusal (it went to the default state directory).
        #expect(SecureFileSystem.size(of: home.path + "/.local/state/ostack") == nil, "a debug log was written")
        #expect(SecureFileSystem.size(of: relative) == nil)
        // Completion offers nothing then, not the default directories' accounts.
        let server = try DevServerProcess()
        let unset: [String: String?] = ["OSTACK_HOME": nil, "HOME": home.path]
        #expect(try ostack.login(server.url, "alice@example.com", "alice-pass", environment: unset).status == 0)
        let typed = ["ostack", "switch", ""]
        func offered(_ environment: [String: String?]) throws -> String {
            try ostack.run(["---completion", "switch", "--", "target", "2", "0"] + typed, environment: environment).stdout
        }
        try #require(try offered(unset).contains("alice"), "the completion call itself works")
        #expect(try offered(["OSTACK_HOME": relative, "HOME": home.path]).isEmpty)
        _ = try ostack.run(["accounts", "remove", "alice", "--yes"], environment: unset)
        // Empty counts as unset.
        #expect(try ostack.run(["accounts", "list"], environment: ["OSTACK_HOME": "", "HOME": home.path]).status == 0)
    }

    /// A keyring deadline from the environment out of range (infinite, huge, not a number) is
    /// ignored, never a crash.
    @Test func anOutOfRangeKeyringTimeoutIsIgnored() throws {
        let (server, ostack) = try signedIn()
        defer { withExtendedLifetime(server) {} }
        for value in ["inf", "5000000", "nan", "-1"] {
            let list = try ostack.run(
                ["records", "list", "task", "--local"], environment: ["OSTACK_KEYRING_TIMEOUT": value])
            #expect(list.status == 0, "\(value): \(list.status) \(list.stderr)")
        }
    }

    // MARK: 4. Parallel writers wait their turn

    @Test func sixteenParallelWritersNeverFail() throws {
        let (server, ostack) = try signedIn()
        defer { withExtendedLifetime(server) {} }
        let writers = 16
        let rounds = 6
        // CPU contention widens the windows in which another process holds the file (its last
        // close checkpoints under an exclusive lock): without a busy handler at open, some writers
        // then failed with "Local storage failed".
        let hogs = try (0..<3).map { _ in
            try ChildProcess(executable: "/bin/sh", arguments: ["-c", "while :; do :; done"])
        }
        defer { hogs.forEach { $0.kill() } }
        for round in 0..<rounds {
            let children = try (0..<writers).map { writer in
                try ostack.start(["records", "create", "task", "--set", "title=w\(writer)-\(round)", "--offline"])
            }
            for child in children {
                let status = try child.waitForExit(timeout: 120)
                #expect(status == 0, "\(child.stderrText())")
            }
        }
        let queue = try ostack.run(["queue", "list", "--json"])
        #expect(queue.status == 0)
        #expect(queue.stdout.components(separatedBy: "\"operation\"").count - 1 == writers * rounds, "\(queue.stdout)")
    }

    /// Two commands change different fields of one record at once: the one that read the record
    /// first (and waits 2 s before its transaction, `pause:` fail point) reads it again inside its
    /// transaction, so the mirror shows both changes — it used to write its stale copy over the
    /// other command's field until a push. Both changes join the queued create and reach the server.
    @Test func aWriteOverAConcurrentWriteOfTheSameRecordKeepsBoth() throws {
        let (server, ostack) = try signedIn()
        defer { withExtendedLifetime(server) {} }
        let created = try ostack.run(["records", "create", "task", "--set", "title=Shared", "--offline", "--json"])
        let id = try #require(
            created.stdout.firstRange(of: #""id":""#).map {
                String(created.stdout[$0.upperBound...].prefix { $0 != "\"" })
            })
        // Returns once the slow one has read the record and waits.
        let slow = try ostack.startPaused(
            at: "record-write.before-transaction",
            ["records", "update", "task", "--set", "notes=from the slow one", "--offline", "--", id])
        let fast = try ostack.run(["records", "update", "task", "--set", "owner=fast", "--offline", "--", id])
        #expect(fast.status == 0, "\(fast.stderr)")
        #expect(try slow.waitForExit(timeout: 60) == 0, "\(slow.stderrText())")
        let record = try ostack.run(["records", "get", "task", "--local", "--json", "--", id]).stdout
        #expect(record.contains("from the slow one") && record.contains(#""owner":"fast""#), "\(record)")
        let queue = try ostack.run(["queue", "list", "--json"]).stdout
        #expect(queue.ranges(of: #""operation":"create""#).count == 1, "\(queue)")  // both merged into it
        #expect(try ostack.run(["sync"]).status == 0)
        let remote = try ostack.run(["records", "get", "task", "--remote", "--json", "--", id]).stdout
        #expect(remote.contains("from the slow one") && remote.contains(#""owner":"fast""#), "\(remote)")
    }

    // MARK: 7. Planted symbolic links are refused

    @Test func plantedSymbolicLinksAreRefused() throws {
        let (server, ostack) = try signedIn()
        defer {
            withExtendedLifetime(server) {}
            _ = try? ostack.run(["agent", "stop"])
        }
        #expect(try ostack.run(["records", "create", "task", "--set", "title=One", "--offline"]).status == 0)
        let directory = try accountDirectory(ostack)
        let elsewhere = TemporaryDirectory(prefix: "ostack-link-target")
        func target(_ name: String) -> String { elsewhere.appending(name) }

        // data.db
        try #require(rename(directory + "/data.db", target("data.db")) == 0)
        try #require(symlink(target("data.db"), directory + "/data.db") == 0)
        var result = try ostack.run(["queue", "list"])
        #expect(result.status == 10 && result.stderr.contains("Refusing to use the account file data.db"))
        try SecureFileSystem.removeFile(directory + "/data.db")
        try #require(rename(target("data.db"), directory + "/data.db") == 0)
        #expect(try ostack.run(["queue", "list"]).status == 0)

        // audit-pending.jsonl: never written through, and refused when the database opens.
        try #require(symlink(target("pending"), directory + "/audit-pending.jsonl") == 0)
        #expect(try ostack.run(["switch", "work"]).status == 0)  // buffers a "switch" event
        #expect(!SecureFileSystem.exists(target("pending")))
        result = try ostack.run(["queue", "list"])
        #expect(result.status == 10 && result.stderr.contains("the account file audit-pending.jsonl"))
        try SecureFileSystem.removeFile(directory + "/audit-pending.jsonl")

        // The account directory itself.
        try #require(rename(directory, target("account")) == 0)
        try #require(symlink(target("account"), directory) == 0)
        result = try ostack.run(["queue", "list"])
        #expect(result.status == 10 && result.stderr.contains("Refusing to use the account directory"))
        try SecureFileSystem.removeFile(directory)
        try #require(rename(target("account"), directory) == 0)

        // A lock file: never created through the link.
        let locks = ostack.home.appending("state/locks")
        try? SecureFileSystem.removeFile(locks + "/config.lock")
        try #require(symlink(target("config.lock"), locks + "/config.lock") == 0)
        #expect(try ostack.run(["switch", "work"]).status == 10)
        #expect(!SecureFileSystem.exists(target("config.lock")))
        try SecureFileSystem.removeFile(locks + "/config.lock")

        // The debug log: an error is still reported, the log is never written through the link.
        try? SecureFileSystem.removeFile(ostack.home.appending("state/debug.log"))
        try #require(symlink(target("debug.log"), ostack.home.appending("state/debug.log")) == 0)
        #expect(try ostack.run(["records", "list", "task", "--account", "nosuch"]).status == 7)
        #expect(!SecureFileSystem.exists(target("debug.log")))
        try SecureFileSystem.removeFile(ostack.home.appending("state/debug.log"))

        // The runtime directory (the agent's socket).
        try? SecureFileSystem.removeTree(ostack.home.appending("run"))
        try SecureFileSystem.createDirectory(target("run"))
        try #require(symlink(target("run"), ostack.home.appending("run")) == 0)
        result = try ostack.run(["agent", "start"])
        #expect(result.status == 10 && result.stderr.contains("the agent's runtime directory"), "\(result.stderr)")
        result = try ostack.run(["unlock", "--pin-stdin"], stdin: "7319\n")
        #expect(result.status == 10 && result.stderr.contains("the agent's runtime directory"), "\(result.stderr)")
        #expect(try SecureFileSystem.contentsOfDirectory(target("run")).isEmpty)
    }

    // MARK: 6. Buffered audit lines are authenticated

    @Test func aForgedBufferedAuditLineIsNotChained() throws {
        let (server, ostack) = try signedIn()
        defer { withExtendedLifetime(server) {} }
        #expect(try ostack.run(["switch", "work"]).status == 0)  // a genuine buffered event
        let pending = try accountDirectory(ostack) + "/audit-pending.jsonl"
        let forged = [
            #"{"id":"1-1","time":"2026-01-01T00:00:00.000Z","event":"pin.remove","outcome":"ok","details":{}}"#,
            #"{"id":"1-2","time":"2026-01-01T00:00:00.000Z","event":"logout","outcome":"ok","details":{},"mac":"00"}"#,
        ]
        for line in forged { try SecureFileSystem.appendLine(Array(line.utf8), to: pending) }
        let audit = try ostack.run(["audit", "--json"])
        #expect(audit.status == 0, "\(audit.stderr)")
        #expect(audit.stdout.contains("\"event\":\"switch\""), "\(audit.stdout)")
        #expect(!audit.stdout.contains("\"event\":\"pin.remove\"") && !audit.stdout.contains("\"event\":\"logout\""))
        #expect(audit.stdout.contains("\"event\":\"audit.buffer-rejected\""), "\(audit.stdout)")
        #expect(audit.stdout.contains("\"count\":\"2\""), "\(audit.stdout)")
        #expect(try ostack.run(["audit", "verify"]).status == 0)
    }
}
