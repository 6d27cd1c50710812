import CurlKit
import FoundationEssentials
import Glibc
import OStackCore
import OStackTestSupport
import PlatformKit
import SQLCipherKit
import SodiumKit

/// The sync core's targets (docs/testing.md), each against a baseline measured in the same run:
///
/// - `pull`: `ostack sync --pull-only` of 100 000 records (the real binary, real keyring, dev server)
///   vs inserting the same rows into a bare SQLCipher table (the floor: ≥ 50 %); peak RSS ≤ 150 MB.
/// - `push`: `ostack sync --push-only` of 10 000 queued creates, batched, vs the same against a server
///   whose batch cap is 1 (one request per mutation): ≥ 10× faster and ≤ 5 s.
/// - `query`: `LocalStore.query` on 100 000 records — an indexed equality ≤ 5 ms, a compound scan
///   (no index applies) ≤ 150 ms; baseline: a bare `count(*)` over the same rows.
enum SyncBench {
    static let records = 100_000

    struct Session {
        let server: DevServerProcess
        let home: TemporaryDirectory
        let environment: [String: String]
        let ostack: String

        init(ostack: String, serverArguments: [String] = []) throws {
            self.ostack = ostack
            server = try DevServerProcess(arguments: serverArguments)
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
                timeout: 600)
            precondition(result.status == 0, "ostack \(arguments.first ?? "") failed: \(result.stderr)")
            return result
        }

