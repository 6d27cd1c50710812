import OStackTestSupport
import Testing

/// `ostack status --short`, the one line for a shell prompt (docs/commands.md): alias, lock state,
/// queued changes, and the session only when it is not valid. It is answered before the argument
/// parser runs (`EarlyCommand`); every case is also run through the parser (`--keyring …`, which the
/// early path does not take) and must give the same answer.
@Suite(.serialized) struct StatusShortEndToEndTests {
    static let fast: [String: String?] = ["OSTACK_PIN_KDF": "interactive"]

    /// `status --short` with `arguments`, checked to answer alike on both paths.
    func short(
        _ ostack: OStackRunner, _ arguments: [String] = [], environment: [String: String?] = [:],
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> ProcessResult {
        let early = try ostack.run(["status", "--short"] + arguments, environment: environment)
        let parsed = try ostack.run(
            ["status", "--keyring", "secret-service", "--short"] + arguments, environment: environment)
        #expect(early.status == parsed.status, sourceLocation: sourceLocation)
        #expect(early.stdout == parsed.stdout, sourceLocation: sourceLocation)
        // Error messages carry a random reference only in the debug log, never on stderr.
        #expect(early.stderr == parsed.stderr, sourceLocation: sourceLocation)
        return early
    }

    @Test func withoutAnAccountItPrintsNothingAndSucceeds() throws {
        let ostack = OStackRunner()
        let human = try short(ostack)
        #expect(human.status == 0)
        #expect(human.stdout == "")
        #expect(human.stderr == "")
        let json = try short(ostack, ["--json"])
        #expect(json.status == 0)
        #expect(json.stdout == #"{"alias":null,"lock":null,"queued":null,"session":null}"# + "\n")
        // An account asked for by name that does not exist is still an error.
        let unknown = try short(ostack, ["--account", "nope"])
        #expect(unknown.status == 7)
        #expect(unknown.stdout == "")
        #expect(try short(ostack, environment: ["OSTACK_ACCOUNT": "nope"]).status == 7)
    }

    @Test func queuedChangesLockStateAndSession() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        #expect(
            try ostack.login(server.url, "alice@example.com", "alice-pass", extra: ["--alias", "work"]).status == 0)
        #expect(
            try ostack.login(server.url, "bob@example.com", "bob-pass", extra: ["--alias", "bob", "--no-switch"])
                .status == 0)
        // Two changes saved and queued, not yet on the server.
        for title in ["One", "Two"] {
            let created = try ostack.run(["records", "create", "task", "--set", "title=\(title)", "--offline"])
            #expect(created.status == 0, "\(created.stderr)")
        }
        #expect(try short(ostack).stdout == "work no-pin 2 queued\n")
        // Selection as for every command: --account, OSTACK_ACCOUNT, the default.
        #expect(try short(ostack, ["--account", "bob"]).stdout.hasPrefix("bob no-pin "))
        #expect(try short(ostack, ["--account=bob"]).stdout.hasPrefix("bob no-pin "))
        #expect(try short(ostack, environment: ["OSTACK_ACCOUNT": "bob"]).stdout.hasPrefix("bob no-pin "))
        // No data command has counted bob's queue yet ("?"); a session that is not valid is named last.
        #expect(try ostack.run(["logout", "bob"]).status == 0)
        #expect(try short(ostack, ["--account", "bob"]).stdout == "bob no-pin ? queued signed-out\n")
        #expect(
            try short(ostack, ["--account", "bob", "--json"]).stdout
                == #"{"alias":"bob","lock":"no-pin","queued":null,"session":"signed-out"}"# + "\n")

        // With a PIN: unlocked while the agent holds the key, locked after `lock`; the count stays known.
        let pin = try ostack.run(["pin", "set", "--pin-stdin"], stdin: "482913\n482913\n", environment: Self.fast)
        #expect(pin.status == 0, "\(pin.stderr)")
        #expect(try short(ostack).stdout == "work unlocked 2 queued\n")
        #expect(try ostack.run(["lock"]).status == 0)
        #expect(try short(ostack).stdout == "work locked 2 queued\n")
        let json = try short(ostack, ["--json"])
        #expect(json.status == 0)
        #expect(json.stdout == #"{"alias":"work","lock":"locked","queued":2,"session":"valid"}"# + "\n")
        _ = try ostack.run(["agent", "stop"])
    }

    @Test func anythingElseGoesToTheParser() throws {
        let ostack = OStackRunner()
        // Flags the early path does not know are the parser's to accept or refuse.
        #expect(try ostack.run(["status", "--short", "--all"]).status == 64)
        #expect(try ostack.run(["status", "--short", "--bogus"]).status == 64)
        let help = try ostack.run(["status", "--short", "--help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("--short"))
    }
}
