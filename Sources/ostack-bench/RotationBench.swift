import OStackTestSupport
import SQLCipherKit

/// Key rotation: in-place `rekey` vs `sqlcipher_export` to a new file + atomic replace, on the same
/// rows (decision record 0003).
enum RotationBench {
    static func run(rows: Int) throws -> [BenchResult] {
        let directory = TemporaryDirectory(prefix: "ostack-bench-rotation")
        func populate(_ path: String, key: DatabaseKey) throws {
            let database = try Database(path: path, key: key)
            try database.execute("CREATE TABLE records (id TEXT PRIMARY KEY, object TEXT, updated_at TEXT, body BLOB)")
            let insert = try database.prepare("INSERT INTO records VALUES (?, 'task', ?, ?)")
            let body = [UInt8](repeating: 0x61, count: 200)
            try database.transaction { () throws -> Void in
                for index in 0..<rows {
                    try insert.bind([.text("rec_\(index)"), .text("2026-01-01T00:00:00.\(index)Z"), .blob(body)])
                    try insert.step()
                }
            }
            try database.checkpoint()
        }
        let oldKey = DatabaseKey.generate()
        let newKey = DatabaseKey.generate()
        let rekeyPath = directory.appending("rekey.db")
        let exportPath = directory.appending("export.db")
        try populate(rekeyPath, key: oldKey)
        try populate(exportPath, key: oldKey)

        let rekeySeconds = try Measure.time {
            let database = try Database(path: rekeyPath, key: oldKey)
            try database.rekey(to: newKey)
        }
        let exportSeconds = try Measure.time {
            do {
                let database = try Database(path: exportPath, key: oldKey)
                try database.export(to: exportPath + ".new", key: newKey)
            }
            try Database.replace(exportPath, with: exportPath + ".new")
        }
        // Both must end readable under the new key with every row.
        for path in [rekeyPath, exportPath] {
            let count = try Database(path: path, key: newKey).scalarInteger("SELECT count(*) FROM records")
            precondition(count == Int64(rows), "rotation lost rows")
        }
        return [
            BenchResult(
                name: "rotation-rekey", value: rekeySeconds * 1000, unit: "ms", baseline: nil, ratio: nil,
                target: "informational (\(rows) rows)", ok: true),
            BenchResult(
                name: "rotation-export", value: exportSeconds * 1000, unit: "ms", baseline: rekeySeconds * 1000,
                ratio: exportSeconds / rekeySeconds, target: "informational (\(rows) rows)", ok: true),
        ]
    }
}
