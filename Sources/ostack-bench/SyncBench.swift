import CurlKit
import FoundationEssentials
import Glibc
import OStackCore
import OStackTestSupport
import PlatformKit
import SQLCipherKit
import SodiumKit

/// The sync core's targets (docs/testing.md), on realistic fixtures (random 16-character ids,
/// records of about 420 bytes, `updated_at` not in id order), each against a baseline measured in
/// the same run:
///
/// - `pull-100k-random`: `ostack sync --pull-only` of 100 000 records (the real binary, real keyring,
///   dev server) vs the storage floor: the same bytes inserted into a plain rowid table (same page
///   size, cipher and settings, 2 000-row transactions): ≥ 0.4×; peak RSS ≤ 120 MB. The old
///   baseline (the same rows into a table of the pull's own shape) is kept as information.
/// - `pull-1m-random`: the same with 1 000 000 records: ≤ 11× the 100k time, peak RSS ≤ 1.1×.
/// - `pull-incremental-1k-into-1m`: 1 000 records changed on the server, pulled into that mirror;
///   the pull's own cost (its time minus a pull with nothing to fetch: process start, keyring,
///   database open) ≤ 2× paging those records from the server alone.
/// - `query-*-1m`: `LocalStore.query` on 1 000 000 records — an indexed equality ≤ 5 ms, a compound
///   scan ≤ 10× the same scan on 100 000.
/// - `push-10k-creates`: 10 000 queued creates, batched, vs one request per mutation: ≥ 10×.
enum SyncBench {
    typealias Rows = [(id: String, version: String?, json: [UInt8])]

    struct Session {
        let server: DevServerProcess
        let home: TemporaryDirectory
        let environment: [String: String]
        let ostack: String

        init(ostack: String, serverArguments: [String] = []) throws {
            try self.init(ostack: ostack, server: try DevServerProcess(arguments: serverArguments))
        }

        /// A fresh home and keyring namespace signed in to `server` (another session's data).
        init(ostack: String, server: DevServerProcess) throws {
            self.ostack = ostack
            self.server = server
            home = TemporaryDirectory(prefix: "ostack-bench-sync")
            var environment = ChildProcess.currentEnvironment()
            environment["OSTACK_HOME"] = home.path
            environment["OSTACK_KEYRING_PREFIX"] = "ostack-bench-\(UInt32.random(in: 0...UInt32.max))"
            environment["NO_COLOR"] = "1"
            self.environment = environment
            try run(
                ["login", "--server", server.url, "--email", "alice@example.com", "--password-stdin"],
                stdin: "alice-pass\n")
        }

        @discardableResult
        func run(_ arguments: [String], stdin: String? = nil) throws -> ProcessResult {
            let result = try runProcess(
                executable: ostack, arguments: arguments, environment: environment, stdin: stdin.map { Array($0.utf8) },
                timeout: 900)
            precondition(result.status == 0, "ostack \(arguments.first ?? "") failed: \(result.stderr)")
            return result
        }

        func timed(_ arguments: [String]) throws -> Double {
            let start = Measure.now()
            try run(arguments)
            return Measure.now() - start
        }

        /// Runs `ostack sync --pull-only`: seconds and the child's peak RSS in MB.
        func pull() throws -> (seconds: Double, peakMB: Double) {
            try measured(["sync", "--pull-only"])
        }

        /// Runs `ostack <arguments>`: seconds and the child's peak RSS in MB. `discardOutput` sends
        /// its stdout to /dev/null (through `sh -c exec`: the same process, so the same pid).
        func measured(_ arguments: [String], discardOutput: Bool = false) throws -> (seconds: Double, peakMB: Double) {
            // VmHWM of the child's own address space, sampled until it exits. (rusage's ru_maxrss is
            // useless here: a posix_spawn'd child inherits the bench's own high-water mark.)
            let start = Measure.now()
            let child =
                discardOutput
                ? try ChildProcess(
                    executable: "/bin/sh", arguments: ["-c", "exec \"$0\" \"$@\" >/dev/null", ostack] + arguments,
                    environment: environment)
                : try ChildProcess(executable: ostack, arguments: arguments, environment: environment)
            var peakKB = 0
            var status: Int32?
            while status == nil {
                peakKB = max(peakKB, SyncBench.highWaterKB(child.pid))
                status = try? child.waitForExit(timeout: 0.005)
                if Measure.now() - start > 900 { throw BenchError("pull timed out") }
            }
            let seconds = Measure.now() - start
            precondition(status == 0, "\(arguments.first ?? "") failed: \(child.stderrText())")
            return (seconds, Double(peakKB) / 1024)
        }
    }

