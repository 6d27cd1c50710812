import Glibc
import OStackTestSupport
import Testing

/// Issue 15 (4): `kill -9` at every step of `pin set`, `pin change` and `pin remove` (docs/storage.md,
/// "PIN lock": PINJournal). Afterwards the account works with what the user knows — the old state or
/// the new one —, a PIN never exists whose recovery key was not shown, and no queued change is lost.
@Suite(.serialized) struct PINCrashEndToEndTests {
    static let fast: [String: String?] = ["OSTACK_PIN_KDF": "interactive"]

    func signedInWithAChange() throws -> (DevServerProcess, OStackRunner) {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        try #require(
            try ostack.login(server.url, "alice@example.com", "alice-pass", extra: ["--alias", "work"]).status == 0)
        let created = try ostack.run(["records", "create", "task", "--set", "title=Unsynced", "--offline"])
        try #require(created.status == 0, "\(created.stderr)")
        return (server, ostack)
    }

    func namespace(_ ostack: OStackRunner, _ server: DevServerProcess) -> String {
        "\(ostack.keyringPrefix):auth:127.0.0.1:\(server.port)::usr_alice"
    }

    /// The queued change is still there (the database opens with its key).
    func expectChangeKept(_ ostack: OStackRunner, _ context: String) throws {
        let queue = try ostack.run(["queue", "list", "--json"])
        #expect(queue.status == 0, "\(context): \(queue.stderr)")
        #expect(queue.stdout.contains("\"operation\":\"create\""), "\(context): \(queue.stdout)")
    }

    /// No PIN: data and session work without unlocking, and a plain db-key is in the keyring.
    func expectNoPIN(_ ostack: OStackRunner, _ server: DevServerProcess, _ context: String) throws {
        let refresh = try ostack.run(["auth", "refresh"])
        #expect(refresh.status == 0, "\(context): \(refresh.stderr)")
        let status = try ostack.run(["status", "--json"]).stdout
        #expect(status.contains("\"hasPin\":false") && status.contains("\"locked\":false"), "\(context): \(status)")
        let items = try ostack.keyringItems(namespace: namespace(ostack, server))
        #expect(items.contains("kind = db-key"), "\(context)")
        #expect(!items.contains("pending") && !items.contains("kind = pin-ring"), "\(context): \(items)")
        try expectChangeKept(ostack, context)
    }

    /// A PIN: the account locks and unlocks with `pin`, no plain db-key remains.
    func expectPIN(_ ostack: OStackRunner, _ server: DevServerProcess, _ pin: String, _ context: String) throws {
        #expect(try ostack.run(["lock"]).status == 0, "\(context)")
        let unlock = try ostack.run(["unlock", "--pin-stdin"], stdin: pin + "\n")
        #expect(unlock.status == 0, "\(context): \(unlock.stderr)")
        let items = try ostack.keyringItems(namespace: namespace(ostack, server))
        #expect(!items.contains("kind = db-key") && !items.contains("pending"), "\(context): \(items)")
        #expect(items.contains("kind = pin-ring") && items.contains("kind = recovery-ring"), "\(context)")
        try expectChangeKept(ostack, context)
    }

    static let setBeforeCommit = [
        "pin-set.after-journal", "pin-set.after-rings", "pin-set.after-staging", "pin-set.after-shown",
    ]
    static let setAfterCommit = [
        "pin-set.after-commit-journal", "pin-set.after-ring-copy", "pin-set.after-recovery-envelope",
        "pin-set.after-pin-envelope", "pin-set.after-seal", "pin-set.after-agent", "pin-set.after-db-key-delete",
        "pin-set.after-audit",
    ]

    @Test(arguments: setBeforeCommit + setAfterCommit)
    func pinSetKilledAtEveryStep(failpoint: String) throws {
        let (server, ostack) = try signedInWithAChange()
        defer {
            withExtendedLifetime(server) {}
            _ = try? ostack.run(["agent", "stop"])
        }
        let killed = try ostack.run(
            ["pin", "set", "--pin-stdin", "--json"], stdin: "7319\n",
            environment: Self.fast.merging(["OSTACK_FAILPOINT": failpoint]) { _, new in new })
        #expect(killed.status == 137, "\(failpoint): \(killed.stderr)")
        if Self.setBeforeCommit.contains(failpoint) {
            try expectNoPIN(ostack, server, failpoint)
            // And a PIN can be set afterwards as usual.
            #expect(try ostack.run(["pin", "set", "--pin-stdin"], stdin: "8642\n", environment: Self.fast).status == 0)
            try expectPIN(ostack, server, "8642", failpoint)
        } else {
            // The PIN took effect only after its recovery key was shown: the key works.
            let parts = killed.stdout.split(separator: "\"")
            try #require(parts.count > 3, "\(failpoint): no recovery key shown: \(killed.stdout)")
            try expectPIN(ostack, server, "7319", failpoint)
            #expect(try ostack.run(["lock"]).status == 0)
            let recovered = try ostack.run(["unlock", "--recovery-key-stdin"], stdin: String(parts[3]) + "\n")
            #expect(recovered.status == 0, "\(failpoint): \(recovered.stderr)")
            // A PIN that took effect is in the trail, however the command ended (AUD-5).
            let sets = try ostack.run(["audit", "--event", "pin.set", "--json"]).stdout
            #expect(sets.contains(#""event":"pin.set","outcome":"ok""#), "\(failpoint): \(sets)")
        }
    }

    static let changeBeforeCommit = ["pin-change.after-open", "pin-change.after-ring", "pin-change.after-staging"]
    static let changeAfterCommit = [
        "pin-change.after-commit-journal", "pin-change.after-ring-copy", "pin-change.after-pin-envelope",
        "pin-change.after-audit",
    ]

    @Test(arguments: changeBeforeCommit + changeAfterCommit)
    func pinChangeKilledAtEveryStep(failpoint: String) throws {
        let (server, ostack) = try signedInWithAChange()
        defer {
            withExtendedLifetime(server) {}
            _ = try? ostack.run(["agent", "stop"])
        }
        #expect(try ostack.run(["pin", "set", "--pin-stdin"], stdin: "7319\n", environment: Self.fast).status == 0)
        let killed = try ostack.run(
            ["pin", "change", "--pin-stdin"], stdin: "7319\n9753\n",
            environment: Self.fast.merging(["OSTACK_FAILPOINT": failpoint]) { _, new in new })
        #expect(killed.status == 137, "\(failpoint): \(killed.stderr)")
        let committed = Self.changeAfterCommit.contains(failpoint)
        try expectPIN(ostack, server, committed ? "9753" : "7319", failpoint)
        // A change that took effect is in the trail, however it ended (AUD-5); one undone is not.
        let changes = try ostack.run(["audit", "--event", "pin.change", "--json"]).stdout
        #expect(changes.contains(#""event":"pin.change","outcome":"ok""#) == committed, "\(failpoint): \(changes)")
        if failpoint != "pin-change.after-open" && !committed {
            #expect(changes.contains(#""details":{"reason":"interrupted"},"event":"pin.change","outcome":"failed""#))
        }
        // The other PIN does not open it (a ring copied without its envelope would fail both).
        #expect(try ostack.run(["lock"]).status == 0)
        let other = try ostack.run(["unlock", "--pin-stdin"], stdin: committed ? "7319\n" : "9753\n")
        #expect(other.status == 4, "\(failpoint): \(other.stderr)")
    }

    /// An unlock that waited for the PIN lock while a `pin change` was killed half-way (its
    /// command's recovery passed over the journal then, as under way) finishes the change first.
    /// It tried the PIN between the new ring and the old envelope, where neither PIN opens the
    /// account, and counted each try.
    @Test func anUnlockWaitingForAKilledChangeFinishesItFirst() throws {
        let (server, ostack) = try signedInWithAChange()
        defer {
            withExtendedLifetime(server) {}
            _ = try? ostack.run(["agent", "stop"])
        }
        #expect(try ostack.run(["pin", "set", "--pin-stdin"], stdin: "7319\n", environment: Self.fast).status == 0)
        #expect(try ostack.run(["lock"]).status == 0)
        let killed = try ostack.run(
            ["pin", "change", "--pin-stdin"], stdin: "7319\n9753\n",
            environment: Self.fast.merging(["OSTACK_FAILPOINT": "pin-change.after-ring-copy"]) { _, new in new })
        #expect(killed.status == 137, "\(killed.stderr)")
        let lockFile = try #require(
            try runProcess(executable: "/usr/bin/find", arguments: [ostack.home.path, "-name", "pin-operation-*.lock"])
                .stdout.split(separator: "\n").first.map(String.init))
        // Another process holds the PIN lock for two seconds, as the killed change held it.
        // Its "locked" line comes once it holds the lock (a fixed 300 ms wait let a loaded machine
        // start the unlock first, which then never waited).
        let holder = try ChildProcess(
            executable: "/usr/bin/flock", arguments: [lockFile, "/bin/sh", "-c", "echo locked; sleep 2"])
        try #require(try holder.readLine(timeout: 60) == "locked", "\(holder.stderrText())")
        let unlock = try ostack.run(["unlock", "--pin-stdin"], stdin: "9753\n")
        _ = try? holder.waitForExit(timeout: 10)
        #expect(unlock.status == 0, "\(unlock.stderr)")
        try expectPIN(ostack, server, "9753", "after the waiting unlock")
    }

    static let removeBeforeJournal = ["pin-remove.after-open", "pin-remove.after-db-key"]

    @Test(
        arguments: removeBeforeJournal + [
            "pin-remove.after-journal", "pin-remove.after-unseal", "pin-remove.after-pin-envelope",
            "pin-remove.after-recovery-envelope", "pin-remove.after-rings",
        ])
    func pinRemoveKilledAtEveryStep(failpoint: String) throws {
        let (server, ostack) = try signedInWithAChange()
        defer {
            withExtendedLifetime(server) {}
            _ = try? ostack.run(["agent", "stop"])
        }
        #expect(try ostack.run(["pin", "set", "--pin-stdin"], stdin: "7319\n", environment: Self.fast).status == 0)
        let killed = try ostack.run(
            ["pin", "remove", "--pin-stdin"], stdin: "7319\n", environment: ["OSTACK_FAILPOINT": failpoint])
        #expect(killed.status == 137, "\(failpoint): \(killed.stderr)")
        if Self.removeBeforeJournal.contains(failpoint) {
            try expectPIN(ostack, server, "7319", failpoint)
        } else {
            try expectNoPIN(ostack, server, failpoint)
        }
    }
}
