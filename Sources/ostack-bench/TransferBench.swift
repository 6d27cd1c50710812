import FoundationEssentials
import OStackCore
import OStackTestSupport
import PlatformKit
import SQLCipherKit

/// `records export` and `records import` (issue 17), against baselines measured in the same run:
/// - `export-100k`: exporting 100 000 mirrored records to a CSV file, as a rate, ≥ 0.5 × the rate of
///   reading the same rows at the SQLCipher level (every row's JSON stepped through with a prepared
///   statement, same page size and cipher); `export-100k-peak-rss` ≤ 80 MB.
/// - `import-10k`: importing 10 000 CSV rows and pushing them ≤ 1.2 × `sync --push-only` of 10 000
///   queued creates (the same records, already queued), each against a fresh dev server.
enum TransferBench {
    static let rows = ["export-100k", "export-100k-peak-rss", "import-10k"]

    static func run(ostack: String) throws -> [BenchResult] {
        var results: [BenchResult] = []
        // Export: the mirror of 100 000 records.
        let session = try SyncBench.Session(ostack: ostack)
        try session.server.control("POST", "seed", #"{"object":"task","count":100000}"#)
        try session.run(["sync", "track", "task"])
        _ = try session.pull()
        let (rows, _) = try SyncBench.fetchRows(session.server, count: 100_000)
        // Three of each, alternating (a busy machine slows both alike); medians compared, and the
        // largest peak answers the memory bound.
        var exports: [(seconds: Double, peakMB: Double)] = []
        var reads: [Double] = []
        for round in 0..<3 {
            let file = session.home.path + "/export-\(round).csv"
            exports.append(
                try session.measured(["records", "export", "task", "--local", "--format", "csv", "--output", file]))
            reads.append(try readSeconds(rows))
        }
        let export = (seconds: Measure.median(exports.map(\.seconds)), peakMB: exports.map(\.peakMB).max()!)
        let read = Measure.median(reads)
        let exportRate = 100_000 / export.seconds
        let readRate = 100_000 / read
        results.append(
            BenchResult(
                name: "export-100k", value: exportRate, unit: "records/s", baseline: readRate,
                ratio: exportRate / readRate, target: ">= 0.5 x SQLCipher-level read of the same rows",
                ok: exportRate >= 0.5 * readRate))
        results.append(
            BenchResult(
                name: "export-100k-peak-rss", value: export.peakMB, unit: "MB", baseline: nil, ratio: nil,
                target: "<= 80 MB", ok: export.peakMB <= 80))

        // Import: 10 000 CSV rows into a fresh account vs pushing the same 10 000 creates queued.
        let csv = session.home.path + "/import.csv"
        let lines = ["title,amount,status"] + (0..<10_000).map { "Import \($0),\($0 % 500),open" }
        try TemporaryDirectory.writeLines(lines, to: csv)
        // Three pairs, alternating (a busy machine slows both alike); the medians are compared.
        var imports: [Double] = []
        var pushes: [Double] = []
        for _ in 0..<3 {
            let importer = try SyncBench.Session(ostack: ostack)
            imports.append(try importer.timed(["records", "import", "task", csv, "--key", "title"]))
            let count = try importer.server.control("GET", "record?object=task&id=")
            precondition(count.contains("\"count\":10000"), "import left \(count)")
            pushes.append(try SyncBench.pushSeconds(ostack: ostack, serverArguments: []))
        }
        let imported = Measure.median(imports)
        let push = Measure.median(pushes)
        results.append(
            BenchResult(
                name: "import-10k", value: imported * 1000, unit: "ms", baseline: push * 1000, ratio: imported / push,
                target: "<= 1.2 x sync --push-only of 10 000 queued creates", ok: imported <= 1.2 * push))
        return results
    }

    /// The rows written to a database opened like an account database, then read back: the time of
    /// one pass over every row's JSON with a prepared statement.
    static func readSeconds(_ rows: SyncBench.Rows) throws -> Double {
        let directory = TemporaryDirectory(prefix: "ostack-bench-read")
        var options = Database.Options()
        options.pageSize = 4096
        let database = try Database(path: directory.path + "/read.db", key: DatabaseKey.generate(), options: options)
        try database.execute(
            "CREATE TABLE records (rid INTEGER PRIMARY KEY, object TEXT NOT NULL, id TEXT NOT NULL, data TEXT NOT NULL, version TEXT)"
        )
        let insert = try database.prepare("INSERT INTO records (object, id, data, version) VALUES (?, ?, ?, ?)")
        try database.transaction { () throws -> Void in
            for row in rows {
                try insert.bind([.text("task"), .text(row.id), .text(String(decoding: row.json, as: UTF8.self)), .null])
                _ = try insert.step()
                insert.reset()
            }
        }
        let select = try database.prepare("SELECT id, data FROM records WHERE object = ? ORDER BY rid")
        var bytes = 0
        let seconds = try Measure.time {
            try select.bind([.text("task")])
            while try select.step() { bytes += select.withColumnBytes(at: 1) { $0.count } }
            select.reset()
        }
        precondition(bytes > 0)
        return seconds
    }
}
