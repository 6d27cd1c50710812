/// One row of `bench-results.json` (docs/testing.md, "Benchmarks and reliability targets").
struct BenchResult: Encodable {
    var name: String
    var value: Double
    var unit: String
    var baseline: Double?
    var ratio: Double?
    var target: String
    var ok: Bool
}
