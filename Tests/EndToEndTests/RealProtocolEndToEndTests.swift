import OStackTestSupport
import Testing

/// ostack against behaviour a real ObjectStack deployment has and a lenient dev server would hide
/// (issue 13): API-key accounts, all-or-abort batches, objects without bulk writes, unnamed unique
/// violations and the auth-policy gate — all on the dev server's faithful default.
@Suite(.serialized) struct RealProtocolEndToEndTests {
    func signedIn(_ arguments: [String] = []) throws -> (DevServerProcess, OStackRunner) {
        let server = try DevServerProcess(arguments: arguments)
        let ostack = OStackRunner()
        let login = try ostack.login(server.url, "alice@example.com", "alice-pass", extra: ["--alias", "work"])
        try #require(login.status == 0, "\(login.stderr)")
        return (server, ostack)
    }

    /// Requests of one kind the server counted (`"POST /api/v1/data/contact":N`).
    func requests(_ server: DevServerProcess, _ key: String) throws -> Int {
        let counters = try server.control("GET", "counters")
        guard let range = counters.firstRange(of: "\"\(key)\":") else { return 0 }
        return Int(counters[range.upperBound...].prefix { $0.isNumber }) ?? 0
    }

    func count(_ server: DevServerProcess, _ object: String) throws -> Int {
        let body = try server.control("GET", "record?object=\(object)&id=")
        guard let range = body.firstRange(of: "\"count\":") else { return -1 }
        return Int(body[range.upperBound...].prefix { $0.isNumber }) ?? -1
    }

    /// The id of the record a `records create --json` made.
    func createdID(_ result: ProcessResult) throws -> String {
        let text = result.stdout
        let range = try #require(text.firstRange(of: "\"id\":\""), "\(result)")
        return String(text[range.upperBound...].prefix { $0 != "\"" })
    }

    /// Fidelity audit, 2026-11-29: a record that others refer to through a `restrict` lookup cannot
    /// be deleted (409 `DELETE_RESTRICTED`; in `deleteMany`, a row `{code, httpStatus: 409}`). A
    /// `records delete` said "The server had a problem. Try again later." with the record gone here
    /// and kept there; in a batch the row was a validation refusal. A `set_null` lookup is cleared
    /// by the server when its record is deleted, and the next pull brings that.
    @Test func aDeleteOtherRecordsPreventIsRefusedAndTheRecordKept() throws {
        let (server, ostack) = try signedIn()
        defer { withExtendedLifetime(server) {} }
        #expect(try ostack.run(["sync", "track", "task"]).status == 0)
        let kept = try createdID(try ostack.run(["records", "create", "task", "--set", "title=Kept", "--json"]))
        let loose = try createdID(try ostack.run(["records", "create", "task", "--set", "title=Loose", "--json"]))
        let note = try ostack.run(["records", "create", "note", "--set", "title=N", "--set", "task_id=\(kept)"])
        #expect(note.status == 0, "\(note)")

        let online = try ostack.run(["records", "delete", "task", "--", kept])
        #expect(online.status == 9, "\(online)")
        #expect(online.stderr.contains("The server will not delete this task record: other records refer to it."))
        #expect(try ostack.run(["records", "get", "task", "--local", "--", kept]).status == 0)
        #expect(try ostack.run(["queue", "list", "--json"]).stdout.contains("\"entries\":[]"))

        // Queued: the unreferenced one goes, the other is refused as restricted and stays queued.
        try deleteBoth(ostack, server, kept, loose, route: "DELETE /api/v1/data/task", requests: 3)

        // A project's tasks keep no reference to it once it is deleted (`set_null`, the default).
        let project = try createdID(try ostack.run(["records", "create", "project", "--set", "name=P", "--json"]))
        let child = try createdID(
            try ostack.run(["records", "create", "task", "--set", "title=Child", "--set", "project_id=\(project)", "--json"]))
        #expect(try ostack.run(["records", "delete", "project", "--", project]).status == 0)
        let pull = try ostack.run(["sync", "--pull-only", "--json"])
        #expect(pull.stdout.contains("\"pulled\":1"), "\(pull)")
        let task = try ostack.run(["records", "get", "task", "--local", "--json", "--", child]).stdout
        #expect(task.contains("\"project_id\":null"), "\(task)")
    }

