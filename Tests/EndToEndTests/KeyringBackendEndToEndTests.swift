import Glibc
import OStackTestSupport
import Testing

/// The opt-in encrypted file backend and `keyring migrate` between backends.
@Suite(.serialized) struct KeyringBackendEndToEndTests {
    static let passphrase = "correct horse battery staple"

    /// alice signed in with the file backend (its passphrase on fd 3).
    func signedInWithFileKeyring() throws -> (DevServerProcess, OStackRunner) {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        let login = try ostack.run(
            ["login", "--server", server.url, "--email", "alice@example.com", "--password-stdin", "--keyring", "file"],
            stdin: "alice-pass\n", passphrase: Self.passphrase)
        #expect(login.status == 0, "\(login.stderr)")
        return (server, ostack)
    }

    func namespace(_ ostack: OStackRunner, _ server: DevServerProcess, user: String = "usr_alice") -> String {
        "\(ostack.keyringPrefix):auth:127.0.0.1:\(server.port)::\(user)"
    }

    @Test func fileBackendAccountsNeverTouchTheSecretService() throws {
        let (server, ostack) = try signedInWithFileKeyring()
        defer {
            withExtendedLifetime(server) {}
            _ = try? ostack.run(["agent", "stop"])
        }
        #expect(!(try ostack.keyringItems(namespace: namespace(ostack, server))).contains("attribute"))
        #expect(try ostack.run(["auth", "refresh"], passphrase: Self.passphrase).status == 0)
        #expect(try ostack.run(["agent", "stop"]).status == 0)  // forget the unlocked file key
        let wrong = try ostack.run(["auth", "refresh"], passphrase: "wrong")
        #expect(wrong.status == 10)
        #expect(wrong.stderr.contains("passphrase"))
        let none = try ostack.run(["auth", "refresh", "--no-input"])
        #expect(none.status == 9)
        // Metadata commands need no passphrase.
        #expect(try ostack.run(["status"]).status == 0)
    }

    /// `logout --all` asks the keyring of accounts marked signed out too (one may still hold a
    /// token); a file keyring that cannot be opened without asking (`--no-input`, the agent
    /// stopped) passes such an account over as before, instead of failing the whole command.
    @Test func logoutAllPassesOverASignedOutAccountWhoseKeyringWouldAsk() throws {
        let (server, ostack) = try signedInWithFileKeyring()
        defer {
            withExtendedLifetime(server) {}
            _ = try? ostack.run(["agent", "stop"])
        }
        #expect(try ostack.run(["logout"], passphrase: Self.passphrase).status == 0)
        #expect(try ostack.run(["agent", "stop"]).status == 0)  // forget the unlocked file key
        let all = try ostack.run(["logout", "--all", "--no-input"])
        #expect(all.status == 0 && all.stdout == "Every account was already signed out.\n", "\(all.stdout)\(all.stderr)")
    }

    /// The file backend unlocks into the agent: the passphrase is needed once per agent session.
    @Test func fileBackendUnlocksIntoTheAgent() throws {
        let (server, ostack) = try signedInWithFileKeyring()
        defer {
            withExtendedLifetime(server) {}
            _ = try? ostack.run(["agent", "stop"])
        }
        #expect(try ostack.run(["auth", "refresh", "--no-input"]).status == 0)  // no passphrase: the agent has the key
        #expect(try ostack.run(["agent", "status"]).stdout.contains("file-keyring"))
        #expect(try ostack.run(["agent", "stop"]).status == 0)
        #expect(try ostack.run(["auth", "refresh", "--no-input"]).status == 9)  // asked again after the agent is gone
        #expect(try ostack.run(["auth", "refresh"], passphrase: Self.passphrase).status == 0)
    }

    @Test func migrateToFileAndBack() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        defer { _ = try? ostack.run(["agent", "stop"]) }
        #expect(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        let toFile = try ostack.run(["keyring", "migrate", "--to", "file", "--json"], passphrase: Self.passphrase)
        #expect(toFile.status == 0, "\(toFile.stderr)")
        #expect(toFile.stdout.contains("\"moved\":3"))  // session token, database key, home marker
        #expect(!(try ostack.keyringItems(namespace: namespace(ostack, server))).contains("attribute"))
        #expect(try ostack.run(["auth", "refresh"], passphrase: Self.passphrase).status == 0)