    static func wanted(_ name: String, _ only: Set<String>?) -> Bool {
        only.map { $0.contains("sync") || $0.contains(name) } ?? true
    }

    /// Rows: `sync` (everything), or `pull-100k`, `pull-1m` (with the incremental pull and the 1M
    /// queries), `push` through `--only`.
    static func run(ostack: String, only: Set<String>?) throws -> [BenchResult] {
        var results: [BenchResult] = []
        var pull100k: (seconds: Double, peakMB: Double)?
        var scan100k: ScanFixture?
        if wanted("pull-100k", only) || wanted("pull-1m", only) {
            let session = try Session(ostack: ostack)
            try session.server.control("POST", "seed", #"{"object":"task","count":100000}"#)
            let (rows, item) = try fetchRows(session.server, count: 100_000)
            // Five first pulls (fresh accounts on the same server) and five of each raw insert,
            // alternating; medians compared (one slow run on a busy machine decides nothing).
            var pulls: [(seconds: Double, peakMB: Double)] = []
            var floors: [Double] = []
            var sameShapes: [Double] = []
            for round in 0..<5 {
                let puller = round == 0 ? session : try Session(ostack: ostack, server: session.server)
                try puller.run(["sync", "track", "task"])
                pulls.append(try puller.pull())
                floors.append(try insertSeconds(rows, shape: .plainRowid))
                sameShapes.append(try insertSeconds(rows, shape: .currentMirror, item: item))
            }
            // Time and peak RSS as medians (the 300k and 1M rows compare against them); the largest
            // peak of the five answers the absolute bound.
            let pull = (seconds: Measure.median(pulls.map(\.seconds)), peakMB: Measure.median(pulls.map(\.peakMB)))
            let largestPeak = pulls.map(\.peakMB).max()!
            pull100k = pull
            let floor = Measure.median(floors)
            let sameShape = Measure.median(sameShapes)
            let oldShape = try insertSeconds(rows, shape: .previousMirror)
            let pullRate = 100_000 / pull.seconds
            let floorRate = 100_000 / floor
            results.append(
                BenchResult(
                    name: "pull-100k-random", value: pullRate, unit: "records/s", baseline: floorRate,
                    ratio: pullRate / floorRate, target: ">= 0.4 x storage floor (plain rowid insert)",
                    ok: pullRate >= 0.4 * floorRate))
            results.append(
                BenchResult(
                    name: "pull-100k-random-peak-rss", value: largestPeak, unit: "MB", baseline: nil, ratio: nil,
                    target: "<= 120 MB (the largest of five pulls)", ok: largestPeak <= 120))
            results.append(
                BenchResult(
                    name: "info-insert-previous-mirror-shape", value: 100_000 / oldShape, unit: "records/s",
                    baseline: floorRate, ratio: floor / oldShape,
                    target: "information: WITHOUT ROWID (object, id), the pre-0005 mirror", ok: true))
            // Memory stays flat however big the answer (issue 14): a remote list of 100 000 records,
            // written as JSON, and a pull of 300 000 against the 100 000 one.
            // As JSON and as TSV (the default when stdout is not a terminal): the larger peak.
            let listed = max(
                try session.measured(["records", "list", "task", "--remote", "--all", "--json"], discardOutput: true)
                    .peakMB,
                try session.measured(["records", "list", "task", "--remote", "--all"], discardOutput: true).peakMB)
            results.append(
                BenchResult(
                    name: "list-remote-100k-peak-rss", value: listed, unit: "MB", baseline: nil, ratio: nil,
                    target: "<= 120 MB (records list --remote --all of 100 000, --json and TSV: the larger)",
                    ok: listed <= 120))
            let large = try Session(ostack: ostack)
            try large.server.control("POST", "seed", #"{"object":"task","count":300000}"#)
            try large.run(["sync", "track", "task"])
            let pull300k = try large.pull()
            results.append(
                BenchResult(
                    name: "pull-300k-peak-rss", value: pull300k.peakMB, unit: "MB", baseline: pull.peakMB,
                    ratio: pull300k.peakMB / pull.peakMB,
                    target: "<= 1.1 x the 100k pulls' median peak RSS and <= 120 MB",
                    ok: pull300k.peakMB <= 1.1 * pull.peakMB && pull300k.peakMB <= 120))
            // Issue 14: hardening the pull (a strict check of every record, guards) keeps it at the
            // raw insert rate of the same rows into the mirror's own table shape.
            results.append(
                BenchResult(
                    name: "pull-100k-vs-mirror-insert", value: pullRate, unit: "records/s",
                    baseline: 100_000 / sameShape, ratio: pullRate / (100_000 / sameShape),
                    target:
                        ">= 0.85 x the same rows through the pull's write path alone (records + the maps' levels)",
                    ok: pullRate >= 0.85 * (100_000 / sameShape)))
            let (queries, fixture) = try query(rows, item: item, suffix: "100k")
            scan100k = fixture
            results += queries
        }
        if wanted("pull-1m", only), let pull100k, let scan100k {
            results += try million(ostack: ostack, pull100k: pull100k, scan100k: scan100k)
        }
        if wanted("push", only) {
            let batched = try pushSeconds(ostack: ostack, serverArguments: [])
            let single = try pushSeconds(ostack: ostack, serverArguments: ["--batch-cap", "1"])
            results.append(
                BenchResult(
                    name: "push-10k-creates", value: batched * 1000, unit: "ms", baseline: single * 1000,
                    ratio: single / batched,
                    target: ">= 10x faster than one request per mutation; <= 5000 ms",
                    ok: single / batched >= 10 && batched <= 5))
        }
        return results
    }

    /// The 1M rows: one mirror, pulled once, serves the pull, the incremental pull and the queries.
    static func million(ostack: String, pull100k: (seconds: Double, peakMB: Double), scan100k: ScanFixture) throws
        -> [BenchResult]
    {
        var results: [BenchResult] = []
        let session = try Session(ostack: ostack)
        try session.server.control("POST", "seed", #"{"object":"task","count":1000000}"#)
        try session.run(["sync", "track", "task"])
        let pull = try session.pull()
        results.append(
            BenchResult(
                name: "pull-1m-random", value: pull.seconds, unit: "s", baseline: pull100k.seconds,
                ratio: pull.seconds / pull100k.seconds, target: "<= 11 x pull-100k-random",
                ok: pull.seconds <= 11 * pull100k.seconds))
        results.append(
            BenchResult(
                name: "pull-1m-random-peak-rss", value: pull.peakMB, unit: "MB", baseline: pull100k.peakMB,
                ratio: pull.peakMB / pull100k.peakMB, target: "<= 1.1 x the 100k pull",
                ok: pull.peakMB <= 1.1 * pull100k.peakMB))

        // Incremental: 1 000 records changed on the server, seven times over (another thousand each
        // round). Each round: three empty pulls (nothing changed: process start, keyring, database
        // open; their median), the changes, the request alone that pages them (its median of
        // three), then the pull that brings them; the pull's own cost is its time minus the empty
        // pulls' median. Medians of the rounds are compared (one slow run on a busy machine decides
        // nothing: a single empty pull as the baseline let its ±10 ms noise decide the row).
        let client = HTTPClient()
        let token = try signIn(client, session.server)
        let auth = [("Authorization", "Bearer \(token)")]
        var owns: [Double] = []
        var pagings: [Double] = []
        var pulls: [Double] = []
        var idles: [Double] = []
        for round in 0..<7 {
            let newest = try client.send(
                HTTPRequest(
                    url: session.server.url + "/api/v1/data/task?top=1&count=false&sort=-updated_at", headers: auth))
            let cursor = JSONValue.parse(newest.body)?["records"]?.arrayValue?.first?["updated_at"]?.stringValue ?? ""
            let idle = Measure.median(try (0..<3).map { _ in try session.pull().seconds })
            let sample = try client.send(
                HTTPRequest(
                    url: session.server.url
                        + "/api/v1/data/task?top=1000&skip=\(50_000 + round * 130_000)&count=false&select=id",
                    headers: auth))
            let ids = (JSONValue.parse(sample.body)?["records"]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue }
            precondition(ids.count == 1000, "sampled \(ids.count) ids")
            for (index, id) in ids.enumerated() {
                let response = try client.send(
                    HTTPRequest(
                        method: .post, url: session.server.url + "/__control__/modify",
                        headers: [("Content-Type", "application/json")],
                        body: Array(#"{"object":"task","id":"\#(id)","fields":{"notes":"changed \#(round) \#(index)"}}"#.utf8)))
                precondition(response.status == 200, "modify failed")
            }
            let filter = #"["updated_at",">","\#(cursor)"]"#
            // The request alone is timed: checking the answer (decoding it) is not paging.
            let paging = Measure.median(
                try (0..<3).map { _ in
                    var response: HTTPResponse?
                    let seconds = try Measure.time {
                        response = try client.send(
                            HTTPRequest(
                                url: session.server.url
                                    + "/api/v1/data/task?sort=updated_at,id&top=2000&count=false&filter="
                                    + (filter.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""),
                                headers: auth))
                    }
                    let count = response.flatMap { JSONValue.parse($0.body)?["records"]?.arrayValue?.count }
                    precondition(count == 1000, "paged \(count ?? -1) changed records")
                    return seconds
                })
            let incremental = try session.pull().seconds
            owns.append(incremental - idle)
            pagings.append(paging)
            pulls.append(incremental)
            idles.append(idle)
        }
        let own = Measure.median(owns)
        let paging = Measure.median(pagings)
        results.append(
            BenchResult(
                name: "pull-incremental-1k-into-1m", value: own * 1000, unit: "ms", baseline: paging * 1000,
                ratio: own / paging,
                target:
                    "<= 2 x paging the 1000 records (medians of 7 rounds: pull \(Int(Measure.median(pulls) * 1000)) ms minus an empty pull \(Int(Measure.median(idles) * 1000)) ms)",
                // An own cost at or below zero is an estimator lost in noise (an empty pull as slow as
                // the real one: with a 30-second look-back both fetched 30 000 records again), not a
                // pull that costs nothing: not met.
                ok: own > 0 && own <= 2 * paging))

        // Queries on 1M: the same records, written through LocalStore.
        let (rows, item) = try fetchRows(session.server, count: 1_000_000)
        let (queries, scan1m) = try query(rows, item: item, suffix: "1m", timeCompound: false)
        results += queries
        // The compound scan at both sizes in alternating runs (one 1M run, then three 100k runs,
        // five times; each on a new connection): a baseline timed minutes earlier, on a machine
        // whose speed drifts, moved the ratio between 7.4 and 11.7 across runs of the same code.
        var large: [Double] = []
        var small: [Double] = []
        for _ in 0..<5 {
            large.append(try scan1m.coldScan())
            for _ in 0..<3 { small.append(try scan100k.coldScan()) }
        }
        let compound = Measure.median(large) * 1000
        let baseline = Measure.median(small) * 1000
        results.append(
            BenchResult(
                name: "query-compound-scan-1m", value: compound, unit: "ms (median)", baseline: baseline,
                ratio: compound / baseline,
                target: "<= 10 x the 100k scan (alternating runs: 5 at 1m, 15 at 100k, each on a new connection)",
                ok: compound <= 10 * baseline))
        return results
    }

    static func signIn(_ client: HTTPClient, _ server: DevServerProcess) throws -> String {
        let signIn = try client.send(
            HTTPRequest(
                method: .post, url: server.url + "/api/v1/auth/sign-in/email",
                headers: [("Content-Type", "application/json")],
                body: Array(#"{"email":"alice@example.com","password":"alice-pass"}"#.utf8)))
        return JSONValue.parse(signIn.body)?["token"]?.stringValue ?? ""
    }

    /// The seeded records as the server sends them (keyset pages, like the pull), and the task
    /// metadata item.
    static func fetchRows(_ server: DevServerProcess, count: Int) throws -> (Rows, JSONValue) {
        let client = HTTPClient()
        let auth = [("Authorization", "Bearer \(try signIn(client, server))")]
        var rows: Rows = []
        rows.reserveCapacity(count)
        let scanner = FieldScanner(fields: ["id", "updated_at"])
        var after: String?
        while true {
            var url = server.url + "/api/v1/data/task?top=5000&count=false&sort=updated_at,id"
            if let after {
                url +=
                    "&filter="
                    + (#"["updated_at",">","\#(after)"]"#.addingPercentEncoding(withAllowedCharacters: .alphanumerics)
                        ?? "")
            }
            let response = try client.send(HTTPRequest(url: url, headers: auth))
            let before = rows.count
            response.body.withUnsafeBytes { raw in
                for range in FieldScanner.recordRanges(in: raw)?.ranges ?? [] {
                    let slice = UnsafeRawBufferPointer(rebasing: raw[range])
                    let values = scanner.scan(slice)
                    if case .string(let id) = values[0], case .string(let version) = values[1] {
                        rows.append((id, version, Array(slice)))
                    }
                }
            }
            if rows.count - before < 5000 { break }
            after = rows.last?.version
        }
        precondition(rows.count == count, "fetched \(rows.count) rows")
        let meta = try client.send(HTTPRequest(url: server.url + "/api/v1/meta/object/task", headers: auth))
        return (rows, JSONValue.parse(meta.body)?["item"] ?? .null)
    }

    enum Shape {
        /// The storage floor: a rowid table, no index.
        case plainRowid
        /// The mirror before migration 0005: WITHOUT ROWID, clustered by (object, id).
        case previousMirror
        /// The mirror as it is (0006): `records` and the maps' levels, written by the pull's own
        /// write path (`mirrorSeconds`).
        case currentMirror
    }

    /// The same rows inserted with prepared statements into a database opened like an account
    /// database (4 KiB pages, WAL, secure_delete, same cipher and cache), as many rows per transaction
    /// as the pull commits at once (fewer, larger commits are faster for every shape), with plain
    /// INSERTs — the fastest raw insert of those rows (an `INSERT OR REPLACE` opens a statement
    /// journal, which SQLCipher encrypts page by page). The pre-0005 shape keeps its old figure:
    /// `INSERT OR REPLACE`, 2 000 rows per transaction.
    static func insertSeconds(_ rows: Rows, shape: Shape, item: JSONValue = .null) throws -> Double {
        if shape == .currentMirror { return try mirrorSeconds(rows, item: item) }
        let directory = TemporaryDirectory(prefix: "ostack-bench-raw")
        var options = Database.Options()
        options.pageSize = 4096  // the page size account databases use
        let database = try Database(path: directory.path + "/raw.db", key: DatabaseKey.generate(), options: options)
        try database.execute("PRAGMA cache_size = -\(PullTuning.cacheKiB)")  // the pull's
        switch shape {
        case .plainRowid, .currentMirror:
            try database.execute(
                "CREATE TABLE records (object TEXT NOT NULL, id TEXT NOT NULL, data TEXT NOT NULL, version TEXT)")
        case .previousMirror:
            try database.execute(
                "CREATE TABLE records (object TEXT NOT NULL, id TEXT NOT NULL, data TEXT NOT NULL, version TEXT, schema_version INTEGER NOT NULL DEFAULT 0, invalid INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (object, id)) WITHOUT ROWID"
            )
        }
        let statement = try database.prepare(
            shape == .previousMirror
                ? "INSERT OR REPLACE INTO records (object, id, data, version) VALUES (?, ?, ?, ?)"
                : "INSERT INTO records (object, id, data, version) VALUES (?, ?, ?, ?)")
        // The pull's commit size (the pre-0005 mirror committed every 2 000).
        let perTransaction = shape == .previousMirror ? 2000 : PullTuning.recordsPerCommit
        return try Measure.time {
            for start in stride(from: 0, to: rows.count, by: perTransaction) {
                try database.transaction { () throws -> Void in
                    for index in start..<min(start + perTransaction, rows.count) {
                        // Bound as the pull's writer binds: value by value, the record from its bytes.
                        let row = rows[index]
                        statement.reset()
                        statement.bindText("task", at: 1)
                        statement.bindText(row.id, at: 2)
                        row.json.withUnsafeBytes { statement.bindText(utf8: $0, at: 3) }
                        if let version = row.version {
                            statement.bindText(version, at: 4)
                        } else {
                            statement.bindNull(at: 4)
                        }
                        try statement.checkBindings()
                        _ = try statement.step()
                    }
                }
            }
        }
    }

    /// The same rows written into an account database through the pull's own write path
    /// (`LocalStore.applyPulled`: each row appended, keys and indexed values sorted and written as a
    /// level of the mirror's maps, the maps compacted), in the pull's transactions, with the indexed
    /// values found before the clock starts (the pull's checking thread finds them on the other
    /// core): everything a pull writes, without the process, the network, the parsing and the checks.
    static func mirrorSeconds(_ rows: Rows, item: JSONValue) throws -> Double {
        let directory = TemporaryDirectory(prefix: "ostack-bench-mirror")
        let store = try LocalStore(
            database: try AccountDatabase.open(
                path: directory.path + "/data.db", key: AccountDataKey(SecureRandom.secret(32))))
        guard let schema = ObjectSchema(item: item) else { throw BenchError("no task schema") }
        try store.track(schema)
        let names = try store.indexedFields("task").sorted()
        precondition(!names.isEmpty, "no indexed fields in the task metadata")
        let scanner = FieldScanner(fields: names)
        let values: [[FieldScanner.RawValue]] = rows.map { row in
            var found: [FieldScanner.RawValue] = []
            row.json.withUnsafeBytes { scanner.scanRaw($0, into: &found) }
            return found
        }
        try store.database.execute("PRAGMA cache_size = -\(PullTuning.cacheKiB)")  // the pull's
        let chunk = PullTuning.firstLoadRecordsPerCommit
        return try Measure.time {
            let load = try store.firstLoad("task")  // as a first pull writes
            for start in stride(from: 0, to: rows.count, by: chunk) {
                let end = min(start + chunk, rows.count)
                _ = try store.transaction { () throws(OStackError) -> Int in
                    try store.applyPulled(
                        "task", Array(rows[start..<end]), fields: (names, Array(values[start..<end])), load: load)
                }
            }
        }
    }

    /// A mirror written as a first pull writes it, and the compound scan on it, timed on a new
    /// connection (as every command starts).
    final class ScanFixture {
        static let filter = "status = 'open' and (amount >= 500 or title ends with '7')"
        let directory: TemporaryDirectory
        let path: String
        let key: AccountDataKey
        let condition: FilterCondition
        let expected: Int

        init(directory: TemporaryDirectory, path: String, key: AccountDataKey, rows: Rows) throws {
            self.directory = directory
            self.path = path
            self.key = key
            condition = try FilterCondition.parse(try FilterParser.parse(Self.filter).wireAST)
            let local = LocalFilter(condition)
            expected = rows.filter { row in row.json.withUnsafeBytes { local.matches($0) } }.count
        }

        /// Seconds of one scan on a connection opened for it (outside the clock).
        func coldScan() throws -> Double {
            let store = try LocalStore(database: try AccountDatabase.open(path: path, key: key))
            var total = 0
            let seconds = try Measure.time {
                total = try store.query(.init(object: "task", filter: condition, limit: 50)).total
            }
            precondition(total == expected, "compound scan: \(total) rows, expected \(expected)")
            return seconds
        }
    }

    static func query(_ rows: Rows, item: JSONValue, suffix: String, timeCompound: Bool = true) throws
        -> ([BenchResult], ScanFixture)
    {
        let directory = TemporaryDirectory(prefix: "ostack-bench-query")
        let path = directory.path + "/data.db"
        let key = AccountDataKey(SecureRandom.secret(32))
        let store = try LocalStore(database: try AccountDatabase.open(path: path, key: key))
        guard let schema = ObjectSchema(item: item) else { throw BenchError("no task schema") }
        try store.track(schema)
        // Written as a first pull writes them (its transactions, its levels).
        let chunk = PullTuning.firstLoadRecordsPerCommit
        let load = try store.firstLoad("task")
        for start in stride(from: 0, to: rows.count, by: chunk) {
            _ = try store.applyPulled("task", Array(rows[start..<min(start + chunk, rows.count)]), load: load)
        }
        // `cold`: each run on a connection opened for it (outside the clock), as every command
        // starts; otherwise all runs on the loading connection, whose page cache holds what the
        // last run read.
        func median(_ filter: String, runs: Int, cold: Bool = false) throws -> Double {
            let condition = try FilterCondition.parse(try FilterParser.parse(filter).wireAST)
            let local = LocalFilter(condition)
            let expect = rows.filter { row in row.json.withUnsafeBytes { local.matches($0) } }.count
            var samples: [Double] = []
            for _ in 0..<runs {
                var total = 0
                let queried = cold ? try LocalStore(database: try AccountDatabase.open(path: path, key: key)) : store
                samples.append(
                    try Measure.time {
                        total = try queried.query(.init(object: "task", filter: condition, limit: 50)).total
                    })
                precondition(total == expect, "\(filter): \(total) rows, expected \(expect)")
            }
            return Measure.median(samples) * 1000
        }
        let runs = rows.count > 200_000 ? 5 : 21
        let fixture = try ScanFixture(directory: directory, path: path, key: key, rows: rows)
        let indexed = try median("title = 'Seed 77777'", runs: runs, cold: true)
        var results = [
            BenchResult(
                name: "query-indexed-equality-\(suffix)", value: indexed, unit: "ms (median)", baseline: nil,
                ratio: nil, target: "<= 5 ms (each run on a new connection)", ok: indexed <= 5)
        ]
        // `records list`'s default page (no filter, the first 50 by id, and the count): read through
        // the keys map, not a scan (about a second at 1 000 000 records before).
        let firstPage = Measure.median(
            try (0..<runs).map { _ in
                let store = try LocalStore(database: try AccountDatabase.open(path: path, key: key))
                var total = 0
                let seconds = try Measure.time { total = try store.query(.init(object: "task", limit: 50)).total }
                precondition(total == rows.count, "first page: total \(total), expected \(rows.count)")
                return seconds
            }) * 1000
        results.append(
            BenchResult(
                name: "info-query-first-page-\(suffix)", value: firstPage, unit: "ms (median)", baseline: nil,
                ratio: nil, target: "information: records list's default page and count (each run on a new connection)",
                ok: true))
        if timeCompound {
            let compound = Measure.median(try (0..<runs).map { _ in try fixture.coldScan() }) * 1000
            results.append(
                BenchResult(
                    name: "query-compound-scan-\(suffix)", value: compound, unit: "ms (median)", baseline: nil,
                    ratio: nil, target: "information (each run on a new connection)", ok: true))
        }
        let warm = try median(ScanFixture.filter, runs: runs)
        results.append(
            BenchResult(
                name: "info-query-compound-scan-warm-\(suffix)", value: warm, unit: "ms (median)", baseline: nil,
                ratio: nil, target: "information: all runs on one connection, its page cache kept", ok: true))
        return (results, fixture)
    }

    /// Queues 10 000 creates offline, then times the push.
    static func pushSeconds(ostack: String, serverArguments: [String]) throws -> Double {
        let session = try Session(ostack: ostack, serverArguments: serverArguments)
        let file = session.home.path + "/creates.json"
        let items = (0..<10_000).map { "{\"title\":\"Push \($0)\",\"amount\":\($0 % 500),\"status\":\"open\"}" }
        try SecureFileSystem.writeAtomically(Array(("[" + items.joined(separator: ",") + "]").utf8), to: file)
        try session.run(["records", "create", "task", "--data", "@" + file, "--offline"])
        let seconds = try session.timed(["sync", "--push-only"])
        let body = try session.server.control("GET", "record?object=task&id=")
        precondition(body.contains("\"count\":10000"), "push left \(body)")
        return seconds
    }
}

extension SyncBench {
    /// `VmHWM` of a running process in kB (0 once it is gone).
    static func highWaterKB(_ pid: pid_t) -> Int {
        guard let file = fopen("/proc/\(pid)/status", "r") else { return 0 }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 256)
        while fgets(&line, Int32(line.count), file) != nil {
            let text = String(cString: line)
            if text.hasPrefix("VmHWM:") {
                return Int(text.dropFirst(6).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "") ?? 0
            }
        }
        return 0
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