    /// The two deletes of `aDeleteOtherRecordsPreventIsRefusedAndTheRecordKept`, queued and synced.
    func deleteBoth(
        _ ostack: OStackRunner, _ server: DevServerProcess, _ kept: String, _ loose: String, route: String,
        requests expected: Int
    ) throws {
        for id in [kept, loose] {
            #expect(try ostack.run(["records", "delete", "task", "--offline", "--", id]).status == 0)
        }
        let sync = try ostack.run(["sync", "--json"])
        #expect(sync.status == 9 && sync.stderr.contains("\"code\":\"refused\""), "\(sync)")
        let counters = try server.control("GET", "counters")
        #expect(try requests(server, route) == expected, "\(counters)")
        #expect(try server.control("GET", "record?object=task&id=\(kept)").contains("Kept"))
        #expect(!(try server.control("GET", "record?object=task&id=\(loose)").contains("Loose")))
        #expect(try ostack.run(["queue", "list", "--json"]).stdout.contains("\"lastError\":\"restricted\""))
    }

    /// The same refusal as a row of `deleteMany` (a server that honours per-row versions, so that
    /// queued deletes go in one batch): `{code: "DELETE_RESTRICTED", httpStatus: 409}` was a
    /// validation refusal.
    @Test func aRestrictedRowOfADeleteManyIsRestricted() throws {
        let (server, ostack) = try signedIn(["--conditional-batch"])
        defer { withExtendedLifetime(server) {} }
        #expect(try ostack.run(["sync", "track", "task"]).status == 0)
        let kept = try createdID(try ostack.run(["records", "create", "task", "--set", "title=Kept", "--json"]))
        let loose = try createdID(try ostack.run(["records", "create", "task", "--set", "title=Loose", "--json"]))
        #expect(try ostack.run(["records", "create", "note", "--set", "title=N", "--set", "task_id=\(kept)"]).status == 0)
        // Two creates and one deleteMany (the server counts routes without their last segment).
        try deleteBoth(ostack, server, kept, loose, route: "POST /api/v1/data/task", requests: 3)
        #expect(try requests(server, "DELETE /api/v1/data/task") == 0)
    }

    /// The records of `object` in the local mirror.
    func localCount(_ ostack: OStackRunner, _ object: String) throws -> Int {
        let list = try ostack.run(["records", "list", object, "--local", "--all", "--format", "tsv"])
        return list.stdout.split(separator: "\n").count - 1
    }

