internal import CSodium

/// Argon2id password hashing (`crypto_pwhash`, ARGON2ID13) — docs/security.md#sod-2 … #sod-4.
///
/// The parameters (algorithm, ops limit, memory limit, salt) travel with everything derived from
/// them and are stored beside it; deriving again always uses the stored values, never today's
/// library constants, so a libsodium upgrade cannot silently change a key.
public enum Argon2id {
    /// The stored recipe of one derivation.
    public struct Parameters: Sendable, Equatable, Codable {
        /// libsodium's algorithm id; only `crypto_pwhash_ALG_ARGON2ID13` is accepted.
        public var algorithm: Int32
        public var opsLimit: UInt64
        /// Memory limit in bytes.
        public var memLimit: UInt64
        public var salt: [UInt8]

        public init(algorithm: Int32 = Argon2id.algorithmID, opsLimit: UInt64, memLimit: UInt64, salt: [UInt8]) {
            self.algorithm = algorithm
            self.opsLimit = opsLimit
            self.memLimit = memLimit
            self.salt = salt
        }

        /// libsodium's INTERACTIVE limits with a fresh random salt (2 passes, 64 MiB).
        public static func interactive() -> Parameters {
            Sodium.ensureInitialized()
            return Parameters(
                opsLimit: UInt64(crypto_pwhash_opslimit_interactive()),
                memLimit: UInt64(crypto_pwhash_memlimit_interactive()), salt: Argon2id.freshSalt())
        }

        /// libsodium's MODERATE limits with a fresh random salt (3 passes, 256 MiB) — ostack's default.
        public static func moderate() -> Parameters {
            Sodium.ensureInitialized()
            return Parameters(
                opsLimit: UInt64(crypto_pwhash_opslimit_moderate()),
                memLimit: UInt64(crypto_pwhash_memlimit_moderate()), salt: Argon2id.freshSalt())
        }

        /// libsodium's SENSITIVE limits with a fresh random salt (4 passes, 1 GiB).
        public static func sensitive() -> Parameters {
            Sodium.ensureInitialized()
            return Parameters(
                opsLimit: UInt64(crypto_pwhash_opslimit_sensitive()),
                memLimit: UInt64(crypto_pwhash_memlimit_sensitive()), salt: Argon2id.freshSalt())
        }

        /// Checks the algorithm, the salt length and libsodium's bounds.
        public func validate() throws(SodiumError) {
            Sodium.ensureInitialized()
            guard algorithm == Argon2id.algorithmID else { throw .invalidParameters }
            guard salt.count == Argon2id.saltLength else {
                throw .invalidSaltLength(expected: Argon2id.saltLength, actual: salt.count)
            }
            guard opsLimit >= UInt64(crypto_pwhash_opslimit_min()), opsLimit <= UInt64(crypto_pwhash_opslimit_max()),
                memLimit >= UInt64(crypto_pwhash_memlimit_min()), memLimit <= UInt64(crypto_pwhash_memlimit_max())
            else { throw .invalidParameters }
        }
    }

    /// The costs an envelope may ask for: from libsodium's minimum (tests) to its SENSITIVE limits
    /// (4 passes, 1 GiB). No salt is drawn: these are bounds, not parameters.
    public static var acceptedCost: (opsLimit: ClosedRange<UInt64>, memLimit: ClosedRange<UInt64>) {
        Sodium.ensureInitialized()
        return (
            UInt64(crypto_pwhash_opslimit_min())...UInt64(crypto_pwhash_opslimit_sensitive()),
            UInt64(crypto_pwhash_memlimit_min())...UInt64(crypto_pwhash_memlimit_sensitive())
        )
    }

    /// `crypto_pwhash_ALG_ARGON2ID13`.
    public static var algorithmID: Int32 {
        Sodium.ensureInitialized()
        return crypto_pwhash_alg_argon2id13()
    }

    /// `crypto_pwhash_saltbytes()` (16).
    public static var saltLength: Int {
        Sodium.ensureInitialized()
        return crypto_pwhash_saltbytes()
    }

    public static func freshSalt() -> [UInt8] { SecureRandom.bytes(saltLength) }

    /// Derives `length` bytes from `password` with exactly `parameters`.
    public static func deriveKey(password: SecretBytes, parameters: Parameters, length: Int = 32) throws(SodiumError)
        -> SecretBytes
    {
        try parameters.validate()
        guard length >= Int(crypto_pwhash_bytes_min()), password.count > 0 else { throw .invalidInput }
        let output = SecretBytes(zeroedCount: length)
        let rc = output.withUnsafeMutableBytes { out in
            password.withUnsafeBytes { pw in
                parameters.salt.withUnsafeBytes { salt in
                    crypto_pwhash(
                        out.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(length),
                        pw.baseAddress!.assumingMemoryBound(to: CChar.self), UInt64(pw.count),
                        salt.baseAddress!.assumingMemoryBound(to: UInt8.self), parameters.opsLimit,
                        Int(parameters.memLimit), parameters.algorithm)
                }
            }
        }
        guard rc == 0 else { throw .outOfMemory }
        return output
    }
}