        func timed(_ arguments: [String]) throws -> Double {
            let start = Measure.now()
            try run(arguments)
            return Measure.now() - start
        }
    }

    static func run(ostack: String) throws -> [BenchResult] {
        var results: [BenchResult] = []
        if getenv("OSTACK_BENCH_PLAN") != nil {
            let session = try Session(ostack: ostack)
            try session.server.control("POST", "seed", #"{"object":"task","count":\#(records)}"#)
            let (rows, item) = try fetchRows(session.server)
            return try query(rows, item: item)
        }

        // Pull.
        let session = try Session(ostack: ostack)
        try session.server.control("POST", "seed", #"{"object":"task","count":\#(records)}"#)
        try session.run(["sync", "track", "task"])
        // The pull's peak RSS: VmHWM of its own address space, sampled until it exits. (rusage's
        // ru_maxrss is useless here: a posix_spawn'd child inherits the bench's own high-water mark.)
        let start = Measure.now()
        let child = try ChildProcess(
            executable: ostack, arguments: ["sync", "--pull-only"], environment: session.environment)
        var peakKB = 0
        var status: Int32?
        while status == nil {
            peakKB = max(peakKB, Self.highWaterKB(child.pid))
            status = try? child.waitForExit(timeout: 0.005)
            if Measure.now() - start > 600 { throw BenchError("pull timed out") }
        }
        let pullSeconds = Measure.now() - start
        precondition(status == 0, "pull failed: \(child.stderrText())")
        let peakMB = Double(peakKB) / 1024
        let (rows, item) = try fetchRows(session.server)
        let insertSeconds = try rawInsert(rows)
        let pullRate = Double(records) / pullSeconds
        let insertRate = Double(records) / insertSeconds
        results.append(
            BenchResult(
                name: "pull-100k", value: pullRate, unit: "records/s", baseline: insertRate,
                ratio: pullRate / insertRate,
                target: ">= 50 % of raw SQLCipher insert rate", ok: pullRate >= 0.5 * insertRate))
        results.append(
            BenchResult(
                name: "pull-100k-peak-rss", value: peakMB, unit: "MB", baseline: nil, ratio: nil, target: "<= 150 MB",
                ok: peakMB <= 150))

        // Query.
        results += try query(rows, item: item)

        // Push.
        let batched = try pushSeconds(ostack: ostack, serverArguments: [])
        let single = try pushSeconds(ostack: ostack, serverArguments: ["--batch-cap", "1"])
        results.append(
            BenchResult(
                name: "push-10k-creates", value: batched * 1000, unit: "ms", baseline: single * 1000,
                ratio: single / batched,
                target: ">= 10x faster than one request per mutation; <= 5000 ms",
                ok: single / batched >= 10 && batched <= 5))
        return results
    }

    /// The seeded records as the server sends them, and the task metadata item.
    static func fetchRows(_ server: DevServerProcess) throws -> (
        [(id: String, version: String?, json: [UInt8])], JSONValue
    ) {
        let client = HTTPClient()
        let signIn = try client.send(
            HTTPRequest(
                method: .post, url: server.url + "/api/v1/auth/sign-in/email",
                headers: [("Content-Type", "application/json")],
                body: Array(#"{"email":"alice@example.com","password":"alice-pass"}"#.utf8)))
        let token = JSONValue.parse(signIn.body)?["token"]?.stringValue ?? ""
        let auth = [("Authorization", "Bearer \(token)")]
        var rows: [(id: String, version: String?, json: [UInt8])] = []
        let scanner = FieldScanner(fields: ["id", "updated_at"])
        for page in 0..<(records / 2000) {
            let response = try client.send(
                HTTPRequest(
                    url: server.url + "/api/v1/data/task?top=2000&skip=\(page * 2000)&count=false&sort=updated_at,id",
                    headers: auth))
            response.body.withUnsafeBytes { raw in
                for range in FieldScanner.recordRanges(in: raw)?.ranges ?? [] {
                    let slice = UnsafeRawBufferPointer(rebasing: raw[range])
                    let values = scanner.scan(slice)
                    if case .string(let id) = values[0], case .string(let version) = values[1] {
                        rows.append((id, version, Array(slice)))
                    }
                }
            }
        }
        precondition(rows.count == records, "fetched \(rows.count) rows")
        let meta = try client.send(HTTPRequest(url: server.url + "/api/v1/meta/object/task", headers: auth))
        return (rows, JSONValue.parse(meta.body)?["item"] ?? .null)
    }

    /// The floor: the same rows into the same table shape (no expression indexes), prepared
    /// statement, one transaction per 2 000 rows — what the pull does minus HTTP, parsing and indexes.
    static func rawInsert(_ rows: [(id: String, version: String?, json: [UInt8])]) throws -> Double {
        let directory = TemporaryDirectory(prefix: "ostack-bench-raw")
        var options = Database.Options()
        options.pageSize = 4096  // the page size account databases use
        let database = try Database(path: directory.path + "/raw.db", key: DatabaseKey.generate(), options: options)
        // Exactly the mirror's table (LocalStore.schema), without the indexes tracking adds.
        let ddl = LocalStore.schema.components(separatedBy: ";").first { $0.contains("CREATE TABLE records") } ?? ""
        try database.execute(ddl)
        let statement = try database.prepare(
            "INSERT OR REPLACE INTO records (object, id, data, version) VALUES (?, ?, ?, ?)")
        return try Measure.time {
            for start in stride(from: 0, to: rows.count, by: 2000) {
                try database.transaction { () throws -> Void in
                    for row in rows[start..<min(start + 2000, rows.count)] {
                        try statement.bind([
                            .text("task"), .text(row.id), .text(String(decoding: row.json, as: UTF8.self)),
                            .text(row.version ?? ""),
                        ])
                        _ = try statement.step()
                    }
                }
            }
        }
    }

    static func query(_ rows: [(id: String, version: String?, json: [UInt8])], item: JSONValue) throws -> [BenchResult]
    {
        let directory = TemporaryDirectory(prefix: "ostack-bench-query")
        let database = try AccountDatabase.open(
            path: directory.path + "/data.db", key: AccountDataKey(SecureRandom.secret(32)))
        let store = try LocalStore(database: database)
        guard let schema = ObjectSchema(item: item) else { throw BenchError("no task schema") }
        try store.track(schema)
        for start in stride(from: 0, to: rows.count, by: 5000) {
            _ = try store.applyPulled("task", Array(rows[start..<min(start + 5000, rows.count)]))
        }
        func median(_ filter: String) throws -> Double {
            let condition = try FilterCondition.parse(try FilterParser.parse(filter).wireAST)
            let local = LocalFilter(condition)
            let expect = rows.filter { row in row.json.withUnsafeBytes { local.matches($0) } }.count
            var samples: [Double] = []
            for _ in 0..<21 {
                var total = 0
                samples.append(
                    try Measure.time {
                        total = try store.query(.init(object: "task", filter: condition, limit: 50)).total
                    })
                precondition(total == expect, "\(filter): \(total) rows, expected \(expect)")
            }
            return Measure.median(samples) * 1000
        }
        if getenv("OSTACK_BENCH_PLAN") != nil {
            for row in try database.query(
                "EXPLAIN QUERY PLAN SELECT data FROM records WHERE object = 'task' AND ostack_field(data, 'title') IN (?) ORDER BY +id",
                [.text("Seed 77777")])
            {
                print(row.values)
            }
            for row in try database.query("SELECT name, sql FROM sqlite_master WHERE type = 'index'") {
                print(row.values)
            }
        }
        let indexed = try median("title = 'Seed 77777'")
        let compound = try median("status = 'open' and (amount >= 500 or title ends with '7')")
        var scanSamples: [Double] = []
        for _ in 0..<21 {
            scanSamples.append(
                try Measure.time {
                    _ = try database.scalarInteger("SELECT count(*) FROM records WHERE object = 'task'")
                })
        }
        let scan = Measure.median(scanSamples) * 1000
        return [
            BenchResult(
                name: "query-indexed-equality", value: indexed, unit: "ms (median)", baseline: scan,
                ratio: indexed / scan,
                target: "<= 5 ms", ok: indexed <= 5),
            BenchResult(
                name: "query-compound-scan", value: compound, unit: "ms (median)", baseline: scan,
                ratio: compound / scan,
                target: "<= 150 ms", ok: compound <= 150),
        ]
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
