import OStackTestSupport
import Testing

/// The opt-in encrypted file backend and `keyring migrate` between backends.
@Suite(.serialized) struct KeyringBackendEndToEndTests {
    static let passphrase = "correct horse battery staple"

    func namespace(_ ostack: OStackRunner, _ server: DevServerProcess, user: String = "usr_alice") -> String {
        "\(ostack.keyringPrefix):auth:127.0.0.1:\(server.port)::\(user)"
    }

    @Test func fileBackendAccountsNeverTouchTheSecretService() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        defer { _ = try? ostack.run(["agent", "stop"]) }
        let login = try ostack.run(
            ["login", "--server", server.url, "--email", "alice@example.com", "--password-stdin", "--keyring", "file"],
            stdin: "alice-pass\n", passphrase: Self.passphrase)
        #expect(login.status == 0, "\(login.stderr)")
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

    /// The file backend unlocks into the agent: the passphrase is needed once per agent session.
    @Test func fileBackendUnlocksIntoTheAgent() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        defer { _ = try? ostack.run(["agent", "stop"]) }
        let login = try ostack.run(
            ["login", "--server", server.url, "--email", "alice@example.com", "--password-stdin", "--keyring", "file"],
            stdin: "alice-pass\n", passphrase: Self.passphrase)
        #expect(login.status == 0, "\(login.stderr)")
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
        #expect(toFile.stdout.contains("\"moved\":2"))
        #expect(!(try ostack.keyringItems(namespace: namespace(ostack, server))).contains("attribute"))
        #expect(try ostack.run(["auth", "refresh"], passphrase: Self.passphrase).status == 0)

        let back = try ostack.run(["keyring", "migrate", "--to", "secret-service"], passphrase: Self.passphrase)
        #expect(back.status == 0, "\(back.stderr)")
        let items = try ostack.keyringItems(namespace: namespace(ostack, server))
        #expect(items.contains("session-token") && items.contains("db-key"))
        #expect(try ostack.run(["auth", "refresh"]).status == 0)  // no passphrase needed any more
    }

    @Test(arguments: ["keyring-migrate.after-copy", "keyring-migrate.after-switch"])
    func anInterruptedMigrationIsFinishedByRunningItAgain(failpoint: String) throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        defer { _ = try? ostack.run(["agent", "stop"]) }
        #expect(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        let killed = try ostack.run(
            ["keyring", "migrate", "--to", "file"], environment: ["OSTACK_FAILPOINT": failpoint],
            passphrase: Self.passphrase)
        #expect(killed.status == 137)
        // Nothing is lost: the account still works from whichever backend the registry names.
        #expect(try ostack.run(["auth", "refresh"], passphrase: Self.passphrase).status == 0)
        let resumed = try ostack.run(["keyring", "migrate", "--to", "file"], passphrase: Self.passphrase)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(!(try ostack.keyringItems(namespace: namespace(ostack, server))).contains("attribute"))
        #expect(try ostack.run(["auth", "refresh"], passphrase: Self.passphrase).status == 0)
    }
}
