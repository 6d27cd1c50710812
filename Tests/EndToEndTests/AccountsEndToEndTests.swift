import FoundationEssentials
import OStackTestSupport
import Testing

/// The built `ostack` binary against `ostack-devserver` and the real gnome-keyring of
/// `scripts/with-keyring.sh`, each test in its own home and keyring prefix.
@Suite(.serialized) struct AccountsEndToEndTests {
    @Test func accountsOnTwoServersSwitchAndPerProcessSelection() throws {
        let first = try DevServerProcess()
        let second = try DevServerProcess()
        let ostack = OStackRunner()
        #expect(try ostack.login(first.url, "alice@example.com", "alice-pass", extra: ["--alias", "work"]).status == 0)
        #expect(try ostack.login(first.url, "bob@example.com", "bob-pass", extra: ["--no-switch"]).status == 0)
        #expect(
            try ostack.login(
                second.url, "alice@example.com", "alice-pass", extra: ["--alias", "staging", "--no-switch"]
            ).status == 0)

        let list = try ostack.run(["accounts", "list", "--json"])
        #expect(list.status == 0)
        let accounts = try JSONDecoder().decode(AccountsDocument.self, from: Data(list.stdout.utf8)).accounts
        #expect(accounts.map(\.alias).sorted() == ["bob", "staging", "work"])
        #expect(accounts.filter(\.isDefault).map(\.alias) == ["work"])
        #expect(Set(accounts.map(\.server)) == [first.url, second.url])
        #expect(accounts.allSatisfy { $0.signedIn && !$0.locked && !$0.hasPin })

        func status(_ arguments: [String] = [], env: String? = nil) throws -> StatusDocument {
            let result = try ostack.run(["status", "--json"] + arguments, environment: ["OSTACK_ACCOUNT": env])
            try #require(result.status == 0, "\(result.stderr)")
            return try JSONDecoder().decode(StatusDocument.self, from: Data(result.stdout.utf8))
        }
        #expect(try status().selectedBy == "default")
        #expect(try status().account.alias == "work")
        #expect(try status(env: "bob").account.alias == "bob")
        #expect(try status(env: "bob").selectedBy == "env")
        #expect(try status(["--account", "staging"], env: "bob").selectedBy == "flag")
        #expect(try status(["--account", "staging"], env: "bob").account.alias == "staging")
        // An empty --account (a script's unset variable) is refused, not read as "no flag": it once
        // fell back to OSTACK_ACCOUNT or the default account and acted there.
        for arguments in [["status", "--account", ""], ["records", "list", "task", "--account", " "]] {
            let empty = try ostack.run(arguments, environment: ["OSTACK_ACCOUNT": "bob"])
            #expect(empty.status == 64 && empty.stdout.isEmpty, "\(arguments): \(empty.status) \(empty.stdout)")
            #expect(empty.stderr.contains("--account needs an account"), "\(empty.stderr)")
        }
        // The same as an ACCOUNT argument: an empty one was a prefix of every alias, and
        // `accounts remove "" --force` removed the only account.
        for arguments in [["accounts", "remove", "", "--force"], ["switch", ""], ["logout", " "]] {
            let empty = try ostack.run(arguments)
            #expect(empty.status == 9 && empty.stderr.contains("Name an account"), "\(arguments): \(empty.stderr)")
        }
        #expect(try ostack.run(["accounts", "list", "--json"]).stdout.contains(#""alias":"bob""#))
        // An e-mail address on two servers names both in the ambiguity (it listed none).
        let twice = try ostack.run(["status", "--account", "alice@example.com"])
        #expect(twice.status == 7 && twice.stderr.contains("staging, work"), "\(twice.stderr)")

