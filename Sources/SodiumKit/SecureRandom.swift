internal import CSodium

/// The operating system's CSPRNG through libsodium (`randombytes_*`).
public enum SecureRandom {
    /// Public random bytes (salts, nonces, identifiers).
    public static func bytes(_ count: Int) -> [UInt8] {
        Sodium.ensureInitialized()
        var result = [UInt8](repeating: 0, count: count)
        result.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, count) }
        return result
    }

    /// Secret random bytes in guarded memory (keys).
    public static func secret(_ count: Int) -> SecretBytes {
        SecretBytes(randomCount: count)
    }

    /// A uniformly distributed integer in `0..<upperBound` (no modulo bias).
    public static func uniform(_ upperBound: UInt32) -> UInt32 {
        Sodium.ensureInitialized()
        return randombytes_uniform(upperBound)
    }
}
