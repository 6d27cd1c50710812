import SodiumKit

/// Argon2id cost at INTERACTIVE and MODERATE (docs/security.md#sod-3; the unlock bench's baseline).
enum CryptoBench {
    static func run() throws -> [BenchResult] {
        let password = SecretBytes(copying: Array("correct horse battery staple".utf8))
        var results: [BenchResult] = []
        for (name, parameters) in [
            ("argon2id-interactive", Argon2id.Parameters.interactive()),
            ("argon2id-moderate", Argon2id.Parameters.moderate()),
        ] {
            let seconds = try Measure.time { _ = try Argon2id.deriveKey(password: password, parameters: parameters) }
            results.append(
                BenchResult(
                    name: name, value: seconds * 1000, unit: "ms", baseline: nil, ratio: nil,
                    target: "informational", ok: true))
        }
        return results
    }
}