        // OSTACK_ACCOUNT and `accounts remove` take a whole name: a prefix there is refused with the
        // account it would have picked (a profile's OSTACK_ACCOUNT=alice once moved on to alice-work
        // when alice was removed); --account still takes one.
        let byPrefix = try ostack.run(["status", "--json"], environment: ["OSTACK_ACCOUNT": "sta"])
        #expect(byPrefix.status == 7 && byPrefix.stdout.isEmpty, "\(byPrefix.status) \(byPrefix.stdout)")
        #expect(byPrefix.stderr.contains("OSTACK_ACCOUNT needs") && byPrefix.stderr.contains("did you mean staging"))
        let removal = try ostack.run(["accounts", "remove", "sta", "--force"])
        #expect(removal.status == 7 && removal.stderr.contains("did you mean staging"), "\(removal.stderr)")
        #expect(try status(["--account", "sta"]).account.alias == "staging")
        #expect(try ostack.run(["accounts", "list", "--json"]).stdout.contains(#""alias":"staging""#))

        #expect(try ostack.run(["switch", "bob"]).status == 0)
        #expect(try status().account.alias == "bob")
        // Another "shell" with OSTACK_ACCOUNT is unaffected by the switch.
        #expect(try status(env: "staging").account.alias == "staging")
    }

    @Test func signInLeavesNothingInTheGuestNamespace() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        #expect(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        #expect(!(try ostack.keyringItems(namespace: "\(ostack.keyringPrefix):guest")).contains("attribute"))
        let account = try ostack.keyringItems(
            namespace: "\(ostack.keyringPrefix):auth:127.0.0.1:\(server.port)::usr_alice")
        #expect(account.contains("attribute.kind = session-token"))
        #expect(account.contains("attribute.kind = db-key"))
        #expect(!account.contains("alice@example.com"))  // docs/security.md#kr-2: no e-mail in attributes
    }

    /// `kill -9` at every step of sign-in and migration; the next command ends with one consistent
    /// account (or none, when the account was not yet known) and an empty guest namespace.
    @Test(arguments: [
        "login.after-journal", "login.after-guest-write", "login.after-identify", "login.after-copy",
        "login.after-guest-delete", "login.after-register", "login.after-provision",
    ])
    func killedAtEveryMigrationStep(failpoint: String) throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        let killed = try ostack.login(
            server.url, "alice@example.com", "alice-pass", environment: ["OSTACK_FAILPOINT": failpoint])
        #expect(killed.status == 137, "\(failpoint): \(killed.stderr)")

        // Any command that needs the keyring finishes or cleans up first.
        _ = try ostack.run(["auth", "refresh"])
        #expect(!(try ostack.keyringItems(namespace: "\(ostack.keyringPrefix):guest")).contains("attribute"))
        let accounts = try JSONDecoder().decode(
            AccountsDocument.self, from: Data(try ostack.run(["accounts", "list", "--json"]).stdout.utf8)
        ).accounts
        let known = [
            "login.after-identify", "login.after-copy", "login.after-guest-delete", "login.after-register",
            "login.after-provision",
        ].contains(failpoint)
        #expect(accounts.count == (known ? 1 : 0), "\(failpoint)")
        if known {
            #expect(try ostack.run(["auth", "refresh"]).status == 0)
            let items = try ostack.keyringItems(
                namespace: "\(ostack.keyringPrefix):auth:127.0.0.1:\(server.port)::usr_alice")
            #expect(items.contains("session-token") && items.contains("db-key"))
        }
        // And signing in again always works and keeps one account.
        #expect(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        #expect(try ostack.run(["accounts", "list", "--json"]).stdout.components("\"id\"") == 1)
    }

    /// Eight processes refresh at once against a rotating server with a short session: all succeed,
    /// nobody is signed out, and the server sees one refresh, not eight (two `get-session` calls:
    /// the refresh, and the check that the rotated token is still alice's — docs/security.md#tok-5).
    @Test func concurrentRefreshesWithRotationAreSingleFlight() throws {
        let server = try DevServerProcess(arguments: [
            "--rotate-tokens", "--rotation-grace", "5", "--session-ttl", "120",
        ])
        let ostack = OStackRunner()
        #expect(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        usleepSeconds(2.5)  // past the explicit-refresh freshness window of the login itself
        let before = try refreshes(server)
        let processes = try (0..<8).map { _ in try ostack.start(["auth", "refresh", "--json"]) }
        let statuses = try processes.map { try $0.waitForExit(timeout: 60) }
        #expect(statuses == Array(repeating: 0, count: 8), "\(processes.map { $0.stderrText() })")
        #expect(try refreshes(server) - before == 2)
        let status = try ostack.run(["status", "--json"])
        #expect(status.stdout.contains("\"state\":\"valid\""))
        // The rotated token is the one in the keyring: a further refresh is accepted by the server.
        usleepSeconds(2.5)
        let again = try ostack.run(["auth", "refresh"])
        #expect(again.status == 0, "\(again.stderr)")
    }

    @Test func expiredSessionExitsThreeNamingTheAccountAndKeepsData() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        #expect(
            try ostack.login(server.url, "alice@example.com", "alice-pass", extra: ["--alias", "work"]).status == 0)
        try server.control("POST", "expire-sessions")
        usleepSeconds(2.5)
        let result = try ostack.run(["auth", "refresh"])
        #expect(result.status == 3)
        #expect(result.stderr.contains("work"))
        #expect(result.stderr.contains("expired"))
        let status = try ostack.run(["status", "--json"])
        #expect(status.stdout.contains("\"state\":\"expired\""))
        let items = try ostack.keyringItems(
            namespace: "\(ostack.keyringPrefix):auth:127.0.0.1:\(server.port)::usr_alice")
        #expect(items.contains("db-key"))
        let files = try runProcess(executable: "/usr/bin/find", arguments: [ostack.home.path, "-name", "data.db"])
        #expect(files.stdout.contains("data.db"))
    }

    /// Error bodies full of server internals and a canary never reach output, logs or files.
    @Test func serverInternalsNeverLeak() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        #expect(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        let canary = "CNRY-\(UInt32.random(in: 0...UInt32.max))"
        let body =
            #"{"error":"\#(canary) at /srv/\#(canary)-PATH/app.rb:12 SELECT * FROM users WHERE x='\#(canary)-SQL'","code":"INTERNAL_ERROR","stack":"Error: \#(canary)\n    at db-\#(canary).internal"}"#
        try server.control("POST", "faults", #"{"count":10,"action":"status","status":500,"body":\#(body)}"#)
        usleepSeconds(2.5)
        for arguments in [["auth", "refresh"], ["auth", "refresh", "--verbose"], ["auth", "refresh", "--json"]] {
            let result = try ostack.run(arguments)
            #expect(result.status == 11)
            #expect(!result.stdout.contains(canary) && !result.stderr.contains(canary), "\(arguments)")
            #expect(!result.stderr.contains("SELECT") && !result.stderr.contains("/srv/"))
        }
        try server.control("DELETE", "faults")
        try server.control("POST", "faults", #"{"count":1,"action":"status","status":401,"body":\#(body)}"#)
        #expect(!(try ostack.login(server.url, "alice@example.com", "alice-pass").stderr.contains(canary)))
        let everything = String(decoding: try ostack.allFileBytes(), as: UTF8.self)
        #expect(!everything.contains(canary))
    }

    @Test func noKeyringFailsClosedWithExitTenAndDeletesNothing() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        #expect(
            try ostack.login(server.url, "alice@example.com", "alice-pass", extra: ["--alias", "work"]).status == 0)
        let noBus: [String: String?] = [
            "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent/bus", "OSTACK_KEYRING_TIMEOUT": "2",
        ]
        let login = try ostack.login(server.url, "bob@example.com", "bob-pass", environment: noBus)
        #expect(login.status == 10)
        #expect(
            login.stderr.contains("ostack: hint:") && login.stderr.contains("add --keyring file"), "\(login.stderr)")
        let remove = try ostack.run(["accounts", "remove", "work"], environment: noBus)
        #expect(remove.status == 10)
        // An existing account's command does not send the user to --keyring file, which would only
        // give the same error again (its secrets stay in the Secret Service).
        #expect(
            !remove.stderr.contains("add --keyring file")
                && remove.stderr.contains("only chooses the backend of a new sign-in"), "\(remove.stderr)")
        let again = try ostack.run(["accounts", "remove", "work", "--keyring", "file"], environment: noBus)
        #expect(again.status != 0 && !again.stderr.contains("add --keyring file"), "\(again.stderr)")
        #expect(try ostack.run(["accounts", "list"]).stdout.contains("work"))
        #expect(
            try ostack.keyringItems(namespace: "\(ostack.keyringPrefix):auth:127.0.0.1:\(server.port)::usr_alice")
                .contains("db-key"))
        // Metadata-only commands keep working without a keyring.
        #expect(try ostack.run(["status"], environment: noBus).status == 0)
    }

    @Test func removeLeavesNoKeyringItemAndLogoutKeepsData() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        #expect(try ostack.run(["logout", "--all"]).stdout == "No accounts.\n")
        #expect(
            try ostack.login(server.url, "alice@example.com", "alice-pass", extra: ["--alias", "work"]).status == 0)
        #expect(try ostack.login(server.url, "bob@example.com", "bob-pass", extra: ["--alias", "home"]).status == 0)
        let namespace = "\(ostack.keyringPrefix):auth:127.0.0.1:\(server.port)::usr_alice"
        #expect(try ostack.run(["logout", "work"]).status == 0)
        let afterLogout = try ostack.keyringItems(namespace: namespace)
        #expect(!afterLogout.contains("session-token") && afterLogout.contains("db-key"))
        #expect(try ostack.run(["status", "--account", "work", "--json"]).stdout.contains("\"state\":\"signed-out\""))
        // A second logout says there was nothing to do (it said "Signed out of work. The server
        // could not be told") and records no second sign-out.
        let again = try ostack.run(["logout", "work"])
        #expect(again.status == 0 && again.stdout == "work was already signed out.\n", "\(again.stdout)")
        let events = try ostack.run(["audit", "work", "--event", "sign-out", "--json"]).stdout
        #expect(events.components(separatedBy: "\"event\":\"sign-out\"").count == 2, "\(events)")
        #expect(try ostack.run(["accounts", "remove", "work"]).status == 0)
        #expect(!(try ostack.keyringItems(namespace: namespace)).contains("attribute"))
        #expect(!(try ostack.run(["accounts", "list"])).stdout.contains("work"))
        #expect(try ostack.run(["status", "--account", "home"]).status == 0)
        // Signing out of the default account leaves it the default, and the document says so.
        let out = try ostack.run(["logout", "home", "--json"])
        #expect(out.status == 0 && out.stdout.contains("\"isDefault\":true"), "\(out.stdout)")
        // `--all` with every account signed out says so (it printed nothing), and signs nothing out.
        let none = try ostack.run(["logout", "--all"])
        #expect(none.status == 0 && none.stdout == "Every account was already signed out.\n", "\(none.stdout)")
        #expect(try ostack.run(["logout", "--all", "--json"]).stdout == "{\"accounts\":[]}\n")
        // A signed-out account that still holds a credential in the keyring (put there past ostack)
        // is signed out by `--all` too: it was passed over as signed out, the token left in place.
        let homeNamespace = "\(ostack.keyringPrefix):auth:127.0.0.1:\(server.port)::usr_bob"
        let planted = try runSecretTool(
            [
                "store", "--label", "leftover", "app", "ostack", "namespace", homeNamespace, "account",
                "127.0.0.1:\(server.port)::usr_bob", "kind", "session-token", "version", "1",
            ], stdin: Array("left-behind-token".utf8))
        try #require(planted.status == 0, "\(planted.stderr)")
        try #require(try ostack.keyringItems(namespace: homeNamespace).contains("session-token"))
        let swept = try ostack.run(["logout", "--all"])
        #expect(swept.status == 0 && swept.stdout.hasPrefix("Signed out of home."), "\(swept.stdout) \(swept.stderr)")
        #expect(!(try ostack.keyringItems(namespace: homeNamespace)).contains("session-token"))
    }

    /// Two homes signing in to one account at the same moment: the second waits while the first
    /// claims the namespace and lists the account, and is then refused. Before, the second found the
    /// first's marker while the first's registry did not list the account yet, took the first for a
    /// home that is gone, took the namespace over, and both homes ended up sharing the account's items.
    @Test func twoHomesSigningInAtOnceNeverBothClaimTheAccount() throws {
        let server = try DevServerProcess()
        let first = OStackRunner()
        let secondHome = TemporaryDirectory(prefix: "ostack-e2e-second")
        let second: [String: String?] = ["OSTACK_HOME": secondHome.path]
        let claiming = try first.startPaused(
            at: "login.after-claim",
            ["login", "--server", server.url, "--email", "alice@example.com", "--password-stdin"],
            stdin: "alice-pass\n")
        let racing = try first.login(server.url, "alice@example.com", "alice-pass", extra: ["--json"], environment: second)
        #expect(try claiming.waitForExit(timeout: 60) == 0, "\(claiming.stderrText())")
        #expect(racing.status == 10, "\(racing.stdout) \(racing.stderr)")
        #expect(racing.stderr.contains("\"code\":\"account-in-another-home\""), "\(racing.stderr)")
        #expect(try first.run(["accounts", "list", "--json"], environment: second).stdout == "{\"accounts\":[]}\n")
        #expect(try first.run(["records", "list", "task", "--remote"]).status == 0)
        let doctor = try first.run(["doctor"])
        #expect(doctor.status == 0, "\(doctor.stdout) \(doctor.stderr)")
    }

    /// A sign-in killed after its claim (journal at `migrating`) is finished by the next command of
    /// that home, under the claim lock and only while no other home that lists the account has the
    /// namespace. Here another home found the marker of a home not listing the account, took the
    /// namespace over and listed it; the first home's recovery then listed it too, and both homes
    /// shared the account's items (a reviewer's test). Now the interrupted sign-in is abandoned.
    @Test func aSignInFinishedAfterACrashDoesNotShareAnotherHomesClaim() throws {
        let server = try DevServerProcess()
        let first = OStackRunner()
        let secondHome = TemporaryDirectory(prefix: "ostack-e2e-second")
        let second: [String: String?] = ["OSTACK_HOME": secondHome.path]
        let crashed = try first.login(
            server.url, "alice@example.com", "alice-pass", environment: ["OSTACK_FAILPOINT": "login.after-identify"])
        #expect(crashed.status != 0)
        let taken = try first.login(server.url, "alice@example.com", "alice-pass", environment: second)
        #expect(taken.status == 0, "\(taken.stdout) \(taken.stderr)")
        // The first home's next command finishes its interrupted sign-in.
        _ = try first.run(["auth", "refresh"])
        let listedFirst = try first.run(["accounts", "list", "--json"]).stdout.contains("alice@example.com")
        let listedSecond = try first.run(["accounts", "list", "--json"], environment: second).stdout
            .contains("alice@example.com")
        #expect(!(listedFirst && listedSecond), "both homes list the account (shared namespace)")
        #expect(listedSecond && !listedFirst)
        #expect(try first.run(["records", "list", "task", "--remote"], environment: second).status == 0)
    }

    /// `accounts remove` deletes the account's `home` item last: while its other items go, another
    /// home's sign-in to the account is refused, never started on the key material being deleted.
    @Test func aRemovalDeletesTheHomeItemLastAndAnotherHomeSignsInAfterIt() throws {
        let server = try DevServerProcess()
        let first = OStackRunner()
        let secondHome = TemporaryDirectory(prefix: "ostack-e2e-second")
        let second: [String: String?] = ["OSTACK_HOME": secondHome.path]
        let namespace = "\(first.keyringPrefix):auth:127.0.0.1:\(server.port)::usr_alice"
        try #require(try first.login(server.url, "alice@example.com", "alice-pass").status == 0)
        let removing = try first.startPaused(at: "remove.before-home-item", ["accounts", "remove", "alice", "--yes"])
        let left = try first.keyringItems(namespace: namespace)
        #expect(left.contains("kind = home") && !left.contains("kind = db-key"), "\(left)")
        let early = try first.login(server.url, "alice@example.com", "alice-pass", environment: second)
        #expect(early.status == 10, "\(early.stdout) \(early.stderr)")
        #expect(try removing.waitForExit(timeout: 60) == 0, "\(removing.stderrText())")
        #expect(try first.login(server.url, "alice@example.com", "alice-pass", environment: second).status == 0)
        #expect(try first.run(["records", "list", "task", "--remote"], environment: second).status == 0)
        let doctor = try first.run(["doctor"], environment: second)
        #expect(doctor.status == 0, "\(doctor.stdout) \(doctor.stderr)")
    }

    /// Two homes (two `OSTACK_HOME`s) on one keyring prefix address an account's items by the same
    /// namespace. The second home's sign-in to an account the first one has is refused before it
    /// writes anything; before the home marker it went through, and removing the account there then
    /// erased the first home's database key (docs/keyring.md, "One home per account").
    @Test func twoHomesOnOneKeyringNeverShareAnAccount() throws {
        let server = try DevServerProcess()
        let first = OStackRunner()
        let secondHome = TemporaryDirectory(prefix: "ostack-e2e-second")
        let second = ["OSTACK_HOME": secondHome.path]
        let namespace = "\(first.keyringPrefix):auth:127.0.0.1:\(server.port)::usr_alice"
        try #require(try first.login(server.url, "alice@example.com", "alice-pass").status == 0)
        #expect(try first.run(["sync", "track", "task"]).status == 0)
        #expect(try first.run(["sync"]).status == 0)
        let stored = try first.run(["records", "list", "task", "--local", "--json"])
        try #require(stored.status == 0, "\(stored.stderr)")

        let refused = try first.login(server.url, "alice@example.com", "alice-pass", extra: ["--json"], environment: second)
        #expect(refused.status == 10, "\(refused.stdout) \(refused.stderr)")
        #expect(refused.stderr.contains("\"code\":\"account-in-another-home\""), "\(refused.stderr)")
        #expect(try first.run(["accounts", "list", "--json"], environment: second).stdout == "{\"accounts\":[]}\n")
        #expect(!(try first.keyringItems(namespace: "\(first.keyringPrefix):guest")).contains("attribute"))
        // The refused sign-in's session was signed out; the first home's was not touched.
        #expect(try first.run(["records", "list", "task", "--remote"]).status == 0)
        #expect(try first.run(["records", "list", "task", "--local", "--json"]).stdout == stored.stdout)
        let doctor = try first.run(["doctor"])
        #expect(doctor.status == 0, "\(doctor.stdout) \(doctor.stderr)")

        // Each home's global audit trail has an anchor of its own: the second home's removal of
        // another account (a global event) left the first home's trail intact (it said "truncated").
        try #require(try first.login(server.url, "bob@example.com", "bob-pass", environment: second).status == 0)
        #expect(try first.run(["accounts", "remove", "bob", "--yes"], environment: second).status == 0)
        for environment in [[:], second] {
            let verify = try first.run(["audit", "verify", "--all", "--json"], environment: environment)
            #expect(verify.status == 0 && verify.stdout.contains(#""id":"global","intact":true"#), "\(verify.stdout)")
        }

        // A namespace shared before markers existed (the marker deleted by hand): the second home
        // signs in and claims it; removing the account in the first home then keeps the keys the
        // second one uses, and signs nothing out.
        let unmarked = try runSecretTool(["clear", "namespace", namespace, "kind", "home"])
        try #require(unmarked.status == 0, "\(unmarked.stderr)")
        try #require(try first.login(server.url, "alice@example.com", "alice-pass", environment: second).status == 0)
        let removed = try first.run(["accounts", "remove", "alice", "--yes", "--force"])
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(try first.run(["records", "list", "task", "--remote"], environment: second).status == 0)
        #expect(try first.run(["sync"], environment: second).status == 0)
        #expect(try first.run(["records", "list", "task", "--local"], environment: second).status == 0)
        let shared = try first.run(["doctor", "--json"], environment: second)
        #expect(shared.stdout.contains(#""name":"keyring-items","status":"ok""#), "\(shared.stdout)")

        // A home that is gone leaves its claim behind: the next sign-in elsewhere takes the
        // namespace over and starts it empty.
        _ = try runProcess(executable: "/bin/rm", arguments: ["-rf", secondHome.path])
        try #require(try first.login(server.url, "alice@example.com", "alice-pass").status == 0)
        #expect(try first.run(["sync"]).status == 0)
        let after = try first.run(["doctor"])
        #expect(after.status == 0, "\(after.stdout) \(after.stderr)")
    }

    /// Two homes on one prefix, each with a sign-in killed after its token reached the keyring: each
    /// home's next command signs out its own session and deletes its own item. With one guest item
    /// for both, the second token replaced the first, the first home signed out the second's
    /// session, and the first session stayed alive with nobody to end it.
    @Test func twoHomesSigningInAtOnceKeepTheirOwnGuestItems() throws {
        let server = try DevServerProcess()
        let first = OStackRunner()
        let secondHome = TemporaryDirectory(prefix: "ostack-e2e-second")
        let second: [String: String?] = ["OSTACK_HOME": secondHome.path]
        let crash: [String: String?] = ["OSTACK_FAILPOINT": "login.after-guest-write"]
        #expect(try first.login(server.url, "alice@example.com", "alice-pass", environment: crash).status == 137)
        #expect(
            try first.login(server.url, "bob@example.com", "bob-pass", environment: second.merging(crash) { $1 })
                .status == 137)
        _ = try first.run(["auth", "refresh"])
        _ = try first.run(["auth", "refresh"], environment: second)
        #expect(!(try first.keyringItems(namespace: "\(first.keyringPrefix):guest")).contains("attribute"))
        let counters = try server.control("GET", "counters")
        #expect(counters.contains("\"liveSessions\":0"), "\(counters)")
    }

    /// A keyring call that ignores its deadline (libsecret stuck after KeePassXC crashed mid-call
    /// never returned, and the command outlived any deadline): 10 s after the deadline the process
    /// says `keyring-timeout` and ends, exit 10, as a `kill -9` would leave things (recoverable).
    @Test func aKeyringCallThatNeverReturnsEndsTheCommand() throws {
        let server = try DevServerProcess()
        let ostack = OStackRunner()
        try #require(try ostack.login(server.url, "alice@example.com", "alice-pass").status == 0)
        let started = ContinuousClock.now
        let hang: [String: String?] = ["OSTACK_FAILPOINT": "hang:keyring.call", "OSTACK_KEYRING_TIMEOUT": "0.5"]
        // Both at once: each waits out its grace.
        let human = try ostack.start(["records", "list", "task", "--local"], environment: hang)
        let json = try ostack.start(["records", "list", "task", "--local", "--json"], environment: hang)
        #expect(try human.waitForExit(timeout: 40) == 10, "\(human.stderrText())")
        #expect(human.stderrText().contains("ostack: error: The keyring did not answer in time."), "\(human.stderrText())")
        #expect(try json.waitForExit(timeout: 40) == 10)
        #expect(json.stderrText().hasPrefix(#"{"error":{"code":"keyring-timeout""#), "\(json.stderrText())")
        #expect(ContinuousClock.now - started < .seconds(30))
        #expect(try ostack.run(["auth", "refresh"]).status == 0)  // nothing was left half done
    }

    func refreshes(_ server: DevServerProcess) throws -> Int {
        let counters = try server.control("GET", "counters")
        let digits = counters.split(separator: "\"refreshes\":").dropFirst().first?.prefix { $0.isNumber } ?? ""
        return Int(digits) ?? -1
    }
}

struct AccountsDocument: Decodable {
    struct Account: Decodable {
        var id: String
        var alias: String
        var server: String
        var userId: String
        var email: String
        var isDefault: Bool
        var signedIn: Bool
        var locked: Bool
        var hasPin: Bool
    }
    var accounts: [Account]
}

struct StatusDocument: Decodable {
    struct Session: Decodable {
        var state: String
    }
    var account: AccountsDocument.Account
    var selectedBy: String?
    var session: Session
}

func usleepSeconds(_ seconds: Double) {
    var remaining = timespecLite(seconds)
    _ = nanosleepLite(&remaining)
}

extension String {
    func components(_ separator: String) -> Int {
        split(separator: separator, omittingEmptySubsequences: false).count - 1
    }
}
