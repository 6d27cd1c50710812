// ostack-bench: release-build benchmarks for `make bench` (docs/testing.md). Never linked into ostack.
//   ostack-bench [--only NAME,…] [--json PATH] [--fixtures DIR]   (NAME: a group such as `cli`, or a row)
import FoundationEssentials
import Glibc
import PlatformKit

var only: Set<String>?
var jsonPath = "bench-results.json"
var fixtures = "Tests/CurlKitTests/Fixtures"
var ostackBinary = ".build/release/ostack"
var arguments = Array(CommandLine.arguments.dropFirst())
while !arguments.isEmpty {
    let flag = arguments.removeFirst()
    switch flag {
    case "--only": only = Set(arguments.removeFirst().split(separator: ",").map(String.init))
    case "--json": jsonPath = arguments.removeFirst()
    case "--fixtures": fixtures = arguments.removeFirst()
    case "--ostack": ostackBinary = arguments.removeFirst()
    default:
        FileHandleLite.err("unknown flag \(flag)\n")
        exit(64)
    }
}

let selected = only
/// A group runs when `--only` names it or one of its rows (all the group's rows are then reported).
func wanted(_ name: String, rows: [String] = []) -> Bool {
    selected.map { $0.contains(name) || rows.contains(where: $0.contains) } ?? true
}

var results: [BenchResult] = []
do {
    if wanted("crypto") { results += try CryptoBench.run() }
    if wanted("rotation") { results += try RotationBench.run(rows: 100_000) }
    if wanted("unlock", rows: UnlockBench.rows) { results += try UnlockBench.run(ostack: ostackBinary) }
    if wanted("cli", rows: CLIBench.rows) { results += try CLIBench.run(ostack: ostackBinary) }
    if wanted("devserver") { results += try DevServerBench.run() }
    if selected.map({ $0.contains { ["sync", "pull-100k", "pull-1m", "push"].contains($0) } }) ?? true {
        results += try SyncBench.run(ostack: ostackBinary, only: selected)
    }
    if wanted("transfer", rows: TransferBench.rows) { results += try TransferBench.run(ostack: ostackBinary) }
    if wanted("transport") {
        results += try TransportBench.run(serverScript: fixtures + "/test_server.py", requests: 2000)
    }
} catch {
    FileHandleLite.err("benchmark failed: \(error)\n")
    exit(1)
}

// Table
let header = ["bench", "value", "unit", "baseline", "ratio", "target", "ok"]
let rows = results.map { result in
    [
        result.name, format3(result.value), result.unit, result.baseline.map { format3($0) } ?? "-",
        result.ratio.map { format3($0) } ?? "-", result.target, result.ok ? "yes" : "NO",
    ]
}
var widths = header.map(\.count)
for row in rows { for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) } }
let finalWidths = widths
func line(_ cells: [String]) -> String {
    cells.enumerated().map { $0.element + String(repeating: " ", count: finalWidths[$0.offset] - $0.element.count) }
        .joined(separator: "  ")
}
print(line(header))
for row in rows { print(line(row)) }

struct Document: Encodable { var benches: [BenchResult] }
let encoder = JSONEncoder()
encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
if let data = try? encoder.encode(Document(benches: results)) {
    try? SecureFileSystem.writeAtomically(Array(data), to: jsonPath)
}
exit(results.allSatisfy(\.ok) ? 0 : 1)

func format3(_ value: Double) -> String {
    let scaled = (value * 1000).rounded() / 1000
    return String(scaled)
}

enum FileHandleLite {
    static func err(_ text: String) { _ = text.withCString { write(2, $0, strlen($0)) } }
}