    /// ObjectStack on Postgres keeps `updated_at` in microseconds (`knex.fn.now()` into a
    /// `timestamptz`) and shows milliseconds (node-pg's `Date`), so a keyset page after `(v, id)`
    /// (`updated_at > v`, or `= v` and a later id) brings the records of millisecond `v` again.
    /// Those records were written again and counted as pulled (every `sync` without a look-back
    /// "pulled" the newest millisecond's records again), and a page that ended on the record a
    /// page had ended on before stopped the pull as a server repeating itself.
    @Test func aServerThatKeepsMicrosecondsIsPulledWhole() throws {
        let (server, ostack) = try signedIn(["--microsecond-stamps"])
        defer { withExtendedLifetime(server) {} }
        try server.control("POST", "seed", #"{"object":"task","count":4000}"#)
        #expect(try ostack.run(["sync", "track", "task"]).status == 0)
        let first = try ostack.run(["sync", "--json"])
        // Each record counted once (the records of a page's last millisecond came again and were
        // counted again: "pulled":4193).
        #expect(first.status == 0 && first.stdout.contains("\"pulled\":4000"), "\(first)")
        #expect(try localCount(ostack, "task") == 4000)
        #expect(try ostack.run(["config", "set", "sync.lookback", "0s"]).status == 0)
        for _ in 0..<2 {
            let again = try ostack.run(["sync", "--json"])
            #expect(again.status == 0 && again.stdout.contains("\"pulled\":0"), "\(again)")
        }
    }

    /// One transaction that writes more records than a page holds gives them all one stamp there:
    /// the page after the first brought the same first page again, and the pull stopped as if the
    /// server repeated itself. It pages through the stamp by offset instead.
    @Test func oneStampOnMoreRecordsThanAPageIsPulledWhole() throws {
        let (server, ostack) = try signedIn(["--microsecond-stamps"])
        defer { withExtendedLifetime(server) {} }
        try server.control("POST", "seed", #"{"object":"task","count":4500,"oneTransaction":true}"#)
        try server.control("POST", "seed", #"{"object":"task","count":30}"#)
        #expect(try ostack.run(["sync", "track", "task"]).status == 0)
        let pull = try ostack.run(["sync", "--json"])
        #expect(pull.status == 0, "\(pull)")
        #expect(try localCount(ostack, "task") == 4530)
        try server.control("POST", "seed", #"{"object":"task","count":2000,"oneTransaction":true}"#)
        let next = try ostack.run(["sync", "--json"])
        #expect(next.status == 0 && next.stdout.contains("\"pulled\":2000"), "\(next)")
        #expect(try localCount(ostack, "task") == 6530)
    }

    /// Red team, 2026-11-29: paging through one stamp by offset loses a record when a record of that stamp the
    /// pull already has is changed meanwhile (it leaves the stamp; every record after it moves one
    /// place up, and the next offset page starts one record too late). The pull says it succeeded.
    @Test func aRecordChangedDuringAnOffsetPullLeavesNoGap() throws {
        let (server, ostack) = try signedIn(["--microsecond-stamps"])
        defer { withExtendedLifetime(server) {} }
        try server.control(
            "POST", "seed", #"{"object":"task","count":4500,"oneTransaction":true,"ids":"sequential"}"#)
        #expect(try ostack.run(["sync", "track", "task"]).status == 0)
        // The keyset page after the first (the repeated one, before the pull turns to offsets) is
        // answered late: meanwhile another user edits the first record of the stamp.
        try server.control(
            "POST", "faults",
            #"{"match":{"method":"GET","pathPrefix":"/api/v1/data/task","query":"filter"},"action":"delay","delayMs":3000}"#
        )
        let before = try requests(server, "GET /api/v1/data/task")
        let sync = try ostack.start(["sync", "--json"])
        // Until the delayed page is asked for, however long a loaded machine takes to get there (an 8 s
        // bound could run out first: the edit then came before it, and the test checked nothing).
        let deadline = ChildProcess.now() + 60
        while try requests(server, "GET /api/v1/data/task") < before + 2 && ChildProcess.now() < deadline {
            var spec = timespecLite(0.02)
            _ = nanosleepLite(&spec)
        }
        try #require(try requests(server, "GET /api/v1/data/task") >= before + 2, "no second page asked for")
        try server.control("POST", "modify", #"{"object":"task","id":"tsk_s1","fields":{"title":"Moved"}}"#)
        let status = try sync.waitForExit(timeout: 120)
        #expect(status == 0, "\(sync.remainingStdout()) \(sync.stderrText())")
        #expect(try count(server, "task") == 4500)
        let local = try localCount(ostack, "task")
        #expect(local == 4500, "mirror holds \(local) of 4500; sync said \(sync.remainingStdout())")
    }

    /// Red team, 2026-11-29: a delivered change with a later change of the record queued behind it leaves the
    /// mirror its own copy under the server's new version (`complete`), and notes that version as an
    /// echo. When the later change is refused and undone, the mirror keeps that copy (the old
    /// `updated_at` in it) under the server's version; the pull that used to bring the server's
    /// record now skips it as "unchanged", for good.
    @Test func anUndoneLaterChangeDoesNotLeaveTheMirrorBehindTheServer() throws {
        let (server, ostack) = try signedIn()
        defer { withExtendedLifetime(server) {} }
        #expect(try ostack.run(["sync", "track", "note"]).status == 0)
        let task = try createdID(try ostack.run(["records", "create", "task", "--set", "title=T", "--json"]))
        _ = try createdID(
            try ostack.run(["records", "create", "note", "--set", "title=A", "--set", "task_id=\(task)", "--json"]))
        let note = try createdID(
            try ostack.run(["records", "create", "note", "--set", "title=B", "--set", "task_id=\(task)", "--json"]))
        #expect(try ostack.run(["sync", "--json"]).status == 0)
        // The first change arrives but its answer is lost: it stays queued, sent.
        try server.control(
            "POST", "faults",
            #"{"action":"drop-after","count":1,"match":{"method":"PATCH","pathPrefix":"/api/v1/data/note"}}"#)
        let first = try ostack.run(["records", "update", "note", "--set", "body=first", "--", note])
        #expect(try ostack.run(["queue", "list", "--json"]).stdout.contains("\"entries\":[{"), "\(first)")
        // A second change on top of it, which the server refuses (title A is taken for this task).
        let second = try ostack.run(["records", "update", "note", "--set", "title=A", "--", note])
        #expect(second.status != 0, "\(second)")
        #expect(try ostack.run(["queue", "list", "--json"]).stdout.contains("\"entries\":[]"))
        _ = try ostack.run(["sync", "--json"])
        let remote = try server.control("GET", "record?object=note&id=\(note)")
        let local = try ostack.run(["records", "get", "note", "--local", "--json", "--", note]).stdout
        func stamp(_ text: String) -> String {
            guard let range = text.firstRange(of: "\"updated_at\":\"") else { return "none" }
            return String(text[range.upperBound...].prefix { $0 != "\"" })
        }
        #expect(stamp(local) == stamp(remote), "local \(local)\nserver \(remote)")
    }

    /// Red team, 2026-11-29: a delete that joins a queued edit of the record (one delete) and is
    /// refused as restricted was reported as "The data is not valid." (the undo finds no entry of its
    /// own). Undoing it would drop the edit it joined, so it stays queued, failed, the record deleted
    /// here; the error says why and how to bring the record back.
    @Test func aRestrictedDeleteOverAQueuedEditIsReportedAsRestricted() throws {
        let (server, ostack) = try signedIn()
        defer { withExtendedLifetime(server) {} }
        #expect(try ostack.run(["sync", "track", "task"]).status == 0)
        let kept = try createdID(try ostack.run(["records", "create", "task", "--set", "title=Kept", "--json"]))
        #expect(try ostack.run(["records", "create", "note", "--set", "title=N", "--set", "task_id=\(kept)"]).status == 0)
        #expect(try ostack.run(["records", "update", "task", "--offline", "--set", "title=Edited", "--", kept]).status == 0)
        let online = try ostack.run(["records", "delete", "task", "--", kept])
        #expect(online.status == 9, "\(online)")
        #expect(online.stderr.contains("other records refer to it"), "\(online)")
        #expect(online.stderr.contains("queue discard"), "\(online)")
        let queue = try ostack.run(["queue", "list", "--json"]).stdout
        #expect(queue.contains("\"lastError\":\"restricted\""), "\(queue)")
        #expect(try server.control("GET", "record?object=task&id=\(kept)").contains("Kept"))
    }

    @Test func anAPIKeyAccountWorksAlthoughGetSessionIgnoresKeys() throws {
        let key = "osk_e2eAbCdEf1234567890"
        let server = try DevServerProcess(arguments: ["--api-key", "bob@example.com:\(key)"])
        let ostack = OStackRunner()
        let login = try ostack.run(
            ["login", "--server", server.url, "--api-key-stdin", "--alias", "bot", "--json"], stdin: key + "\n")
        #expect(login.status == 0, "\(login.stderr)")
        #expect(!login.stdout.contains(key) && !login.stderr.contains(key))
        // The account's identity is made from the key's visible prefix, never the secret.
        #expect(login.stdout.contains("apikey-e2eAbC"), "\(login.stdout)")
        #expect(try ostack.run(["accounts", "list", "--json"]).stdout.contains("\"credential\":\"api-key\""))
        #expect(try ostack.run(["status"]).stdout.contains("API key"))
        #expect(try ostack.run(["records", "list", "task"]).status == 0)
        let created = try ostack.run(["records", "create", "task", "--set", "title=By key"])
        #expect(created.status == 0, "\(created.stderr)")
        #expect(try ostack.run(["sync", "track", "task"]).status == 0)
        #expect(try ostack.run(["sync"]).status == 0)
        #expect(try count(server, "task") == 1)
        // A wrong key is wrong credentials, and leaves no account behind.
        let wrong = try ostack.run(
            ["login", "--server", server.url, "--api-key-stdin", "--alias", "bad"], stdin: "osk_not_a_key\n")
        #expect(wrong.status == 3, "\(wrong.stderr)")
        #expect(try ostack.run(["accounts", "list", "--json"]).stdout.contains("\"alias\":\"bad\"") == false)
    }

    /// Five queued creates, one of which the server refuses (a unique e-mail): the other four land,
    /// the bad one is failed with its field named, in at most 1 + 2·⌈log₂ 5⌉ requests.
    @Test func oneRefusedRowOfABatchCostsAtMostLogNRequests() throws {
        let (server, ostack) = try signedIn()
        #expect(
            try ostack.run(["records", "create", "contact", "--set", "name=First", "--set", "email=taken@example.com"])
                .status == 0)
        let before = try requests(server, "POST /api/v1/data/contact")
        let rows = (1...5).map { index in
            #"{"name":"C\#(index)","email":"\#(index == 3 ? "taken" : "c\(index)")@example.com"}"#
        }
        let queued = try ostack.run([
            "records", "create", "contact", "--data", "[" + rows.joined(separator: ",") + "]", "--offline",
        ])
        #expect(queued.status == 0, "\(queued.stderr)")
        let sync = try ostack.run(["sync", "--json"])
        #expect(sync.stdout.contains("\"pushed\":4") && sync.stdout.contains("\"failed\":1"), "\(sync.stdout)")
        #expect(try count(server, "contact") == 5)
        let list = try ostack.run(["queue", "list", "--json"]).stdout
        #expect(list.contains("\"lastError\":\"validation: email\""), "\(list)")
        #expect(try requests(server, "POST /api/v1/data/contact") - before <= 7)
    }

    /// `records create --data '[…]'` whose rows the server partly refuses (here the last, a taken
    /// e-mail): the others are created and listed, the refused row is named by its place and undone
    /// (nothing of it stays queued), and the command exits 9 `refused` — so running it again with
    /// only that row, fixed, creates nothing twice. Before: exit 9 "an older queued change" with no
    /// word of the two created, and the refused row left queued.
    @Test func aBatchCreateNamesTheRowsTheServerRefused() throws {
        let (server, ostack) = try signedIn()
        #expect(
            try ostack.run(["records", "create", "contact", "--set", "name=First", "--set", "email=taken@example.com"])
                .status == 0)
        let rows = [#"{"name":"A","email":"a@example.com"}"#, #"{"name":"B","email":"b@example.com"}"#,
                    #"{"name":"C","email":"taken@example.com"}"#]
        let created = try ostack.run(["records", "create", "contact", "--data", "[" + rows.joined(separator: ",") + "]"])
        #expect(created.status == 9, "\(created.stderr)")
        #expect(created.stdout.contains("Created 2 contact records."), "\(created.stdout)")
        #expect(created.stderr.contains("Row 3 was not created:"), "\(created.stderr)")
        #expect(created.stderr.contains("The server refused 1 change"), "\(created.stderr)")
        #expect(created.stderr.contains("2 of 3 rows were created"), "\(created.stderr)")
        #expect(try count(server, "contact") == 3)
        #expect(try ostack.run(["queue", "list", "--json"]).stdout.contains("\"entries\":[]"))
        // `status` reads the queue as the command left it, the refused row undone (its summary was
        // written before the undo, and said 1 failed).
        let status = try ostack.run(["status", "--json"]).stdout
        #expect(status.contains(#""failed":0"#) && status.contains(#""pending":0"#), "\(status)")
        // The same in JSON: the records created, the refused row with its code.
        let again = try ostack.run([
            "records", "create", "contact", "--json", "--data",
            #"[{"name":"D","email":"taken@example.com"},{"name":"E","email":"e@example.com"}]"#,
        ])
        #expect(again.status == 9)
        #expect(
            again.stdout.contains(#""refused":[{"code":"validation","message":"The data is not valid: E-mail.","row":1}]"#),
            "\(again.stdout)")
        #expect(again.stdout.contains(#""name":"E""#) && !again.stdout.contains(#""name":"D""#), "\(again.stdout)")
        #expect(try count(server, "contact") == 4)
        // A sync has nothing left to send.
        #expect(try ostack.run(["sync"]).status == 0)
        // A record keeps its id: `--set id=` on an update is refused (it stored a copy under the
        // new id), an empty one on a create too.
        let id = try #require(again.stdout.firstRange(of: #""id":""#).map { again.stdout[$0.upperBound...] })
            .prefix { $0 != "\"" }
        let renamed = try ostack.run(["records", "update", "contact", "--set", "id=other", "--", String(id)])
        #expect(renamed.status == 9 && renamed.stderr.contains("A record's id cannot be changed."), "\(renamed.stderr)")
        // Two rows with one id are named as such (it said a record with that id exists).
        let twice = try ostack.run([
            "records", "create", "contact", "--offline", "--data", #"[{"id":"x1","name":"A"},{"id":"x1","name":"B"}]"#,
        ])
        #expect(twice.status == 9 && twice.stderr.contains("Two rows have the id 'x1'"), "\(twice.stderr)")
        // Every row refused: no "Created 0" line, and the hint says none was created.
        let none = try ostack.run(["records", "create", "contact", "--data", #"[{"name":"Z","email":"taken@example.com"}]"#])
        #expect(none.status == 9 && none.stdout.isEmpty, "\(none.stdout)")
        #expect(none.stderr.contains("Nothing was created; fix the row"), "\(none.stderr)")
        let empty = try ostack.run(["records", "create", "contact", "--set", "id=", "--set", "name=X"])
        #expect(empty.status == 9 && empty.stderr.contains("An id cannot be empty."), "\(empty.stderr)")
        #expect(try ostack.run(["records", "get", "contact", "other", "--local"]).status == 7)
    }

    /// A change the server refused is fixed by editing it: the edit folds into it and it is sent
    /// again at once. (The edit used to queue behind the refused create, "The data is not valid.",
    /// and `queue retry` sent the old payload again; discarding dropped the fix with it.)
    @Test func aRefusedCreateIsFixedByEditingIt() throws {
        let (server, ostack) = try signedIn()
        #expect(
            try ostack.run(["records", "create", "contact", "--set", "name=Existing", "--set", "email=a@example.com"])
                .status == 0)
        #expect(
            try ostack.run([
                "records", "create", "contact", "--offline", "--set", "id=c1", "--set", "name=Dup",
                "--set", "email=a@example.com",
            ]).status == 0)
        #expect(try ostack.run(["sync"]).status == 9)
        let fixed = try ostack.run(["records", "update", "contact", "c1", "--set", "email=fixed@example.com"])
        #expect(fixed.status == 0, "\(fixed.stderr)")
        #expect(try count(server, "contact") == 2)
        #expect(try server.control("GET", "record?object=contact&id=c1").contains("fixed@example.com"))
        #expect(try ostack.run(["queue", "list", "--json"]).stdout.contains("\"entries\":[]"))
    }

    /// The same on an object whose `bulk` API method is disabled (405): single writes, remembered;
    /// a unique violation that names no field is looked up once and then is the change's own failure.
    @Test func anObjectWithoutBulkWritesTakesThemOneByOne() throws {
        let (server, ostack) = try signedIn()
        #expect(
            try ostack.run(["records", "create", "note", "--set", "title=Same", "--set", "task_id=t1"]).status == 0)
        let rows = (1...5).map { index in #"{"title":"\#(index == 2 ? "Same" : "N\(index)")","task_id":"t1"}"# }
        #expect(
            try ostack.run([
                "records", "create", "note", "--data", "[" + rows.joined(separator: ",") + "]", "--offline",
            ]).status == 0)
        let sync = try ostack.run(["sync", "--json"])
        #expect(sync.stdout.contains("\"pushed\":4") && sync.stdout.contains("\"failed\":1"), "\(sync.stdout)")
        #expect(try count(server, "note") == 5)
        #expect(try requests(server, "POST /api/v1/data/note") == 1 + 1 + 5)  // the first create, one 405, five
        // Remembered: the next batch goes one by one at once.
        #expect(
            try ostack.run([
                "records", "create", "note", "--data", #"[{"title":"A","task_id":"t2"},{"title":"B","task_id":"t2"}]"#,
                "--offline",
            ]).status == 0)
        // The refused duplicate is still queued: `sync` says so (exit 9 `refused`, not "the server
        // had a problem", exit 11).
        let refused = try ostack.run(["sync", "--json"])
        #expect(refused.status == 9 && refused.stderr.contains("\"code\":\"refused\""), "\(refused.stderr)")
        #expect(try requests(server, "POST /api/v1/data/note") == 7 + 2)
        #expect(try ostack.run(["queue", "list", "--json"]).stdout.contains("\"lastError\":\"validation\""))
    }

    /// A 409 whose producer's code survives only as `declaredCode: "DUPLICATE_RECORD"` (ObjectStack
    /// demotes an unregistered thrown code to that sibling, rest/src/error-response.ts) is the change's
    /// own duplicate: failed at once, never taken for our earlier delivery, never retried.
    @Test func aDeclaredDuplicateIsTheChangesOwnFailure() throws {
        let (server, ostack) = try signedIn()
        #expect(try ostack.run(["records", "create", "task", "--set", "title=Dup", "--offline"]).status == 0)
        try server.control(
            "POST", "faults",
            #"{"action":"status","status":409,"count":1,"match":{"method":"POST"},"body":{"error":"x","code":"RESOURCE_CONFLICT","declaredCode":"DUPLICATE_RECORD"}}"#
        )
        let gets = try requests(server, "GET /api/v1/data/task")
        let sync = try ostack.run(["sync", "--json"])
        #expect(sync.stdout.contains("\"failed\":1"), "\(sync.stdout)")
        #expect(try requests(server, "GET /api/v1/data/task") == gets)  // no lookup by id
        let queue = try ostack.run(["queue", "list", "--json"]).stdout
        #expect(queue.contains("\"lastError\":\"validation\"") && queue.contains("\"attempts\":1"), "\(queue)")
        #expect(try count(server, "task") == 0)
    }

    /// Labels come in the user's language: the `locale` setting (or LANG) is sent as Accept-Language,
    /// and cached metadata in another language is dropped when it changes.
    @Test func labelsFollowTheLocaleSetting() throws {
        let (server, ostack) = try signedIn()
        defer { withExtendedLifetime(server) {} }
        let shown = try ostack.run(["objects", "show", "task", "--json"], environment: ["LANG": "C"])
        let english = shown.stdout
        #expect(english.contains("\"label\":\"Task\"") && english.contains("\"label\":\"Title\""), "\(shown.stderr)")
        #expect(try ostack.run(["config", "set", "locale", "de"]).status == 0)
        let german = try ostack.run(["objects", "show", "task", "--json"]).stdout
        #expect(german.contains("\"label\":\"Aufgabe\"") && german.contains("\"label\":\"Titel\""), "\(german)")
        #expect(try ostack.run(["config", "set", "locale", "auto"]).status == 0)
        let fromLang = try ostack.run(["objects", "show", "task", "--json"], environment: ["LANG": "de_DE.UTF-8"])
            .stdout
        #expect(fromLang.contains("\"label\":\"Aufgabe\""), "\(fromLang)")
        #expect(try ostack.run(["config", "set", "locale", "not a tag"]).status == 9)
    }

    /// `403 PASSWORD_EXPIRED` during a sync of 100 queued changes: exit 3, all 100 still pending; after
    /// the gate is lifted one sync pushes all 100.
    @Test func anExpiredPasswordStopsTheAccountAndKeepsEveryChange() throws {
        let (server, ostack) = try signedIn()
        let rows = (1...100).map { #"{"title":"Gated \#($0)"}"# }
        #expect(
            try ostack.run([
                "records", "create", "task", "--data", "[" + rows.joined(separator: ",") + "]", "--offline",
            ]).status == 0)
        try server.control("POST", "auth-gate", #"{"email":"alice@example.com","gate":"PASSWORD_EXPIRED"}"#)
        let gated = try ostack.run(["sync"])
        #expect(gated.status == 3, "\(gated.stderr)")
        #expect(gated.stderr.contains("password") && gated.stderr.contains("expired"), "\(gated.stderr)")
        let status = try ostack.run(["sync", "status", "--json"]).stdout
        #expect(status.contains("\"pending\":100") && status.contains("\"failed\":0"), "\(status)")
        try server.control("POST", "auth-gate", #"{"email":"alice@example.com","gate":"MFA_REQUIRED"}"#)
        let mfa = try ostack.run(["records", "list", "task", "--remote"])
        #expect(mfa.status == 3 && mfa.stderr.contains("multi-factor"), "\(mfa.stderr)")
        try server.control("POST", "auth-gate", #"{"email":"alice@example.com","gate":null}"#)
        let after = try ostack.run(["sync", "--json"])
        #expect(after.status == 0, "\(after.stdout) \(after.stderr)")
        #expect(after.stdout.contains("\"pushed\":100"))
        #expect(try count(server, "task") == 100)
    }
}
