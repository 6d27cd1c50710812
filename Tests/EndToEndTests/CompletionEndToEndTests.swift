import OStackTestSupport
import Testing

/// Dynamic completion: the generated scripts call `ostack ---completion <subcommands> -- <argument>
/// <word-index> <cursor> <words…>`, and ostack answers from local files only — account aliases,
/// object names, queue entry ids, conflict ids — and nothing (exit 0, no error) when it cannot.
@Suite(.serialized) struct CompletionEndToEndTests {
    /// The candidates for `argument` of `subcommands`, completing the last of `words` (typed so far).
    func complete(
        _ ostack: OStackRunner, _ subcommands: [String], _ argument: String, _ words: [String],
        environment: [String: String?] = [:], sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> [String] {
        let typed = ["ostack"] + words
        let result = try ostack.run(
            ["---completion"] + subcommands + ["--", argument, String(typed.count - 1), String(typed.last!.count)]
                + typed,
            environment: environment)
        #expect(result.status == 0, "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stderr == "", sourceLocation: sourceLocation)
        return result.stdout.split(separator: "\n").map(String.init)
    }

    @Test func aliasesObjectsQueueEntriesAndConflicts() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        #expect(
            try ostack.login(server.url, "alice@example.com", "alice-pass", extra: ["--alias", "work"]).status == 0)
        #expect(
            try ostack.login(server.url, "bob@example.com", "bob-pass", extra: ["--alias", "bob", "--no-switch"])
                .status == 0)
        #expect(try ostack.run(["objects", "list"]).status == 0)  // caches the object list
        // A conflict: the same field changed here and on the server.
        let created = try ostack.run(["records", "create", "task", "--set", "title=Base", "--json"])
        let id = try #require(created.stdout.firstRange(of: #""id":""#).map { created.stdout[$0.upperBound...] })
            .prefix { $0 != "\"" }
        _ = try server.control("POST", "modify", #"{"object":"task","id":"\#(id)","fields":{"title":"Theirs"}}"#)
        _ = try ostack.run(["records", "update", "task", "--set", "title=Mine", "--", String(id)])
        // A change that is only queued.
        #expect(try ostack.run(["records", "create", "task", "--set", "title=Later", "--offline"]).status == 0)

        #expect(try complete(ostack, ["status"], "--account", ["status", "--account", ""]) == ["bob", "work"])
        #expect(try complete(ostack, ["switch"], "positional@0", ["switch", "w"]) == ["work"])
        #expect(try complete(ostack, ["accounts", "remove"], "positional@0", ["accounts", "remove", "b"]) == ["bob"])
        let objects = try complete(ostack, ["records", "list"], "positional@0", ["records", "list", ""])
        #expect(objects.contains("task") && objects.contains("contact"), "\(objects)")
        #expect(try complete(ostack, ["records", "get"], "positional@0", ["records", "get", "ta"]) == ["task"])
        #expect(try complete(ostack, ["sync", "track"], "positional@0", ["sync", "track", "ta"]) == ["task"])
        // export and import too (they offered nothing).
        #expect(try complete(ostack, ["records", "export"], "positional@0", ["records", "export", "ta"]) == ["task"])
        #expect(try complete(ostack, ["records", "import"], "positional@0", ["records", "import", "ta"]) == ["task"])

        let queue = try ostack.run(["queue", "list", "--json"]).stdout
        let entries = try complete(ostack, ["queue", "discard"], "positional@0", ["queue", "discard", ""])
        #expect(entries.count == 2 && entries.allSatisfy { queue.contains($0) }, "\(entries)")
        let conflicts = try complete(ostack, ["conflicts", "show"], "positional@0", ["conflicts", "show", ""])
        #expect(conflicts.count == 1 && entries.contains(conflicts[0]), "\(conflicts)")
        // Another account's names, chosen with --account among the words typed.
        #expect(
            try complete(ostack, ["queue", "discard"], "positional@0", ["queue", "discard", "--account", "bob", ""])
                .isEmpty)

        // Locked: names need the database key, so nothing is offered — and nothing is asked.
        let pin = try ostack.run(
            ["pin", "set", "--pin-stdin"], stdin: "482913\n482913\n", environment: ["OSTACK_PIN_KDF": "interactive"])
        #expect(pin.status == 0, "\(pin.stderr)")
        #expect(try ostack.run(["lock"]).status == 0)
        #expect(try complete(ostack, ["records", "list"], "positional@0", ["records", "list", ""]).isEmpty)
        #expect(try complete(ostack, ["conflicts", "show"], "positional@0", ["conflicts", "show", ""]).isEmpty)
        // Aliases come from the registry alone.
        #expect(try complete(ostack, ["switch"], "positional@0", ["switch", ""]) == ["bob", "work"])
        _ = try ostack.run(["agent", "stop"])
    }

    @Test func withoutAccountsNothingIsOffered() throws {
        let ostack = OStackRunner()
        #expect(try complete(ostack, ["switch"], "positional@0", ["switch", ""]).isEmpty)
        #expect(try complete(ostack, ["records", "list"], "positional@0", ["records", "list", ""]).isEmpty)
    }

    @Test(arguments: ["bash", "zsh", "fish"])
    func scriptsCallBackForDynamicCompletions(_ shell: String) throws {
        let result = try OStackRunner().run(["completion", shell])
        #expect(result.status == 0)
        #expect(result.stdout.contains("---completion"))
        #expect(result.stdout.contains("positional@0"))
    }
}
