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
        let status = try ostack.run(["status", "--all", "--json"]).stdout
        #expect(!status.contains("\"signedIn\":false"), "\(status)")
    }
}