        let back = try ostack.run(["keyring", "migrate", "--to", "secret-service"], passphrase: Self.passphrase)
        #expect(back.status == 0, "\(back.stderr)")
        let items = try ostack.keyringItems(namespace: namespace(ostack, server))
        #expect(items.contains("session-token") && items.contains("db-key") && items.contains("home"))
        #expect(try ostack.run(["auth", "refresh"]).status == 0)  // no passphrase needed any more
        // Without a passphrase (no terminal, no fd) the migration stops before it begins: no
        // journal that every later command would try to finish (they all failed in scripts).
        _ = try ostack.run(["agent", "stop"])  // it may hold the file keyring's key
        let refused = try ostack.run(["keyring", "migrate", "--to", "file"])
        #expect(refused.status == 9, "\(refused.stderr)")
        #expect(access(ostack.home.appending("state/keyring-migration.json"), F_OK) != 0)
        let after = try ostack.run(["auth", "refresh"])
        #expect(after.status == 0, "\(after.stderr)")
        #expect(!(try ostack.run(["doctor"]).stdout.contains("interrupted")))
    }

    /// Issue 15 (6): `kill -9` at every step; then OTHER commands run first (they change the token and
    /// the audit anchor in whichever backend the registry names). Every command's start honours the
    /// journal, so the migration is finished, no stale copy is left, and running it again is a no-op.
    @Test(arguments: [
        "keyring-migrate.after-journal", "keyring-migrate.after-copy", "keyring-migrate.after-switch",
        "keyring-migrate.after-journal-switched", "keyring-migrate.after-first-delete",
    ])
    func anInterruptedMigrationIsFinishedByTheNextCommand(failpoint: String) throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        defer { _ = try? ostack.run(["agent", "stop"]) }
        #expect(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        let killed = try ostack.run(
            ["keyring", "migrate", "--to", "file"], environment: ["OSTACK_FAILPOINT": failpoint],
            passphrase: Self.passphrase)
        #expect(killed.status == 137)
        // Other commands first: a data command (moves the audit anchor) and a refresh.
        let write = try ostack.run(
            ["records", "create", "task", "--set", "title=After the crash", "--offline"], passphrase: Self.passphrase)
        #expect(write.status == 0, "\(failpoint): \(write.stderr)")
        #expect(try ostack.run(["auth", "refresh"], passphrase: Self.passphrase).status == 0)
        #expect(!(try ostack.keyringItems(namespace: namespace(ostack, server))).contains("attribute"), "\(failpoint)")
        let doctor = try ostack.run(["doctor", "--json"], passphrase: Self.passphrase)
        #expect(
            !doctor.stdout.contains("stale-copies") && !doctor.stdout.contains("keyring-migration"), "\(doctor.stdout)")
        let resumed = try ostack.run(["keyring", "migrate", "--to", "file", "--json"], passphrase: Self.passphrase)
        #expect(resumed.status == 0, "\(failpoint): \(resumed.stderr)")
        #expect(resumed.stdout.contains("\"cleaned\":0"))
        #expect(try ostack.run(["auth", "refresh"], passphrase: Self.passphrase).status == 0)
        let queue = try ostack.run(["queue", "list", "--json"], passphrase: Self.passphrase)
        #expect(queue.stdout.contains("\"operation\":\"create\""), "\(failpoint): \(queue.stdout) \(queue.stderr)")
    }

    /// Issue 15 (6): doctor reports stale copies in a backend the account no longer uses.
    @Test func doctorReportsStaleCopiesInTheOldBackend() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        defer { _ = try? ostack.run(["agent", "stop"]) }
        #expect(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        #expect(try ostack.run(["keyring", "migrate", "--to", "file"], passphrase: Self.passphrase).status == 0)
        // A stale db-key in the Secret Service (as an older, interrupted migration left behind).
        let planted = try runSecretTool(
            [
                "store", "--label=stale", "app", "ostack", "namespace", namespace(ostack, server), "account",
                "127.0.0.1:\(server.port)::usr_alice", "kind", "db-key", "version", "1",
            ], stdin: Array("stale".utf8))
        try #require(planted.status == 0, "\(planted.stderr)")
        let doctor = try ostack.run(["doctor", "--json"], passphrase: Self.passphrase)
        #expect(doctor.stdout.contains("\"name\":\"stale-copies\""), "\(doctor.stdout)")
        #expect(doctor.stdout.contains("keyring migrate --to file"))
        #expect(try ostack.run(["keyring", "migrate", "--to", "file"], passphrase: Self.passphrase).status == 0)
        #expect(!(try ostack.keyringItems(namespace: namespace(ostack, server))).contains("attribute"))
    }

    /// Red team, 2026-11-29: a reader that stops early (`| head -1`) must end ostack quietly, exit 0
    /// (docs/commands.md: "A reader that stops early (`| head`) ends the export quietly"). ostack did
    /// not ignore SIGPIPE itself; it happened to be ignored because GLib's D-Bus code ignores it when
    /// the Secret Service is used. With the file keyring backend (no D-Bus), and for commands that never
    /// touch the keyring (`completion`), a large output into `| head -1` was killed by SIGPIPE: exit
    /// 141, which fails any `set -o pipefail` script, and the export's own EPIPE handling never ran.
    @Test func aReaderThatStopsEarlyEndsOstackQuietly() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        let passphrase = "correct horse battery staple"
        let login = try ostack.run(
            ["login", "--server", server.url, "--email", "alice@example.com", "--password-stdin", "--keyring", "file"],
            stdin: "alice-pass\n", passphrase: passphrase)
        try #require(login.status == 0, "\(login.stderr)")
        _ = try server.control("POST", "seed", #"{"object":"task","count":5000}"#)
        let scratch = TemporaryDirectory(prefix: "rt3-pipe")
        let file = scratch.path + "/passphrase"
        let fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        _ = passphrase.withCString { write(fd, $0, strlen($0)) }
        close(fd)
        var env = ostack.baseEnvironment
        env["DBUS_SESSION_BUS_ADDRESS"] = nil
        env["OSTACK_KEYRING_PASSPHRASE_FD"] = "3"
        env["OSTACK_KEYRING_BACKEND"] = "file"  // a headless machine's setting (docs/keyring.md)
        for command in [
            "records export task --format ndjson", "records list task --all", "completion bash",
        ] {
            let piped = try runProcess(
                executable: "/bin/bash",
                // As from a login shell: SIGPIPE at its default (the test runner ignores it, and an
                // ignored signal is inherited across exec, which would hide the failure).
                arguments: [
                    "-c",
                    "python3 -c 'import os,signal,sys; signal.signal(signal.SIGPIPE, signal.SIG_DFL); "
                        + "os.execv(sys.argv[1], sys.argv[1:])' '\(OStackBinary.path)' \(command) 3<'\(file)' "
                        + "| head -1 >/dev/null; echo ${PIPESTATUS[0]}",
                ],
                environment: env)
            #expect(piped.stdout == "0\n", "\(command): exit \(piped.stdout) \(piped.stderr)")
        }
    }

    /// With SIGPIPE ignored, `sync --watch` into a reader that has gone would go on syncing for
    /// ever, its lines dropped: it stops once a line cannot be written.
    @Test func aWatchWhoseReaderIsGoneStops() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        try #require(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        let piped = try runProcess(
            executable: "/bin/bash",
            arguments: ["-c", "'\(OStackBinary.path)' sync --watch --interval 1s | true; echo ${PIPESTATUS[0]}"],
            environment: ostack.baseEnvironment, timeout: 30)
        #expect(piped.stdout == "0\n", "exit \(piped.stdout) \(piped.stderr)")
    }
}
